#include "airlockd/daemon.hpp"

#include "gateway/openapi.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include "airlockd/lock_holders.hpp"
#include "airlockd/version.hpp"

namespace airlock::airlockd {

namespace {

/// Runs a function when the scope ends, unless it is empty.
class scope_exit {
public:
  explicit scope_exit(std::function<void()> run) : run_(std::move(run)) {}
  scope_exit(const scope_exit&) = delete;
  scope_exit& operator=(const scope_exit&) = delete;
  ~scope_exit() { run_now(); }

  /// Runs the function now instead of at the end of the scope.
  void run_now() {
    if (auto run = std::exchange(run_, nullptr))
      run();
  }

private:
  std::function<void()> run_;
};

std::string errno_text(int error) { return std::strerror(error); }

/// /readyz's view of the process; written by the main thread, read by I/O threads.
enum class phase : uint8_t { starting, ready, stopping };

status readiness(const std::atomic<phase>& current) {
  switch (current.load()) {
    case phase::ready: return status::ok();
    case phase::starting: return make_status(errc::unavailable, "airlockd is starting");
    case phase::stopping: return make_status(errc::unavailable, "airlockd is shutting down");
  }
  return make_status(errc::unavailable, "airlockd is not ready");
}

} // namespace

std::string absolute_path(const std::string& path) {
  std::error_code ec;
  auto absolute = std::filesystem::absolute(path, ec);
  return ec ? path : absolute.lexically_normal().string();
}

stop_signals::stop_signals() {
  sigemptyset(&set_);
  sigaddset(&set_, SIGINT);
  sigaddset(&set_, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set_, nullptr);
}

int stop_signals::wait() {
  int signal = 0;
  while (sigwait(&set_, &signal) != 0) {
    // sigwait fails only for an invalid set; retrying keeps the daemon up.
  }
  return signal;
}

result<file_lock> file_lock::acquire(const std::string& path) {
  unique_fd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!fd)
    return make_status(errc::io_error, "cannot open " + path + ": " + errno_text(errno));
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    int error = errno;
    if (error == EWOULDBLOCK)
      return make_status(errc::unavailable, path + " is " + describe_lock_holders(path));
    return make_status(errc::io_error, "cannot lock " + path + ": " + errno_text(error));
  }
  std::string pid = std::to_string(::getpid()) + "\n";
  // For an operator reading the file; the error above asks /proc instead.
  // Failing to record it is harmless.
  [[maybe_unused]] bool recorded =
    ::ftruncate(fd.get(), 0) == 0 && ::pwrite(fd.get(), pid.data(), pid.size(), 0) > 0;
  return file_lock(std::move(fd));
}

status ensure_private_directory(const std::string& dir) {
  std::filesystem::path path(dir);
  std::error_code ec;
  if (path.has_parent_path())
    std::filesystem::create_directories(path.parent_path(), ec);
  if (ec)
    return make_status(errc::io_error,
                       "cannot create " + path.parent_path().string() + ": " + ec.message());
  if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST)
    return make_status(errc::io_error, "cannot create " + dir + ": " + errno_text(errno));
  if (!std::filesystem::is_directory(path, ec))
    return make_status(errc::io_error, dir + " exists but is not a directory");
  return status::ok();
}

result<locked_store> open_locked_store(const std::string& data_dir, std::string_view name) {
  if (auto made = ensure_private_directory(data_dir); !made)
    return make_status(made.code, "data directory " + data_dir + " is unusable: " + made.message);
  std::string store_dir = data_dir + "/" + std::string(name);
  auto lock = file_lock::acquire(store_dir + ".lock");
  if (!lock) {
    std::string why = lock.code() == errc::unavailable
                        ? " is in use by another airlockd process (" + lock.error().message + ")"
                        : " cannot be locked: " + lock.error().message;
    return make_status(lock.code(), "data directory " + data_dir + why);
  }
  auto store = storage::open_rocksdb_store(store_dir);
  if (!store) {
    return make_status(store.code(), "cannot open the store in data directory " + data_dir + ": "
                                       + store.error().message);
  }
  return locked_store{std::move(lock.value()), std::move(store.value())};
}

int run_daemon(const daemon_spec& spec, const daemon_steps& steps, stop_signals& signals,
               std::ostream& out, const actors::logger& log) {
  std::string data_dir = absolute_path(spec.data_dir);
  log.info("starting", {{"command", spec.command},
                        {"version", version()},
                        {"commit", git_commit()},
                        {"data_dir", data_dir},
                        {"pid", ::getpid()}});
  auto opened = open_locked_store(data_dir, spec.store_name);
  if (!opened) {
    log.error(opened.error().message, {{"data_dir", data_dir}});
    return 1;
  }
  storage::kv_store& store = *opened->store;
  if (steps.before_listen) {
    if (auto started = steps.before_listen(store); !started) {
      log.error("start failed", {{"error", started.message}});
      return 1;
    }
  }
  scope_exit stop_after(steps.after_stop);

  std::atomic<phase> current{phase::starting};
  gateway::route_table routes;
  gateway::add_operator_routes(routes, [&current, &steps] {
    auto state = readiness(current);
    if (state && steps.ready)
      return steps.ready();
    return state;
  });
  if (steps.add_routes)
    steps.add_routes(routes);
  gateway::add_openapi_route(routes);
  auto server =
    gateway::http_server::start(spec.http, spec.listen, std::move(routes), log, steps.metrics);
  if (!server) {
    log.error("cannot start the HTTP listener", {{"error", server.error().message}});
    return 1;
  }
  gateway::endpoint bound = (*server)->local_endpoint();
  if (steps.after_listen) {
    if (auto done = steps.after_listen(store, bound); !done) {
      log.error("start failed", {{"error", done.message}});
      return 1;
    }
  }
  current = phase::ready;
  out << "listening on " << gateway::to_string(bound) << std::endl;
  log.info("listening", {{"address", gateway::to_string(bound)}});

  int signal = signals.wait();
  log.info("stopping", {{"signal", ::sigabbrev_np(signal)}});
  current = phase::stopping;
  (*server)->stop();
  stop_after.run_now();
  log.info("stopped", {{"connections_accepted", (*server)->stats().connections_accepted},
                       {"requests", (*server)->stats().requests}});
  return 0;
}

} // namespace airlock::airlockd
