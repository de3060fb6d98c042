#pragma once
// A child process (airlockd, the CLI) whose stdout a test reads line by line,
// and the lines airlockd prints that tests look for.

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tests/support/wait.hpp"

namespace airlock::test {

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
  pid_t pid() const { return pid_; }

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
