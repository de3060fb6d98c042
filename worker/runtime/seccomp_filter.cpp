#include "worker/runtime/seccomp_filter.hpp"

#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <memory>

#include "worker/runtime/sys.hpp"
#include "schema/unique_fd.hpp"

namespace airlock::worker {
namespace {

struct denied_syscall {
  int number;
  const char* name;
  const char* why;
};

// Numbers rather than names: libseccomp 2.5 does not know every recent
// syscall by name, and an unknown name must not silently drop a rule.
constexpr denied_syscall deny_list[] = {
  {__NR_kexec_load, "kexec_load", "replaces the host kernel"},
  {__NR_kexec_file_load, "kexec_file_load", "replaces the host kernel"},
  {__NR_init_module, "init_module", "loads kernel code"},
  {__NR_finit_module, "finit_module", "loads kernel code"},
  {__NR_delete_module, "delete_module", "unloads kernel code"},
  {__NR_create_module, "create_module", "obsolete module interface"},
  {__NR_get_kernel_syms, "get_kernel_syms", "obsolete module interface"},
  {__NR_query_module, "query_module", "obsolete module interface"},
  {__NR_open_by_handle_at, "open_by_handle_at", "opens host files by handle (shocker)"},
  {__NR_name_to_handle_at, "name_to_handle_at", "companion of open_by_handle_at"},
  {__NR_bpf, "bpf", "kernel attack surface, reads kernel memory"},
  {__NR_perf_event_open, "perf_event_open", "kernel attack surface, leaks host activity"},
  {__NR_ptrace, "ptrace", "denied even inside (Docker allows it on new kernels)"},
  {__NR_process_vm_readv, "process_vm_readv", "reads other processes' memory"},
  {__NR_process_vm_writev, "process_vm_writev", "writes other processes' memory"},
  {__NR_process_madvise, "process_madvise", "acts on other processes' memory"},
  {__NR_kcmp, "kcmp", "inspects other processes' kernel objects"},
  {__NR_pidfd_getfd, "pidfd_getfd", "steals descriptors from other processes"},
  {__NR_keyctl, "keyctl", "kernel keyrings are not namespaced"},
  {__NR_add_key, "add_key", "kernel keyrings are not namespaced"},
  {__NR_request_key, "request_key", "kernel keyrings are not namespaced"},
  {__NR_mount, "mount", "the mount table is fixed at start"},
  {__NR_umount2, "umount2", "would uncover masked /proc paths"},
  {__NR_pivot_root, "pivot_root", "the root is fixed at start"},
  {__NR_mount_setattr, "mount_setattr", "would lift read-only mounts"},
  {__NR_open_tree, "open_tree", "new mount API"},
  {__NR_move_mount, "move_mount", "new mount API"},
  {__NR_fsopen, "fsopen", "new mount API"},
  {__NR_fsconfig, "fsconfig", "new mount API"},
  {__NR_fsmount, "fsmount", "new mount API"},
  {__NR_fspick, "fspick", "new mount API"},
  {__NR_unshare, "unshare", "a new user namespace regains every capability"},
  {__NR_setns, "setns", "joining namespaces"},
  {__NR_swapon, "swapon", "host swap"},
  {__NR_swapoff, "swapoff", "host swap"},
  {__NR_reboot, "reboot", "ends the sandbox's pid namespace abruptly"},
  {__NR_settimeofday, "settimeofday", "the clock is not namespaced"},
  {__NR_clock_settime, "clock_settime", "the clock is not namespaced"},
  {__NR_clock_adjtime, "clock_adjtime", "the clock is not namespaced"},
  {__NR_adjtimex, "adjtimex", "the clock is not namespaced"},
  {__NR_acct, "acct", "process accounting is host-wide"},
  {__NR_quotactl, "quotactl", "quotas are host-wide"},
  {__NR_quotactl_fd, "quotactl_fd", "quotas are host-wide"},
  {__NR_lookup_dcookie, "lookup_dcookie", "profiling interface"},
  {__NR_userfaultfd, "userfaultfd", "widens kernel race windows in exploits"},
  {__NR_io_uring_setup, "io_uring_setup", "bypasses syscall filtering"},
  {__NR_io_uring_enter, "io_uring_enter", "bypasses syscall filtering"},
  {__NR_io_uring_register, "io_uring_register", "bypasses syscall filtering"},
  {__NR_iopl, "iopl", "raw I/O ports"},
  {__NR_ioperm, "ioperm", "raw I/O ports"},
  {__NR_uselib, "uselib", "obsolete loader interface"},
  {__NR_nfsservctl, "nfsservctl", "obsolete NFS server control"},
  {__NR_syslog, "syslog", "reads the host kernel log"},
  {__NR_sethostname, "sethostname", "the hostname is the sandbox id"},
  {__NR_setdomainname, "setdomainname", "fixed at start"},
  {__NR_vhangup, "vhangup", "terminal control"},
};

using filter_ptr = std::unique_ptr<void, void (*)(scmp_filter_ctx)>;

status add_rule(scmp_filter_ctx ctx, uint32_t action, int nr, unsigned count,
                const scmp_arg_cmp* args, const char* name) {
  int rc = ::seccomp_rule_add_array(ctx, action, nr, count, args);
  if (rc != 0)
    return sys_error(errc::internal, std::string("seccomp rule for ") + name, -rc);
  return status::ok();
}

/// clone with any namespace flag: a new user namespace would hand back every
/// capability and a new mount namespace would allow mounts.
status add_clone_rules(scmp_filter_ctx ctx) {
  constexpr uint64_t flags[] = {CLONE_NEWNS,   CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC,
                                CLONE_NEWUSER, CLONE_NEWPID,    CLONE_NEWNET};
  for (uint64_t flag : flags) {
    scmp_arg_cmp arg = SCMP_A0(SCMP_CMP_MASKED_EQ, flag, flag);
    if (auto added = add_rule(ctx, SCMP_ACT_ERRNO(EPERM), __NR_clone, 1, &arg, "clone"); !added)
      return added;
  }
  // clone3 takes its flags in memory a filter cannot read: ENOSYS makes
  // glibc fall back to clone.
  return add_rule(ctx, SCMP_ACT_ERRNO(ENOSYS), __NR_clone3, 0, nullptr, "clone3");
}

/// Docker allows personality only with 0, 0x8 (PER_LINUX32), 0x20000
/// (UNAME26), 0x20008 and 0xffffffff (query). libseccomp allows one
/// comparison per argument per rule, so the complement is spelled out as
/// (bit b set, bit 0 clear) for every b outside the allowed mask, and
/// (bit 0 set, bit c clear) for every c: together exactly the 32-bit values
/// not allowed. Values above 32 bits are refused too (the kernel truncates).
status add_personality_rules(scmp_filter_ctx ctx) {
  constexpr uint64_t allowed_bits = 0x20008;
  for (int bit = 1; bit < 32; ++bit) {
    uint64_t b = uint64_t{1} << bit;
    scmp_arg_cmp arg = SCMP_A0(SCMP_CMP_MASKED_EQ, b | 1U, 1U);
    if (auto added = add_rule(ctx, SCMP_ACT_ERRNO(EPERM), __NR_personality, 1, &arg, "personality");
        !added)
      return added;
    if ((allowed_bits & b) != 0)
      continue;
    arg = SCMP_A0(SCMP_CMP_MASKED_EQ, b | 1U, b);
    if (auto added = add_rule(ctx, SCMP_ACT_ERRNO(EPERM), __NR_personality, 1, &arg, "personality");
        !added)
      return added;
  }
  scmp_arg_cmp arg = SCMP_A0(SCMP_CMP_GT, 0xffffffffULL);
  return add_rule(ctx, SCMP_ACT_ERRNO(EPERM), __NR_personality, 1, &arg, "personality");
}

result<seccomp_program> export_program(scmp_filter_ctx ctx) {
  unique_fd memfd(static_cast<int>(::syscall(SYS_memfd_create, "airlock-seccomp", MFD_CLOEXEC)));
  if (!memfd)
    return sys_error(errc::internal, "memfd_create for the seccomp filter", errno);
  if (int rc = ::seccomp_export_bpf(ctx, memfd.get()); rc != 0)
    return sys_error(errc::internal, "seccomp_export_bpf", -rc);
  off_t size = ::lseek(memfd.get(), 0, SEEK_END);
  if (size <= 0 || size % static_cast<off_t>(sizeof(sock_filter)) != 0)
    return make_status(errc::internal, "seccomp_export_bpf wrote a malformed program");
  seccomp_program program;
  program.instructions.resize(static_cast<size_t>(size) / sizeof(sock_filter));
  if (::pread(memfd.get(), program.instructions.data(), static_cast<size_t>(size), 0) != size)
    return sys_error(errc::internal, "read back the seccomp filter", errno);
  return program;
}

} // namespace

std::vector<std::string> denied_syscall_names() {
  std::vector<std::string> names;
  for (const auto& entry : deny_list)
    names.emplace_back(entry.name);
  return names;
}

result<seccomp_program> build_sandbox_seccomp_filter() {
  filter_ptr ctx(::seccomp_init(SCMP_ACT_ALLOW), ::seccomp_release);
  if (!ctx)
    return make_status(errc::internal, "seccomp_init failed (libseccomp out of memory?)");
  // Only the native x86_64 ABI: i386 (int 0x80) and x32 syscalls take the
  // bad-arch action, so the deny list cannot be sidestepped by numbering.
  if (int rc = ::seccomp_attr_set(ctx.get(), SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_ERRNO(EPERM));
      rc != 0)
    return sys_error(errc::internal, "seccomp bad-arch action", -rc);
  for (const auto& entry : deny_list)
    if (auto added =
          add_rule(ctx.get(), SCMP_ACT_ERRNO(EPERM), entry.number, 0, nullptr, entry.name);
        !added)
      return added;
  if (auto added = add_clone_rules(ctx.get()); !added)
    return added;
  if (auto added = add_personality_rules(ctx.get()); !added)
    return added;
  return export_program(ctx.get());
}

int install_seccomp_filter(const sock_fprog& program) noexcept {
  if (::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &program) != 0)
    return errno;
  return 0;
}

} // namespace airlock::worker
