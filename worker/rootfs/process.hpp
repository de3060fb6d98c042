#pragma once
// Runs an external program (mkfs.btrfs, debootstrap, cp, rm) without a shell:
// posix_spawn of an argv, stdout and stderr merged into one pipe and handed
// over line by line, a deadline, and cancellation that kills the whole
// process group (debootstrap starts dpkg, wget and chroot below it).
// Blocking: call it from the rootfs thread, never from an actor.

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "schema/errc.hpp"

namespace airlock::worker {
// An inline namespace of its own: worker/runtime/sys.hpp declares a different
// command_options and run_command/run_checked with the same signatures, and
// both libraries link into airlock_worker (an ODR clash at link time otherwise).
inline namespace rootfs_process {

struct command_options {
  /// The program is killed after this long. Default: 60000.
  uint32_t timeout_ms = 60'000;
  /// Checked about every 100 ms; when it becomes true the program is killed
  /// and the call fails with errc::cancelled. Default: nullptr (no cancel).
  const std::atomic<bool>* cancel = nullptr;
  /// Called on the calling thread with each output line (stdout and stderr
  /// merged, without the newline). Default: empty (lines are only kept in the
  /// tail).
  std::function<void(std::string_view line)> on_line;
  /// KEY=VALUE entries added to (or replacing those of) this process's
  /// environment. PATH also decides where a bare program name is found; when
  /// neither sets it, a PATH with the sbin directories is used. Default: none.
  std::vector<std::string> env;
  /// Last bytes of output kept for error messages. Default: 4096.
  size_t output_tail_bytes_max = 4096;
};

struct command_result {
  int exit_code = -1;      ///< exit status, or -1 when killed by a signal
  int signal = 0;          ///< the signal that ended it, or 0
  std::string output_tail; ///< the end of stdout+stderr

  bool succeeded() const noexcept { return exit_code == 0; }
};

/// Runs `argv` to completion. Fails with not_found when the program does not
/// exist, timeout when the deadline passes, cancelled on cancel; a non-zero
/// exit is not a failure here (see run_checked).
result<command_result> run_command(const std::vector<std::string>& argv,
                                   const command_options& options = {});

/// run_command, and a non-zero exit becomes a failure (io_error) whose message
/// says `what` failed, with the command line and the end of its output.
status run_checked(std::string_view what, const std::vector<std::string>& argv,
                   const command_options& options = {});

/// The absolute path of `program` searched in `path_var` (a PATH value); the
/// name itself when it contains a '/'; empty when not found.
std::string find_program(std::string_view program, std::string_view path_var);

/// The PATH used when nothing else sets one: the sbin directories first,
/// because mkfs.btrfs, debootstrap and chroot live there.
inline constexpr std::string_view default_command_path =
  "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

} // namespace rootfs_process
} // namespace airlock::worker
