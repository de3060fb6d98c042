#pragma once
// Who holds a lock file: the processes that have it open, found in /proc.
//
// /proc/locks names the process that took an flock, not the one that holds it
// now: a lock taken by a daemon and inherited by a child the daemon started
// stays held after the daemon dies, and /proc/locks still names the dead pid.
// The holders are the processes with a descriptor on the file, so those are
// what an operator is told about.

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace airlock::airlockd {

/// One process that has the lock file open.
struct lock_holder {
  pid_t pid = 0;
  std::string command; ///< /proc/PID/comm, "" when unreadable
};

/// The pid /proc/locks records for an flock on the file at `path`, if it is
/// locked; that process may have exited since.
std::optional<pid_t> recorded_lock_owner(const std::string& path);

/// Every process but this one with a descriptor open on the file at `path`,
/// by pid. Needs permission to read other processes' /proc/PID/fd (root, or
/// the same user); processes it cannot read are not listed.
std::vector<lock_holder> open_file_holders(const std::string& path);

/// The sentence for an operator when the lock on `path` is busy: which
/// processes hold it and what to do ("held by pid 42 (airlockd) ...").
std::string describe_lock_holders(const std::string& path);

} // namespace airlock::airlockd
