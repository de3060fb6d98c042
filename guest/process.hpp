#pragma once
// Starting one process for the agent: fork, then in the child the terminal or
// pipes, the user, the working directory and execve. The parent learns whether
// execve succeeded through a close-on-exec pipe, so a missing program or a
// refused setuid is an error reply rather than a process that exits 127.

#include <sys/types.h>

#include <string>
#include <vector>

#include "guest/protocol.hpp"
#include "schema/errc.hpp"
#include "schema/unique_fd.hpp"

namespace airlock::guest {

/// PATH used when the request's environment has none.
inline constexpr const char* default_path =
  "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// A running child and the agent's ends of its stdio. With a PTY, `pty_master`
/// carries stdin and the combined output and the pipe fds are empty.
struct spawned_process {
  pid_t pid = -1;
  unique_fd stdin_fd;
  unique_fd stdout_fd;
  unique_fd stderr_fd;
  unique_fd pty_master;
  std::string pty_path;
};

struct spawn_settings {
  /// Kernel pipe buffer for stdout and stderr; 0 keeps the kernel default.
  /// Larger pipes cost kernel memory, not agent memory, and cut wake-ups.
  int pipe_bytes = 0;
};

/// Starts `request`. The caller has validated sizes; this validates what only
/// the system can (program found, cwd exists, user switch allowed). The agent's
/// fds are non-blocking and close-on-exec; the child gets a clean signal mask,
/// default dispositions and its own process group (or session, with a PTY).
result<spawned_process> spawn_process(const schema::exec_spec& request,
                                      const spawn_settings& settings);

/// Sets the terminal size of a PTY master.
status set_window_size(int pty_master, uint16_t rows, uint16_t cols);

} // namespace airlock::guest
