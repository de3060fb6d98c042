#pragma once
// Small system helpers shared by the runtime's layers: errno-carrying status
// values, whole-file reads and control-file writes (cgroup and /proc files are
// tiny). Atomic file replaces go through schema/atomic_file.hpp; host tools
// (ip, nft) run through worker/command.

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "schema/errc.hpp"
#include "schema/unique_fd.hpp"
#include "worker/command/command.hpp"

namespace airlock::worker {

/// "<what>: <strerror(err)>" as a status with `code`.
status sys_error(errc code, std::string_view what, int err);

/// Maps an errno to the errc a caller can act on (ENOENT -> not_found, ...).
errc errc_from_errno(int err) noexcept;

/// Reads a whole small file (at most `max_bytes`). io_error/not_found on failure.
result<std::string> read_file(const std::string& path, size_t max_bytes = 1 << 20);

/// Writes `content` to an existing file in one write(2), as cgroup and /proc
/// control files require. Does not create or truncate.
status write_control_file(const std::string& path, std::string_view content);

/// The start time of `pid` (field 22 of /proc/<pid>/stat, in clock ticks since
/// boot): with the pid it names one process across pid reuse.
result<uint64_t> process_start_time(pid_t pid);

/// A pidfd of the process a record names by pid and start time, or an empty
/// one when that process is gone (its pid free or reused). Opened first,
/// then the start time compared, so the pidfd cannot name a later process.
unique_fd open_recorded_process(pid_t pid, uint64_t start_time);

/// Waits until the process behind `pidfd` has exited (POLLIN on the pidfd),
/// then reaps it if it is our child. timeout when it has not exited in time.
status wait_pidfd_exit(int pidfd, uint32_t timeout_ms);

/// Milliseconds on CLOCK_MONOTONIC, for bounded waits.
uint64_t monotonic_ms() noexcept;

} // namespace airlock::worker
