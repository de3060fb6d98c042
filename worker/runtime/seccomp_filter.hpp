#pragma once
// The sandbox's seccomp filter, modelled on Docker's default profile: every
// syscall Docker refuses a container without extra capabilities returns
// EPERM here, plus ptrace and the new mount API. Built once in the worker
// with libseccomp; installed by the child with a plain syscall so the child
// never allocates between clone and exec.

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

/// Names of the syscalls denied outright (for docs and tests); clone with
/// namespace flags, clone3 (ENOSYS) and unusual personality values are
/// filtered by argument on top of these.
std::vector<std::string> denied_syscall_names();

/// Compiles the filter for x86_64: default allow; the deny list returns
/// EPERM; clone with any CLONE_NEW* flag returns EPERM; clone3 returns ENOSYS
/// (so libc falls back to clone, whose flags a filter can read); personality
/// is limited to Docker's values; i386 and x32 syscalls return EPERM.
result<seccomp_program> build_sandbox_seccomp_filter();

/// Child side: installs `program`. Requires no_new_privs. Returns 0 or errno.
int install_seccomp_filter(const sock_fprog& program) noexcept;

} // namespace airlock::worker
