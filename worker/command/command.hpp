#pragma once
// Runs a host tool (ip, nft, mkfs.btrfs, debootstrap, cp, rm) without a shell,
// for both worker/runtime and worker/rootfs: fork + exec of an argv in a
// process group of its own, stdin from a string, stdout and stderr merged into
// one pipe (handed over line by line and kept up to a bound), a deadline, a
// cancel flag, and optionally a network namespace to run in. A timeout or a
// cancel kills the whole group (debootstrap starts dpkg, wget and chroot).
//
// Blocking: call it from a helper thread (the worker's blocking actors that
// call the runtime and the rootfs driver), never from an event-based actor. The child only makes
// async-signal-safe calls between fork and exec, so it is safe in the multi-threaded worker.

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "schema/errc.hpp"

namespace airlock::worker {

/// How run_command runs a tool.
struct command_options {
  /// The tool (and its group) is killed after this long and the call fails
  /// with errc::timeout. Default: 60000.
  uint32_t timeout_ms = 60'000;
  /// Checked about every 100 ms; when it becomes true the tool is killed and
  /// the call fails with errc::cancelled. Default: nullptr (no cancel).
  const std::atomic<bool>* cancel = nullptr;
  /// Called on the calling thread with each output line (stdout and stderr
  /// merged, without the newline). Default: empty (output is only kept).
  std::function<void(std::string_view line)> on_line;
  /// Bytes written to the tool's stdin, which is then closed. Default: empty
  /// (stdin reads EOF at once).
  std::string stdin_text;
  /// When >= 0, the tool runs inside this network namespace (setns before
  /// exec); the descriptor stays the caller's. Default: -1 (the worker's own).
  int netns_fd = -1;
  /// Start from an empty environment (PATH only for finding the program)
  /// instead of the worker's. Default: false.
  bool clean_env = false;
  /// KEY=VALUE entries added to (or replacing those of) the environment. PATH
  /// also decides where a bare program name is found; when nothing sets it,
  /// default_command_path is used. Default: none.
  std::vector<std::string> env;
  /// Output kept in command_result::output: the last this many bytes.
  /// Default: 16384.
  size_t output_bytes_max = 16384;
};

/// How a tool ended.
struct command_result {
  int exit_code = -1;      ///< exit status, or -1 when killed by a signal
  int signal = 0;          ///< the signal that ended it, or 0
  std::string output;      ///< stdout+stderr; the end of it when it was longer than the bound
  bool output_cut = false; ///< output is only the end: more arrived than output_bytes_max

  bool succeeded() const noexcept { return exit_code == 0; }
};

/// Runs `argv` to completion. argv[0] is an absolute path or a name searched
/// in PATH. Fails with invalid_argument on an empty argv, not_found when the
/// program does not exist, timeout when the deadline passes, cancelled on
/// cancel; a non-zero exit is not a failure here (see run_checked).
result<command_result> run_command(const std::vector<std::string>& argv,
                                   const command_options& options = {});

/// run_command, and a non-zero exit becomes a failure (io_error) whose message
/// says `what` failed, with the command line and the end of its output.
status run_checked(std::string_view what, const std::vector<std::string>& argv,
                   const command_options& options = {});

/// The absolute path of `program` searched in `path_var` (a PATH value), then
/// in default_command_path; the name itself when it contains a '/'; empty
/// when not found.
std::string find_program(std::string_view program, std::string_view path_var);

/// For a child between clone and exec (async-signal-safe): closes every
/// descriptor but the `count` in `keep` (negative entries are skipped). A
/// child parked before its exec must hold none of the worker's files (the
/// data directory's lock, the stores, listening sockets, other children's
/// start channels): if the worker dies meanwhile, they would outlive it.
/// 0, or the errno of the close_range that failed.
int close_fds_except(const int* keep, size_t count) noexcept;

/// For a child between clone and exec: asks the kernel for `signal` when the
/// thread that cloned it exits (a killed worker), so that nothing it started
/// waits forever for a go that never comes. 0 or an errno. Cleared by the
/// child itself before an exec that must outlive the worker (a sandbox init,
/// QEMU), because it survives exec.
int die_with_parent(int signal) noexcept;

/// The PATH used when nothing else sets one: the sbin directories first,
/// because mkfs.btrfs, debootstrap, ip and nft live there.
inline constexpr std::string_view default_command_path =
  "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

} // namespace airlock::worker
