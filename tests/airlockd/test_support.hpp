#pragma once
// Helpers for the airlockd and gateway tests: temporary directories, a small
// HTTP/1.1 client on raw sockets, and a child process whose stdout is read
// line by line. Every wait is bounded by a deadline (poll with a timeout);
// nothing sleeps to synchronise.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace airlock::test {

using std::chrono::milliseconds;

/// How long a test waits for anything before it fails: generous, because CI
/// machines are slow and two test executables may run at once.
inline constexpr milliseconds wait_max{20'000};

/// A fresh directory under $TMPDIR (or /tmp), removed with its contents.
/// An exclusive flock on `path` (created 0600) held for this object's life,
/// so that test processes sharing host resources (an nftables table, a veth
/// prefix, an address pool) run one at a time under `ctest -j`.
class host_lock {
public:
  explicit host_lock(const std::string& path);
  ~host_lock();
  host_lock(const host_lock&) = delete;
  host_lock& operator=(const host_lock&) = delete;
  bool held() const noexcept { return fd_ >= 0; }

private:
  int fd_ = -1;
};

class temp_dir {
public:
  temp_dir();
  ~temp_dir();
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  const std::string& path() const { return path_; }

private:
  std::string path_;
};

std::string read_file(const std::string& path);
void write_file(const std::string& path, const std::string& content);

struct http_reply {
  int status = 0;
  std::map<std::string, std::string> headers; ///< names in lower case
  std::string body;
};

/// One server-sent event; `event` is "message" when the server named none.
struct sse_event {
  std::string event;
  std::string id;
  std::string data; ///< data: lines joined with '\n'
};

/// One client connection to 127.0.0.x or another IPv4 address.
class http_connection {
public:
  /// Connects; nullopt (after the deadline at most) when nothing accepts.
  static std::optional<http_connection> open(const std::string& host, uint16_t port,
                                             milliseconds timeout = wait_max);
  http_connection(http_connection&& other) noexcept;
  http_connection& operator=(http_connection&&) = delete;
  ~http_connection();

  /// Sends all of `bytes` within `timeout`; false on error or timeout.
  bool send(const std::string& bytes, milliseconds timeout = wait_max);
  /// The next response (Content-Length framed); nullopt on timeout, a closed
  /// connection or bytes that are not a response.
  std::optional<http_reply> read_reply(milliseconds timeout = wait_max);
  /// The status line and headers of the next response only (body empty); the
  /// body's bytes stay buffered for read_body or next_event.
  std::optional<http_reply> read_head(milliseconds timeout = wait_max);
  /// The body of a response whose head read_head returned: Content-Length
  /// bytes, else everything up to EOF. False on timeout.
  bool read_body(http_reply& head, milliseconds timeout = wait_max);
  /// The next event of a text/event-stream body (after read_head); comments
  /// (heartbeats) are skipped. nullopt at EOF or on timeout (see eof()).
  std::optional<sse_event> next_event(milliseconds timeout = wait_max);
  /// True once the server closed the connection.
  bool eof() const { return eof_; }
  /// True when the server closes the connection (EOF or reset) within `timeout`.
  bool wait_closed(milliseconds timeout = wait_max);

private:
  explicit http_connection(int fd) : fd_(fd) {}
  /// Reads more bytes into buffer_; false on EOF, error or timeout.
  bool fill(std::chrono::steady_clock::time_point deadline);
  int fd_ = -1;
  std::string buffer_;
  bool eof_ = false;
};

/// GET `path` on a fresh connection with "Connection: close".
std::optional<http_reply> http_get(const std::string& host, uint16_t port, const std::string& path,
                                   const std::string& method = "GET");

/// A request with any method, headers and body on a fresh connection with
/// "Connection: close"; Content-Length is added for a non-empty body or a
/// method that carries one.
struct http_request {
  std::string method = "GET";
  std::string target; ///< path and query
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
};

/// Sends `request` and reads the whole response; nullopt when nothing answers
/// within `timeout`.
std::optional<http_reply> http_call(const std::string& host, uint16_t port,
                                    const http_request& request, milliseconds timeout = wait_max);

/// Sends `request` on a new connection and reads the response head; the
/// caller reads the body or events from the returned connection.
std::optional<std::pair<http_connection, http_reply>> http_open(const std::string& host,
                                                                uint16_t port,
                                                                const http_request& request,
                                                                milliseconds timeout = wait_max);

/// Unmounts every mount point at or below `dir` (deepest first), retrying a
/// busy one for a bounded time and then detaching it lazily. Returns the
/// mount points that could not be unmounted (empty: all gone).
std::vector<std::string> unmount_below(const std::string& dir,
                                       milliseconds timeout = milliseconds(10'000));

/// Removes what an airlockd that ran sandboxes as `instance` leaves on the
/// host after it stopped (by design, so that a restart finds it): its
/// cgroup parents (empty ones; v1 and v2 hierarchies) and its nftables table.
/// Call it only after that airlockd has exited. Returns what could not be
/// removed.
std::vector<std::string> remove_instance_leftovers(const std::string& instance);

/// Evaluates `condition` every `interval` until it is true or `timeout`
/// passes; returns its last value. For conditions nothing can be waited on
/// directly (a token's expiry, a remote daemon becoming ready).
bool poll_until(const std::function<bool()>& condition, milliseconds timeout = wait_max,
                milliseconds interval = milliseconds(50));

/// True for "ak_" + 16 hex digits + "_" + 64 hex digits (lower case).
bool is_api_key(std::string_view text);

/// HOST and PORT of a "listening on HOST:PORT" line; nullopt for other lines.
std::optional<std::pair<std::string, uint16_t>> parse_listening(std::string_view line);

/// A child process with stdout on a pipe and stderr in a file. Killed
/// (SIGKILL) and reaped when destroyed if it is still running.
class child_process {
public:
  /// Runs `argv` with exactly `env` ("NAME=value") as its environment.
  /// Returns nullptr when it cannot be started.
  static std::unique_ptr<child_process> spawn(const std::vector<std::string>& argv,
                                              const std::vector<std::string>& env,
                                              const std::string& stderr_path);
  ~child_process();
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;

  /// The next stdout line (without '\n'); nullopt on EOF or timeout.
  std::optional<std::string> read_line(milliseconds timeout = wait_max);
  /// Every stdout line until EOF (or the timeout).
  std::vector<std::string> read_remaining_lines(milliseconds timeout = wait_max);
  void send_signal(int signal);
  /// The exit status (128 + N when killed by signal N); nullopt if it is
  /// still running after `timeout`.
  std::optional<int> wait_exit(milliseconds timeout = wait_max);
  const std::string& stderr_path() const { return stderr_path_; }

private:
  child_process(pid_t pid, int stdout_fd, int pid_fd, std::string stderr_path)
      : pid_(pid), stdout_fd_(stdout_fd), pid_fd_(pid_fd), stderr_path_(std::move(stderr_path)) {}

  pid_t pid_;
  int stdout_fd_;
  int pid_fd_; ///< pidfd: poll()able for the child's exit
  std::string stderr_path_;
  std::string buffer_;
  bool stdout_eof_ = false;
  std::optional<int> exit_status_;
};

} // namespace airlock::test
