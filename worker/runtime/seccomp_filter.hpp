#pragma once
// The sandbox's seccomp filter, modelled on Docker's default profile: an
// allow list (Docker's x86_64 list without the capability-gated groups),
// an explicit deny list returning EPERM that is stricter than Docker
// (ptrace, io_uring, the new mount API, ...), and ENOSYS for everything
// else. Built once in the worker with libseccomp; installed by the child
// with a plain syscall so the child never allocates between clone and exec.

#include <linux/filter.h>

#include <string>
#include <vector>

#include "schema/errc.hpp"

namespace airlock::worker {

/// A compiled BPF program.
struct seccomp_program {
  std::vector<sock_filter> instructions;

  /// The view the kernel takes; valid while `instructions` lives.
  sock_fprog view() const noexcept {
    return sock_fprog{static_cast<unsigned short>(instructions.size()),
                      const_cast<sock_filter*>(instructions.data())};
  }
};

/// Names of the syscalls refused with EPERM outright (for docs and tests);
/// clone with namespace flags, socket(AF_VSOCK) and unusual personality
/// values are refused by argument on top of these. None is ever allowed.
std::vector<std::string> denied_syscall_names();

/// Names of the syscalls allowed unconditionally (for docs and tests);
/// clone, socket and personality are allowed by argument on top of these.
std::vector<std::string> allowed_syscall_names();

/// Compiles the filter for x86_64: the allow list is allowed; the deny list
/// returns EPERM; clone without CLONE_NEW* flags, socket except AF_VSOCK and
/// Docker's personality values are allowed, the rest of those calls return
/// EPERM; every other syscall, clone3 included (so libc falls back to
/// clone, whose flags a filter can read), returns ENOSYS; i386 and x32
/// syscalls return EPERM.
result<seccomp_program> build_sandbox_seccomp_filter();

/// Child side: installs `program`. Requires no_new_privs. Returns 0 or errno.
int install_seccomp_filter(const sock_fprog& program) noexcept;

} // namespace airlock::worker
