#include "airlockd/control_plane.hpp"

#include <ctime>

#include <caf/send.hpp>

#include "actors/sandbox_procedures.hpp"
#include "actors/template_procedures.hpp"
#include "airlockd/certificate_authorities.hpp"
#include "airlockd/daemon.hpp"
#include "crypto/cluster_certificates.hpp"
#include "crypto/sealed_box.hpp"
#include "gateway/api_routes.hpp"
#include "gateway/e2b_envd_routes.hpp"
#include "gateway/e2b_routes.hpp"
#include "scheduler/cluster_listener.hpp"
#include "scheduler/scheduler_actor.hpp"

namespace airlock::airlockd {

control_plane::~control_plane() { stop(); }

status control_plane::start(caf::actor_system& system, storage::kv_store& store,
                            const std::string& data_dir,
                            const std::optional<gateway::endpoint>& cluster_listen,
                            const cluster_authorities* authorities) {
  system_ = &system;
  if (auto made = ensure_private_directory(data_dir + "/keys"); !made)
    return made;
  auto signer = gateway::token_signer::load_or_create(data_dir + "/keys/token.pem");
  if (!signer)
    return make_status(signer.code(), "cannot load the token key: " + signer.error().message);
  signer_.emplace(std::move(*signer));
  auto master_key = crypto::load_or_create_key_file(data_dir + "/credentials.key");
  if (!master_key)
    return make_status(master_key.code(),
                       "cannot load the credentials key: " + master_key.error().message);
  auto egress_ca = load_or_create_egress_ca(data_dir);
  if (!egress_ca)
    return make_status(egress_ca.code(), "cannot load the egress CA: " + egress_ca.error().message);
  registry_ = actors::spawn_sandbox_registry(system, store, clock_);
  api_keys_ = actors::spawn_api_key_actor(system, store, clock_);
  audit_ = actors::spawn_audit_actor(system, store, clock_, audit_options_);
  actors::credential_actor_deps credential_deps;
  credential_deps.store = &store;
  credential_deps.master_key = std::move(*master_key);
  credential_deps.clock = &clock_;
  credential_deps.entropy = &entropy_;
  credential_deps.registry = registry_;
  credential_deps.log = log_.with_component("credentials");
  credentials_ = actors::spawn_credential_actor(system, std::move(credential_deps));
  scheduler::scheduler_deps deps;
  deps.token_public_key = signer_->public_key();
  deps.clock = &clock_;
  deps.entropy = &entropy_;
  deps.issue_egress_ca = [root = std::move(*egress_ca)](std::string_view public_key_pem,
                                                        std::string_view worker_id) {
    return issue_worker_egress_ca(root, public_key_pem, worker_id);
  };
  deps.credentials = credentials_;
  deps.audit = audit_;
  if (authorities != nullptr) {
    auto revocations = actors::revocation_list::load(store, clock_);
    if (!revocations)
      return make_status(revocations.code(),
                         "cannot read the revoked workers: " + revocations.error().message);
    revocations_ = std::move(*revocations);
    deps.issue_member = [worker_ca = authorities->worker_ca](std::string_view csr,
                                                             std::string_view worker_id) {
      return crypto::issue_member_certificate(worker_ca, csr, worker_id, crypto::member_valid_days);
    };
    deps.verify_member =
      [worker_ca = authorities->worker_ca.cert_pem,
       revoked = revocations_.get()](const std::string& certificate, const std::string& proof,
                                     const std::string& message) -> result<std::string> {
      auto member = crypto::verify_member_certificate(worker_ca, certificate,
                                                      static_cast<int64_t>(std::time(nullptr)));
      if (!member)
        return member.error();
      if (revoked->is_revoked(member->name))
        return make_status(errc::gone, "the certificate of " + member->name
                                         + " was revoked when the worker was removed; a new "
                                           "worker joins with a new token");
      if (!crypto::verify_message(certificate, message, proof))
        return make_status(errc::permission_denied,
                           "its registration is not signed by its certificate's key");
      return member->name;
    };
  }
  metrics_.describe("airlock_cluster_registrations_refused_total",
                    "Worker registrations the scheduler refused, by reason.", "counter");
  deps.on_refused = [metrics = &metrics_, log = log_.with_component("scheduler")](
                      std::string_view reason, std::string_view worker_id,
                      const std::string& message) {
    metrics->counter_add("airlock_cluster_registrations_refused_total",
                         {{"reason", std::string(reason)}});
    log.warn(
      "refused a worker registration",
      {{"reason", std::string(reason)}, {"worker_id", std::string(worker_id)}, {"error", message}});
  };
  scheduler_ = scheduler::spawn_scheduler(system, {}, deps);
  procedures_ = actors::spawn_sandbox_procedures(system, registry_, scheduler_);
  procedures_.merge(actors::spawn_template_procedures(system, registry_, scheduler_));
  reconciler_ = actors::spawn_reconciler(system, registry_, scheduler_, {}, audit_);
  gateway::describe_control_metrics(metrics_);
  if (cluster_listen) {
    auto port =
      scheduler::publish_scheduler(system, scheduler_, cluster_listen->host, cluster_listen->port,
                                   authorities != nullptr ? scheduler::cluster_transport::tls
                                                          : scheduler::cluster_transport::plain);
    if (!port)
      return make_status(port.code(), "cannot listen for workers on "
                                        + gateway::to_string(*cluster_listen) + ": "
                                        + port.error().message);
    cluster_port_ = *port;
    log_.info("listening for workers",
              {{"address", cluster_listen->host + ":" + std::to_string(cluster_port_)}});
  }
  if (cluster_listen && authorities != nullptr) {
    // Admission: the join tokens (the routes answer 404 without them, as in
    // `serve`).
    join_tokens_ = std::make_unique<actors::join_token_book>(store, clock_);
    auto admission = std::make_shared<gateway::cluster_admission>();
    admission->tokens = join_tokens_.get();
    admission->revocations = revocations_.get();
    admission->worker_ca = authorities->worker_ca;
    admission->control_ca_pem = authorities->control_ca.cert_pem;
    admission->control_ca_fingerprint = authorities->control_ca_fingerprint;
    admission->cluster_port = cluster_port_;
    metrics_.describe("airlock_cluster_joins_refused_total",
                      "Worker joins the control plane refused, by reason.", "counter");
    metrics_.describe("airlock_cluster_joins_total", "Workers admitted with a join token.",
                      "counter");
    admission->on_refused = [metrics = &metrics_, log = log_.with_component("admission")](
                              std::string_view reason, const std::string& message) {
      metrics->counter_add("airlock_cluster_joins_refused_total",
                           {{"reason", std::string(reason)}});
      log.warn("refused a worker's join", {{"reason", std::string(reason)}, {"error", message}});
    };
    admission_ = std::move(admission);
  }
  return status::ok();
}

void control_plane::stop() {
  if (!system_)
    return;
  for (const auto& [kind, runner] : procedures_)
    caf::anon_send_exit(runner, caf::exit_reason::user_shutdown);
  procedures_.clear();
  if (reconciler_)
    caf::anon_send_exit(reconciler_, caf::exit_reason::user_shutdown);
  reconciler_ = nullptr;
  if (policy_)
    caf::anon_send_exit(policy_, caf::exit_reason::user_shutdown);
  policy_ = nullptr;
  if (pools_)
    caf::anon_send_exit(pools_, caf::exit_reason::user_shutdown);
  pools_ = nullptr;
  if (scheduler_)
    caf::anon_send_exit(scheduler_, caf::exit_reason::user_shutdown);
  if (registry_)
    caf::anon_send_exit(registry_, caf::exit_reason::user_shutdown);
  if (api_keys_)
    caf::anon_send_exit(api_keys_, caf::exit_reason::user_shutdown);
  if (credentials_)
    caf::anon_send_exit(credentials_, caf::exit_reason::user_shutdown);
  if (audit_)
    caf::anon_send_exit(audit_, caf::exit_reason::user_shutdown);
  scheduler_ = nullptr;
  registry_ = nullptr;
  api_keys_ = nullptr;
  credentials_ = nullptr;
  audit_ = nullptr;
  system_ = nullptr;
}

void control_plane::start_policies(const actors::operation_engine_actor& engine) {
  if (!system_ || policy_)
    return;
  policy_ = actors::spawn_lifecycle_policy(*system_, registry_, scheduler_, engine, clock_);
  actors::pool_actor_deps pool_deps;
  pool_deps.registry = registry_;
  pool_deps.scheduler = scheduler_;
  pool_deps.engine = engine;
  pool_deps.clock = &clock_;
  pool_deps.entropy = &entropy_;
  pool_deps.metrics = &metrics_;
  pools_ = actors::spawn_pool_actor(*system_, std::move(pool_deps));
}

void control_plane::reconcile_now() {
  if (reconciler_)
    caf::anon_send(reconciler_, actors::rc_tick_atom::value);
}

gateway::http_server_options listener_options(gateway::http_server_options http,
                                              const control_settings& settings) {
  if (!settings.e2b_domain.empty())
    http.rewrite_request = gateway::e2b_host_rewriter(settings.e2b_domain);
  return http;
}

void control_plane::configure(const control_settings& settings) {
  audit_options_.audit_retention_hours = settings.audit_retention_hours;
  e2b_domain_ = settings.e2b_domain;
  // The option parser validated the text already.
  if (auto parsed = parse_template_egress(settings.template_egress))
    template_egress_ = std::move(*parsed);
}

void control_plane::add_routes(gateway::route_table& routes,
                               const actors::operation_engine_actor& engine) {
  gateway::control_api_deps deps;
  deps.system = system_;
  deps.engine = engine;
  deps.registry = registry_;
  deps.api_keys = api_keys_;
  deps.scheduler = scheduler_;
  deps.signer = &*signer_;
  deps.envd_tokens = envd_tokens_;
  deps.clock = &clock_;
  deps.entropy = &entropy_;
  deps.metrics = &metrics_;
  deps.credentials = credentials_;
  deps.audit = audit_;
  deps.log = log_;
  deps.options.template_egress = template_egress_;
  deps.local_node = local_node_;
  if (pools_)
    deps.pools = pools_;
  deps.cluster = admission_;
  gateway::add_control_routes(routes, deps);
}

void control_plane::add_e2b_routes(gateway::route_table& routes) {
  gateway::e2b_options e2b;
  e2b.domain = e2b_domain_;
  gateway::add_e2b_routes(routes, std::make_shared<const gateway::route_table>(routes), &clock_,
                          envd_tokens_, e2b);
}

std::function<void(const schema::operation_record&)> control_plane::terminal_hook() {
  return [metrics = &metrics_, audit = audit_](const schema::operation_record& record) {
    gateway::record_operation_metrics(*metrics, record);
    if (audit)
      caf::anon_send(audit, actors::au_append_atom::value,
                     std::vector<schema::audit_record>{actors::lifecycle_audit(record)});
  };
}

} // namespace airlock::airlockd
