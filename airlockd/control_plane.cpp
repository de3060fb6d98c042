#include "airlockd/control_plane.hpp"

#include <caf/send.hpp>

#include "actors/sandbox_procedures.hpp"
#include "airlockd/daemon.hpp"
#include "gateway/api_routes.hpp"
#include "scheduler/cluster_listener.hpp"
#include "scheduler/scheduler_actor.hpp"

namespace airlock::airlockd {

control_plane::~control_plane() { stop(); }

status control_plane::start(caf::actor_system& system, storage::kv_store& store,
                            const std::string& data_dir,
                            const std::optional<gateway::endpoint>& cluster_listen) {
  system_ = &system;
  if (auto made = ensure_private_directory(data_dir + "/keys"); !made)
    return made;
  auto signer = gateway::token_signer::load_or_create(data_dir + "/keys/token.pem");
  if (!signer)
    return make_status(signer.code(), "cannot load the token key: " + signer.error().message);
  signer_.emplace(std::move(*signer));
  registry_ = actors::spawn_sandbox_registry(system, store, clock_);
  scheduler::scheduler_deps deps;
  deps.token_public_key = signer_->public_key();
  deps.clock = &clock_;
  deps.entropy = &entropy_;
  scheduler_ = scheduler::spawn_scheduler(system, {}, deps);
  procedures_ = actors::spawn_sandbox_procedures(system, registry_, scheduler_);
  reconciler_ = actors::spawn_reconciler(system, registry_, scheduler_);
  gateway::describe_control_metrics(metrics_);
  if (cluster_listen) {
    auto port = scheduler::publish_scheduler(system, scheduler_, cluster_listen->host,
                                             cluster_listen->port);
    if (!port)
      return make_status(port.code(), "cannot listen for workers on " +
                                        gateway::to_string(*cluster_listen) + ": " +
                                        port.error().message);
    cluster_port_ = *port;
    log_.info("listening for workers", {{"address", cluster_listen->host + ":" +
                                                      std::to_string(cluster_port_)}});
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
  if (scheduler_)
    caf::anon_send_exit(scheduler_, caf::exit_reason::user_shutdown);
  if (registry_)
    caf::anon_send_exit(registry_, caf::exit_reason::user_shutdown);
  scheduler_ = nullptr;
  registry_ = nullptr;
  system_ = nullptr;
}

void control_plane::reconcile_now() {
  if (reconciler_)
    caf::anon_send(reconciler_, actors::rc_tick_atom::value);
}

void control_plane::add_routes(gateway::route_table& routes,
                               const actors::operation_engine_actor& engine) {
  gateway::control_api_deps deps;
  deps.system = system_;
  deps.engine = engine;
  deps.registry = registry_;
  deps.scheduler = scheduler_;
  deps.signer = &*signer_;
  deps.clock = &clock_;
  deps.entropy = &entropy_;
  deps.metrics = &metrics_;
  gateway::add_control_routes(routes, deps);
}

} // namespace airlock::airlockd
