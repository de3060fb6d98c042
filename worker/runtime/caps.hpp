#pragma once
// Capabilities: the sandbox keeps Docker's default set. They are capabilities
// of the sandbox's own user namespace, so they never act on host objects, but
// the set still narrows what the kernel lets root inside do to itself (no
// CAP_SYS_ADMIN: no mount, no sethostname; no CAP_NET_ADMIN: no address or
// route changes; no CAP_SYS_PTRACE, no CAP_SYS_MODULE).

#include <cstdint>

namespace airlock::worker {

/// CHOWN, DAC_OVERRIDE, FOWNER, FSETID, KILL, SETGID, SETUID, SETPCAP,
/// NET_BIND_SERVICE, NET_RAW, SYS_CHROOT, MKNOD, AUDIT_WRITE, SETFCAP: the
/// CapEff of a default Docker container (00000000a80425fb).
constexpr uint64_t docker_default_capabilities = 0x00000000a80425fbULL;

/// Child side, before exec and after mounts: drops every capability not in
/// `keep` from the bounding set, clears the ambient set, and sets permitted,
/// effective to `keep` and empties inheritable (as Docker does since
/// CVE-2022-24769). Allocation-free. Returns 0 or an errno.
int drop_capabilities(uint64_t keep) noexcept;

} // namespace airlock::worker
