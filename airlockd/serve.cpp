// `airlockd serve`: the control plane and one local worker in one process.
// They are wired as in a cluster (the same join actor registers the worker's
// node with the scheduler and beats), but in-process: the scheduler is
// published on no port, because anything that can reach it can ask it for
// credentials and nodes (docs/cluster.md). One HTTP listener serves the
// control routes and the local worker's data plane; it is the only socket
// serve listens on.

#include <caf/send.hpp>

#include <chrono>
#include <string>
#include <unistd.h>

#include "airlockd/commands.hpp"
#include "airlockd/control_plane.hpp"
#include "airlockd/engine_host.hpp"
#include "airlockd/hosting.hpp"
#include "airlockd/worker_host.hpp"
#include "gateway/api_routes.hpp"
#include "gateway/data_routes.hpp"
#include "storage/kv_store.hpp"

namespace airlock::airlockd {

namespace {

constexpr auto join_timeout = std::chrono::seconds(30);

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0 || name[0] == '\0')
    return "local";
  return name;
}

/// Everything serve runs, in start order; stopped in reverse by engine.stop().
struct serve_parts {
  explicit serve_parts(const actors::logger& log)
      : engine(cluster_engine_options(), log), control(log), worker(log), worker_log(log) {}
  engine_host engine;
  control_plane control;
  worker_host worker;
  std::unique_ptr<storage::kv_store> worker_store;
  system_wall_clock clock;
  late_value<std::string> url;
  std::shared_ptr<verifier_slot> verifier = std::make_shared<verifier_slot>();
  worker::cluster_join_actor join;
  actors::logger worker_log;
};

status start_parts(serve_parts& parts, storage::kv_store& store, const serve_options& options) {
  auto data_dir = absolute_path(options.data_dir);
  auto& system = parts.engine.start_system();
  parts.engine.on_stop([&parts] {
    if (parts.join)
      caf::anon_send_exit(parts.join, caf::exit_reason::user_shutdown);
    parts.worker.stop();
    parts.control.stop();
  });
  parts.control.configure(options.control);
  if (auto started = parts.control.start(system, store, data_dir, std::nullopt); !started)
    return started;
  auto worker_store = storage::open_rocksdb_store(data_dir + "/worker-store");
  if (!worker_store)
    return make_status(worker_store.code(),
                       "cannot open the worker store: " + worker_store.error().message);
  parts.worker_store = std::move(*worker_store);
  if (auto started = parts.worker.start(system, data_dir, options.sandboxes, *parts.worker_store);
      !started)
    return started;
  parts.control.set_local_node(parts.worker.node());
  parts.verifier->set(verifier_for(parts.control.signer().public_key(), parts.worker_log));
  // Metrics and a lifecycle audit record for every operation that ends.
  if (auto started =
        parts.engine.start(store, parts.control.procedures(), parts.control.terminal_hook());
      !started)
    return started;
  parts.control.start_policies(parts.engine.engine());
  return status::ok();
}

void add_serve_routes(serve_parts& parts, gateway::route_table& routes) {
  parts.control.add_routes(routes, parts.engine.engine());
  gateway::data_plane_deps data;
  data.system = &parts.engine.system();
  data.clock = &parts.clock;
  data.verifier = [verifier = parts.verifier] { return verifier->get(); };
  data.local_node = parts.worker.node();
  data.registry = parts.control.registry();
  data.api_keys = parts.control.api_keys();
  data.scheduler = parts.control.scheduler();
  data.signer = &parts.control.signer();
  data.envd_tokens = parts.control.envd_tokens();
  data.metrics = &parts.control.metrics();
  data.public_url = [&parts] { return parts.url.get(); };
  gateway::add_data_routes(routes, data);
  parts.control.add_e2b_routes(routes);
}

/// Registers the local worker with the scheduler and waits for the first join.
status join_local_worker(serve_parts& parts, const std::string& url, const actors::logger& log) {
  parts.url.set(url);
  auto registration = parts.worker.registration(host_name(), url);
  if (!registration)
    return make_status(registration.code(),
                       "cannot describe the local worker: " + registration.error().message);
  auto joined = std::make_shared<std::promise<void>>();
  auto first_join = joined->get_future();
  parts.join =
    join_cluster(parts.engine.system(), gateway::endpoint{}, std::move(*registration), parts.worker,
                 parts.clock, parts.verifier, joined, log, parts.control.scheduler());
  if (first_join.wait_for(join_timeout) != std::future_status::ready)
    return make_status(errc::timeout, "the local worker did not join the scheduler");
  // The worker cleaned up an earlier run's sandboxes: say so in their records.
  parts.control.reconcile_now();
  return status::ok();
}

} // namespace

int run_serve(const serve_options& options, stop_signals& signals, std::ostream& out,
              const actors::logger& log) {
  serve_parts parts(log);
  daemon_spec spec{"serve", options.data_dir, "state", options.listen,
                   listener_options(options.http, options.control)};
  daemon_steps steps;
  steps.before_listen = [&parts, &options](storage::kv_store& store) {
    return start_parts(parts, store, options);
  };
  steps.after_stop = [&parts] { parts.engine.stop(); };
  steps.add_routes = [&parts](gateway::route_table& routes) { add_serve_routes(parts, routes); };
  steps.metrics = &parts.control.metrics();
  steps.after_listen = [&parts, &options, &out, &log](storage::kv_store& store,
                                                      const gateway::endpoint& bound) {
    const std::string url = url_of(bound, options.http.tls.has_value());
    if (auto joined = join_local_worker(parts, url, log); !joined)
      return joined;
    return announce_admin_key(store, url, options.cli_config, out, log);
  };
  return run_daemon(spec, steps, signals, out, log);
}

} // namespace airlock::airlockd
