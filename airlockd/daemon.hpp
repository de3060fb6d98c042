#pragma once
// What serve, control and worker share: a private data directory, a store in
// it that only one process may open, the operator listener, and a run that
// ends gracefully on SIGINT or SIGTERM.

#include <csignal>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>

#include "actors/log.hpp"
#include "gateway/endpoint.hpp"
#include "gateway/http_server.hpp"
#include "gateway/router.hpp"
#include "metrics/metrics.hpp"
#include "schema/errc.hpp"
#include "schema/unique_fd.hpp"
#include "storage/kv_store.hpp"

namespace airlock::airlockd {

/// Blocks SIGINT and SIGTERM in the calling thread and in every thread it
/// starts afterwards (threads inherit the mask), so that only wait() receives
/// them. Create it first thing in main(), before anything starts a thread
/// (CAF, Asio, RocksDB): a thread started earlier could take the signal and
/// die by it instead of shutting down.
class stop_signals {
public:
  stop_signals();
  stop_signals(const stop_signals&) = delete;
  stop_signals& operator=(const stop_signals&) = delete;
  // No destructor: the mask stays, so a second signal arriving while the
  // process ends cannot kill it with a different exit status.

  /// Blocks until SIGINT or SIGTERM arrives; returns its number.
  int wait();

private:
  sigset_t set_{};
};

/// An exclusive advisory lock (flock) on a file, held for the life of this
/// object; the file also records the holder's pid for an operator.
class file_lock {
public:
  /// unavailable when another process holds the lock; io_error when the file
  /// cannot be opened.
  static result<file_lock> acquire(const std::string& path);

private:
  explicit file_lock(unique_fd fd) : fd_(std::move(fd)) {}
  unique_fd fd_; ///< closing it releases the flock
};

/// Creates `dir` (mode 0700) and missing parents; ok if it exists as a directory.
status ensure_private_directory(const std::string& dir);

/// A store and the lock that keeps other airlockd processes out of it. The
/// store closes before the lock is released (members end in reverse order).
struct locked_store {
  file_lock lock;
  std::unique_ptr<storage::kv_store> store;
};

/// Locks DATA_DIR/NAME.lock and opens the RocksDB store DATA_DIR/NAME. The
/// error names the data directory: unavailable when another process uses it.
result<locked_store> open_locked_store(const std::string& data_dir, std::string_view name);

/// What differs between the subcommands that run a daemon.
struct daemon_spec {
  std::string command;    ///< "serve", "control" or "worker", for the log
  std::string data_dir;   ///< made absolute before use
  std::string store_name; ///< store directory under data_dir: "state" or "worker"
  gateway::endpoint listen;
  gateway::http_server_options http;
};

/// The steps a subcommand plugs into the common run, in the order they run.
/// Empty functions are skipped.
struct daemon_steps {
  /// After the store opened, before the listener starts. A failure ends the
  /// start with exit status 1.
  std::function<status(storage::kv_store&)> before_listen;
  /// Once the listener is bound (with its real port), before "listening on"
  /// is printed and /readyz turns ready. A failure ends the start.
  std::function<status(storage::kv_store&, const gateway::endpoint& bound)> after_listen;
  /// After the listener stopped, before the store closes; runs whenever
  /// before_listen succeeded.
  std::function<void()> after_stop;
  /// After before_listen, before the listener starts: the API's routes.
  std::function<void(gateway::route_table&)> add_routes;
  /// Extra readiness condition for /readyz once started (cheap, non-blocking).
  std::function<status()> ready;
  /// Where the listener records its request metrics; may be null.
  metrics::metrics_registry* metrics = nullptr;
};

/// DIR made absolute (against the working directory).
std::string absolute_path(const std::string& dir);

/// Runs until SIGINT or SIGTERM, then stops gracefully. Prints
/// "listening on HOST:PORT" to `out` once it serves. Returns the exit status:
/// 0 after a clean stop, 1 when it could not start.
int run_daemon(const daemon_spec& spec, const daemon_steps& steps, stop_signals& signals,
               std::ostream& out, const actors::logger& log);

} // namespace airlock::airlockd
