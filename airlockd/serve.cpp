#include <chrono>
#include <string>

#include "airlockd/admin_key.hpp"
#include "airlockd/commands.hpp"

namespace airlock::airlockd {

namespace {

std::string url_of(const gateway::endpoint& bound) {
  return "http://" + gateway::to_string(gateway::dialable(bound));
}

int64_t unix_now_ms() {
  auto now = std::chrono::system_clock::now().time_since_epoch();
  return std::chrono::duration_cast<std::chrono::milliseconds>(now).count();
}

/// First start only: create the admin key, write the CLI config and print the
/// key on a line of its own. Later starts find a key and print nothing.
status announce_admin_key(storage::kv_store& store, const gateway::endpoint& bound,
                          const serve_options& options, std::ostream& out,
                          const actors::logger& log) {
  auto created = bootstrap_admin_key(store, options.cli_config, url_of(bound), unix_now_ms());
  if (!created)
    return make_status(created.code(),
                       "cannot create the admin API key: " + created.error().message);
  if (!created->has_value())
    return status::ok();
  out << "admin key: " << **created << std::endl;
  // The log gets where the key went, never the key.
  log.info("created the admin API key", {{"cli_config", options.cli_config}});
  return status::ok();
}

} // namespace

int run_serve(const serve_options& options, const serve_hooks& hooks, stop_signals& signals,
              std::ostream& out, const actors::logger& log) {
  daemon_spec spec{"serve", options.data_dir, "state", options.listen, options.http};
  daemon_steps steps;
  // engine: recover operations here. hooks.start_engine runs with the open
  // store before the listener accepts anything; main() sets it.
  steps.before_listen = hooks.start_engine;
  steps.after_stop = hooks.stop_engine;
  steps.after_listen = [&options, &out, &log](storage::kv_store& store,
                                              const gateway::endpoint& bound) {
    return announce_admin_key(store, bound, options, out, log);
  };
  return run_daemon(spec, steps, signals, out, log);
}

} // namespace airlock::airlockd
