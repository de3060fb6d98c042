#pragma once
// Helpers for the airlockd and gateway tests: temporary directories, a small
// HTTP/1.1 client on raw sockets, and a child process whose stdout is read
// line by line. Every wait is bounded by a deadline (poll with a timeout);
// nothing sleeps to synchronise.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
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

/// One client connection to 127.0.0.x or another IPv4 address.
class http_connection {
public:
  /// Connects; nullopt (after the deadline at most) when nothing accepts.
  static std::optional<http_connection> open(const std::string& host, uint16_t port,
                                             milliseconds timeout = wait_max);
  http_connection(http_connection&& other) noexcept;
  http_connection& operator=(http_connection&&) = delete;
  ~http_connection();

  bool send(const std::string& bytes);
  /// The next response (Content-Length framed); nullopt on timeout, a closed
  /// connection or bytes that are not a response.
  std::optional<http_reply> read_reply(milliseconds timeout = wait_max);
  /// True when the server closes the connection (EOF or reset) within `timeout`.
  bool wait_closed(milliseconds timeout = wait_max);

private:
  explicit http_connection(int fd) : fd_(fd) {}
  /// Reads more bytes into buffer_; false on EOF, error or timeout.
  bool fill(std::chrono::steady_clock::time_point deadline);
  int fd_ = -1;
  std::string buffer_;
};

/// GET `path` on a fresh connection with "Connection: close".
std::optional<http_reply> http_get(const std::string& host, uint16_t port, const std::string& path,
                                   const std::string& method = "GET");

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
