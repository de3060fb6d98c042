#pragma once
// Helpers the v1 and v2 cgroup drivers share. Internal to worker/runtime.

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "schema/errc.hpp"

namespace airlock::worker::cgroup_detail {

/// Polls `done` every millisecond until it returns true, fails, or
/// `timeout_ms` passes (then timeout with "<what> did not happen within ...").
/// The kernel offers no notification for v1 freezer or emptiness; the bound
/// keeps this from hanging.
status wait_until(std::string_view what, uint32_t timeout_ms,
                  const std::function<result<bool>()>& done);

/// The pids listed in a cgroup.procs file.
result<std::vector<pid_t>> read_pids(const std::string& procs_file);

/// A file holding one decimal number ("max" reads as UINT64_MAX).
result<uint64_t> read_number(const std::string& path);

/// The value after `key` in a "key value" per line file (memory.stat,
/// cpu.stat, memory.events, memory.oom_control); 0 when the key is absent.
result<uint64_t> read_keyed(const std::string& path, std::string_view key);

/// SIGKILLs every process in `procs_file` through a pidfd, after checking that
/// the pid is still listed once the pidfd is open: a pid that was reused by a
/// host process in between is never signalled.
status kill_members(const std::string& procs_file);

/// mkdir `path` (existing is fine).
status make_dir(const std::string& path);

/// rmdir `path`, retrying while the kernel still reports it busy; ok when gone.
status remove_dir(const std::string& path, uint32_t timeout_ms);

} // namespace airlock::worker::cgroup_detail
