// `airlockd control` and `airlockd worker`: the split-host modes. Until the
// cluster transport lands they open their store and answer /healthz and
// /readyz, and say plainly in the log that they do nothing more.

#include "airlockd/commands.hpp"

namespace airlock::airlockd {

int run_control(const control_options& options, const serve_hooks& hooks, stop_signals& signals,
                std::ostream& out, const actors::logger& log) {
  daemon_spec spec{"control", options.data_dir, "state", options.listen, options.http};
  daemon_steps steps;
  steps.before_listen = hooks.start_engine;
  steps.after_stop = hooks.stop_engine;
  steps.after_listen = [&options, &log](storage::kv_store&, const gateway::endpoint&) {
    log.warn("cluster transport arrives in a later release: nothing listens on the cluster "
             "address yet, and this control plane serves only /healthz and /readyz",
             {{"cluster_listen", gateway::to_string(options.cluster_listen)}});
    return status::ok();
  };
  return run_daemon(spec, steps, signals, out, log);
}

int run_worker(const worker_options& options, stop_signals& signals, std::ostream& out,
               const actors::logger& log) {
  daemon_spec spec{"worker", options.data_dir, "worker", options.data_listen, options.http};
  daemon_steps steps;
  steps.after_listen = [&options, &log](storage::kv_store&, const gateway::endpoint&) {
    log.warn("cluster transport arrives in a later release: this worker does not contact "
             "the control plane yet and runs no sandboxes; it serves only /healthz and /readyz",
             {{"join", gateway::to_string(options.join)}, {"name", options.name}});
    return status::ok();
  };
  return run_daemon(spec, steps, signals, out, log);
}

} // namespace airlock::airlockd
