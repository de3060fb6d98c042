#pragma once
// User namespace: the sandbox's root is an unprivileged host uid. Each sandbox
// gets its own contiguous range of host ids, so two sandboxes never share an
// owner for files, signals or ptrace permission checks.

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "schema/errc.hpp"

namespace airlock::worker {

/// Host ids mapped into one sandbox: ns id i <-> host id host_base + i.
struct id_range {
  uint32_t host_base = 0;
  uint32_t count = 0;
};

/// The range of `slot`: base + slot * count. invalid_argument on overflow.
result<id_range> slot_id_range(uint32_t base, uint32_t count, uint32_t slot);

/// The one-line uid_map/gid_map text "0 <host_base> <count>\n".
std::string id_map_text(const id_range& range);

/// Writes uid_map and gid_map of the child `pid`, which must be our unreaped
/// child (so its pid cannot be recycled) and still alive per `pidfd`.
/// setgroups stays "allow": the child must drop the worker's supplementary
/// groups with setgroups(0) itself, which "deny" would forbid (see
/// docs/runtime.md).
status write_id_maps(pid_t pid, int pidfd, const id_range& range);

} // namespace airlock::worker
