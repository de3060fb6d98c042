// `airlockd control` and `airlockd worker`: the split-host modes. The control
// plane publishes its scheduler on --cluster-listen; a worker joins it with
// --join, registers its node actor and serves its sandboxes' data plane on
// --data-listen. They talk only through CAF remote actors (cluster_protocol).

#include <caf/openssl/manager.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>

#include <unistd.h>

#include <boost/asio/ip/address.hpp>

#include "actors/errors.hpp"
#include "airlockd/commands.hpp"
#include "airlockd/control_plane.hpp"
#include "airlockd/engine_host.hpp"
#include "airlockd/hosting.hpp"
#include "airlockd/worker_host.hpp"
#include "airlockd/worker_identity.hpp"
#include "gateway/api_routes.hpp"
#include "gateway/data_routes.hpp"
#include "gateway/node_metrics.hpp"

namespace airlock::airlockd {

int run_control(const control_options& options, stop_signals& signals, std::ostream& out,
                const actors::logger& log) {
  engine_host engine(cluster_engine_options(), log);
  control_plane control(log);
  system_wall_clock clock;
  auto verifier = std::make_shared<verifier_slot>();
  daemon_spec spec{"control", options.data_dir, "state", options.listen,
                   listener_options(options.http, options.control)};
  daemon_steps steps;
  std::optional<cluster_authorities> authorities;
  steps.before_listen = [&](storage::kv_store& store) {
    // The cluster link is mutual TLS: the authorities come first.
    auto loaded = load_or_create_cluster_authorities(absolute_path(options.data_dir));
    if (!loaded)
      return make_status(loaded.code(), "cannot load the cluster's certificate authorities: "
                                          + loaded.error().message);
    authorities = std::move(*loaded);
    engine.use_cluster_tls(
      {authorities->control_cert_path, authorities->control_key_path, authorities->worker_ca_path});
    auto& system = engine.start_system();
    engine.on_stop([&control] { control.stop(); });
    control.configure(options.control);
    if (auto started = control.start(system, store, absolute_path(options.data_dir),
                                     options.cluster_listen, &*authorities);
        !started)
      return started;
    verifier->set(verifier_for(control.signer().public_key(), log));
    // Metrics and a lifecycle audit record for every operation that ends.
    if (auto started = engine.start(store, control.procedures(), control.terminal_hook()); !started)
      return started;
    control.start_policies(engine.engine());
    return status::ok();
  };
  steps.after_stop = [&engine] { engine.stop(); };
  steps.metrics = &control.metrics();
  steps.add_routes = [&](gateway::route_table& routes) {
    control.add_routes(routes, engine.engine());
    // Data-plane routes with an API key, forwarded to the sandbox's worker.
    gateway::data_plane_deps data;
    data.system = &engine.system();
    data.clock = &clock;
    data.verifier = [verifier] { return verifier->get(); };
    data.registry = control.registry();
    data.api_keys = control.api_keys();
    data.scheduler = control.scheduler();
    data.signer = &control.signer();
    data.envd_tokens = control.envd_tokens();
    data.metrics = &control.metrics();
    gateway::add_data_routes(routes, data);
    control.add_e2b_routes(routes);
  };
  steps.after_listen = [&](storage::kv_store& store, const gateway::endpoint& bound) {
    if (auto announced = announce_admin_key(store, url_of(bound, options.http.tls.has_value()),
                                            options.cli_config, out, log);
        !announced)
      return announced;
    out << "cluster listening on " << options.cluster_listen.host << ":" << control.cluster_port()
        << std::endl;
    return status::ok();
  };
  return run_daemon(spec, steps, signals, out, log);
}

namespace {

std::string worker_name(const worker_options& options) {
  if (!options.name.empty())
    return options.name;
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0 || name[0] == '\0')
    return "worker";
  return name;
}

/// The addresses the data listener's certificate names: the one its URL
/// gives (the listener's own, or loopback for a wildcard), when it is an IP.
std::vector<std::string> serving_addresses(const gateway::endpoint& listen) {
  std::string host = gateway::dialable(listen).host;
  boost::system::error_code not_ip;
  boost::asio::ip::make_address(host, not_ip);
  if (not_ip)
    return {};
  return {host};
}

} // namespace

int run_worker(const worker_options& options, stop_signals& signals, std::ostream& out,
               const actors::logger& log) {
  engine_host system_host(cluster_engine_options(), log);
  worker_host worker(log);
  system_wall_clock clock;
  auto verifier = std::make_shared<verifier_slot>();
  auto joined_once = std::make_shared<std::atomic<bool>>(false);
  late_value<std::string> url;
  worker::cluster_join_actor join;
  // The data listener's own HTTP figures; /metrics adds the node's.
  metrics::metrics_registry listener_metrics;
  daemon_spec spec{"worker", options.data_dir, "worker", options.data_listen, options.http};
  // The data listener serves TLS with the worker's member certificate (made
  // by the join in before_listen, renewed in place: the listener re-reads it).
  const auto identity_files = identity_paths(absolute_path(options.data_dir));
  const auto addresses = serving_addresses(options.data_listen);
  spec.http.tls = gateway::http_tls_files{identity_files.cert_path, identity_files.key_path};
  daemon_steps steps;
  steps.metrics = &listener_metrics;
  std::optional<worker_identity> identity;
  std::unique_ptr<certificate_renewer> renewer;
  steps.before_listen = [&](storage::kv_store& store) {
    // The identity comes first: the cluster link is made with it.
    join_request request{options.token, options.control_url, worker_name(options), addresses};
    auto loaded = load_or_join(absolute_path(options.data_dir), request, log);
    if (!loaded)
      return loaded.error();
    identity = std::move(*loaded);
    if (!identity)
      return make_status(errc::permission_denied,
                         "this worker has no cluster certificate yet: give it a join token "
                         "(`airlockd token create` on the control plane) with --token TOKEN "
                         "--control-url http://CONTROL:PORT");
    system_host.use_cluster_tls(
      {identity->cert_path, identity->key_path, identity->control_ca_path});
    auto& system = system_host.start_system();
    system_host.on_stop([&worker, &join, &renewer] {
      renewer.reset(); // it asks the join actor: gone before it
      if (join)
        caf::anon_send_exit(join, caf::exit_reason::user_shutdown);
      worker.stop();
    });
    if (auto started =
          worker.start(system, absolute_path(options.data_dir), options.sandboxes, store);
        !started)
      return started;
    if (identity)
      return worker.adopt_worker_id(identity->worker_id);
    return status::ok();
  };
  steps.after_stop = [&system_host] { system_host.stop(); };
  steps.add_routes = [&](gateway::route_table& routes) {
    gateway::data_plane_deps data;
    data.system = &system_host.system();
    data.clock = &clock;
    data.verifier = [verifier] { return verifier->get(); };
    data.local_node = worker.node();
    data.public_url = [&url] { return url.get(); };
    gateway::add_data_routes(routes, data);
    gateway::add_worker_metrics_route(routes, system_host.system(), worker.node(), listener_metrics,
                                      std::chrono::milliseconds(data.options.call_timeout_ms));
  };
  // Ready once the control plane has accepted this worker.
  steps.ready = [verifier] {
    if (verifier->get())
      return status::ok();
    return make_status(errc::unavailable, "this worker has not joined its control plane yet");
  };
  steps.after_listen = [&](storage::kv_store&, const gateway::endpoint& bound) {
    url.set(url_of(bound, true));
    auto registration = worker.registration(worker_name(options), url_of(bound, true));
    if (!registration)
      return registration.error();
    // Who this worker is, the control plane learns from its certificate and
    // the signature its key makes for each registration.
    auto credentials = member_credentials::load(*identity, addresses);
    if (!credentials)
      return credentials.error();
    join = join_cluster(system_host.system(), options.join, std::move(*registration), worker, clock,
                        verifier, nullptr, log, {},
                        system_host.system().openssl_manager().actor_handle(), *credentials);
    // Renewed over the link before it expires; sessions and sandboxes stay.
    renewer = std::make_unique<certificate_renewer>(
      *credentials,
      [&system_host, join](const std::string& csr) -> result<std::string> {
        caf::scoped_actor self(system_host.system());
        result<std::string> issued = make_status(errc::timeout, "no answer from the join actor");
        self->request(join, std::chrono::seconds(30), worker::cj_renew_atom::value, csr)
          .receive([&issued](std::string& certificate) { issued = std::move(certificate); },
                   [&issued](caf::error& error) { issued = to_status(error); });
        return issued;
      },
      options.cert_renew_before_days * 86400, std::chrono::seconds(options.cert_check_interval_s),
      log);
    out << "joining " << gateway::to_string(options.join) << std::endl;
    return status::ok();
  };
  return run_daemon(spec, steps, signals, out, log);
}

} // namespace airlock::airlockd
