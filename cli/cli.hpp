#pragma once
// `airlock`, the command-line client of airlockd, as a function: main.cpp
// passes the real process's arguments, environment and standard streams;
// tests pass strings and string streams and run it in-process.

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <span>
#include <string>

#include "cli/config.hpp"
#include "cli/http.hpp"

namespace airlock::cli {

/// Limits and timeouts of one run of the CLI.
struct cli_options {
  /// Timeouts and size limits of every HTTP request. Default: see http_client_options.
  http_client_options http;
  /// exec: reconnects of the output stream in a row that deliver nothing
  /// before the CLI gives up. Default: 10.
  uint32_t reconnect_attempts_max = 10;
  /// exec: pause before reconnecting a dropped output stream. Default: 500.
  uint32_t reconnect_delay_ms = 500;
  /// wait, --wait: how long to wait for an operation when --timeout is not
  /// given. Default: 600.
  uint32_t wait_timeout_s = 600;
  /// ls, ops: pages fetched at most when following next_cursor. Default: 1000.
  uint32_t list_pages_max = 1000;
  /// cp: largest file uploaded (it is read into memory first). Default: 1073741824 (1 GiB).
  uint64_t upload_bytes_max = uint64_t{1} << 30;
  /// exec --stdin / -t: most bytes sent in one POST .../stdin. Default: 65536.
  size_t stdin_chunk_bytes = 64 * 1024;
};

/// The process's standard streams. `in_fd` and `tty_fd` let exec use the real
/// descriptors: stdin is then read with poll() so that it can stop reading
/// when the process exits, and -t puts `tty_fd` in raw mode and follows its
/// size. With in_fd < 0, stdin is read from `in` to its end (tests).
struct cli_io {
  std::istream& in;
  std::ostream& out;
  std::ostream& err;
  int in_fd = -1;  ///< stdin's descriptor, or -1: read `in`
  int tty_fd = -1; ///< the terminal for exec -t, or -1: none (the pty gets 24x80)
  /// `err` is a terminal: progress is a bar redrawn in place (else one line
  /// per step).
  bool err_is_terminal = false;
};

/// Runs `airlock ARGS...` (args without the program name). Returns the exit
/// status: 0 success, 1 an API or connection error (the server's error code,
/// message and a hint are printed to io.err), 2 a usage or configuration
/// error; exec returns the process's status (128+N when killed by signal N).
/// Not thread-safe with itself only for exec -t with a terminal, which
/// installs a SIGWINCH handler for its duration.
int run_cli(std::span<const std::string> args, const env_map& env, cli_io io,
            const cli_options& options = {});

/// The status a shell reports for a process: 128+signal when killed by a
/// signal, else exit_code (clamped to 0..255; unknown (null) counts as 1).
int exit_code_of(std::optional<int> exit_code, std::optional<int> signal);

} // namespace airlock::cli
