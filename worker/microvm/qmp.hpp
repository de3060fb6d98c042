#pragma once
// A QMP (QEMU Machine Protocol) client over a unix socket: newline-separated
// JSON, a greeting, qmp_capabilities, then one command at a time. Blocking
// with deadlines; single-threaded (one thread owns a client). Asynchronous
// events that arrive while a command waits are dropped.

#include <string>
#include <string_view>

#include "schema/errc.hpp"
#include "schema/unique_fd.hpp"

namespace airlock::worker::microvm {

class qmp_client {
public:
  /// Takes a socket connected to QMP, reads the greeting and leaves the
  /// negotiation mode. Fails with timeout, unavailable (closed) or
  /// corrupt_record (not QMP).
  static result<qmp_client> open(unique_fd socket, int timeout_ms);

  /// Connects to the QMP socket at `path` (a listener that exists), then open().
  static result<qmp_client> connect(const std::string& path, int timeout_ms);

  /// Runs `command` with `arguments_json` (a JSON object, "" for none) and
  /// returns the reply's "return" member as JSON text. A QMP error becomes
  /// io_error with QEMU's description.
  result<std::string> execute(std::string_view command, std::string_view arguments_json,
                              int timeout_ms);

  /// execute() with `fd` passed along (SCM_RIGHTS) on the command's message:
  /// for getfd, which files it under a name that fd: URIs then use.
  result<std::string> execute_with_fd(std::string_view command, std::string_view arguments_json,
                                      int fd, int timeout_ms);

  /// query-status's "status": running, paused, inmigrate, postmigrate, ...
  result<std::string> run_state(int timeout_ms);

private:
  explicit qmp_client(unique_fd socket) : socket_(std::move(socket)) {}
  /// The next JSON line (without the newline).
  result<std::string> read_line(int64_t deadline_ms);
  result<std::string> await_reply(std::string_view command, int64_t deadline_ms);

  unique_fd socket_;
  std::string buffer_;
};

} // namespace airlock::worker::microvm
