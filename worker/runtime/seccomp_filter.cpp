#include "worker/runtime/seccomp_filter.hpp"

#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <memory>

#include "schema/unique_fd.hpp"
#include "worker/runtime/sys.hpp"

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

struct allowed_syscall {
  int number;
  const char* name;
};

// One compact table: the entries are only looked up, never read one by one.
// clang-format off
#define AIRLOCK_SC(name) allowed_syscall{__NR_##name, #name}

// Docker's default allow list for x86_64 (moby profiles/seccomp/default.json),
// minus everything in deny_list above (checked at compile time below) and
// minus the groups Docker only grants with extra capabilities. clone, socket
// and personality are allowed by argument in their own rules. By number, like
// the deny list.
constexpr allowed_syscall allow_list[] = {
  AIRLOCK_SC(accept), AIRLOCK_SC(accept4), AIRLOCK_SC(access), AIRLOCK_SC(alarm),
  AIRLOCK_SC(arch_prctl), AIRLOCK_SC(bind), AIRLOCK_SC(brk), AIRLOCK_SC(capget),
  AIRLOCK_SC(capset), AIRLOCK_SC(chdir), AIRLOCK_SC(chmod), AIRLOCK_SC(chown), AIRLOCK_SC(chroot),
  AIRLOCK_SC(clock_getres), AIRLOCK_SC(clock_gettime), AIRLOCK_SC(clock_nanosleep),
  AIRLOCK_SC(close), AIRLOCK_SC(close_range), AIRLOCK_SC(connect), AIRLOCK_SC(copy_file_range),
  AIRLOCK_SC(creat), AIRLOCK_SC(dup), AIRLOCK_SC(dup2), AIRLOCK_SC(dup3),
  AIRLOCK_SC(epoll_create), AIRLOCK_SC(epoll_create1), AIRLOCK_SC(epoll_ctl),
  AIRLOCK_SC(epoll_ctl_old), AIRLOCK_SC(epoll_pwait), AIRLOCK_SC(epoll_pwait2),
  AIRLOCK_SC(epoll_wait), AIRLOCK_SC(epoll_wait_old), AIRLOCK_SC(eventfd), AIRLOCK_SC(eventfd2),
  AIRLOCK_SC(execve), AIRLOCK_SC(execveat), AIRLOCK_SC(exit), AIRLOCK_SC(exit_group),
  AIRLOCK_SC(faccessat), AIRLOCK_SC(faccessat2), AIRLOCK_SC(fadvise64), AIRLOCK_SC(fallocate),
  AIRLOCK_SC(fanotify_mark), AIRLOCK_SC(fchdir), AIRLOCK_SC(fchmod), AIRLOCK_SC(fchmodat),
  AIRLOCK_SC(fchown), AIRLOCK_SC(fchownat), AIRLOCK_SC(fcntl), AIRLOCK_SC(fdatasync),
  AIRLOCK_SC(fgetxattr), AIRLOCK_SC(flistxattr), AIRLOCK_SC(flock), AIRLOCK_SC(fork),
  AIRLOCK_SC(fremovexattr), AIRLOCK_SC(fsetxattr), AIRLOCK_SC(fstat), AIRLOCK_SC(fstatfs),
  AIRLOCK_SC(fsync), AIRLOCK_SC(ftruncate), AIRLOCK_SC(futex), AIRLOCK_SC(futex_waitv),
  AIRLOCK_SC(futimesat), AIRLOCK_SC(getcpu), AIRLOCK_SC(getcwd), AIRLOCK_SC(getdents),
  AIRLOCK_SC(getdents64), AIRLOCK_SC(getegid), AIRLOCK_SC(geteuid), AIRLOCK_SC(getgid),
  AIRLOCK_SC(getgroups), AIRLOCK_SC(getitimer), AIRLOCK_SC(getpeername), AIRLOCK_SC(getpgid),
  AIRLOCK_SC(getpgrp), AIRLOCK_SC(getpid), AIRLOCK_SC(getppid), AIRLOCK_SC(getpriority),
  AIRLOCK_SC(getrandom), AIRLOCK_SC(getresgid), AIRLOCK_SC(getresuid), AIRLOCK_SC(getrlimit),
  AIRLOCK_SC(get_robust_list), AIRLOCK_SC(getrusage), AIRLOCK_SC(getsid), AIRLOCK_SC(getsockname),
  AIRLOCK_SC(getsockopt), AIRLOCK_SC(get_thread_area), AIRLOCK_SC(gettid),
  AIRLOCK_SC(gettimeofday), AIRLOCK_SC(getuid), AIRLOCK_SC(getxattr),
  AIRLOCK_SC(inotify_add_watch), AIRLOCK_SC(inotify_init), AIRLOCK_SC(inotify_init1),
  AIRLOCK_SC(inotify_rm_watch), AIRLOCK_SC(io_cancel), AIRLOCK_SC(ioctl), AIRLOCK_SC(io_destroy),
  AIRLOCK_SC(io_getevents), AIRLOCK_SC(io_pgetevents), AIRLOCK_SC(ioprio_get),
  AIRLOCK_SC(ioprio_set), AIRLOCK_SC(io_setup), AIRLOCK_SC(io_submit), AIRLOCK_SC(kill),
  AIRLOCK_SC(landlock_add_rule), AIRLOCK_SC(landlock_create_ruleset),
  AIRLOCK_SC(landlock_restrict_self), AIRLOCK_SC(lchown), AIRLOCK_SC(lgetxattr), AIRLOCK_SC(link),
  AIRLOCK_SC(linkat), AIRLOCK_SC(listen), AIRLOCK_SC(listxattr), AIRLOCK_SC(llistxattr),
  AIRLOCK_SC(lremovexattr), AIRLOCK_SC(lseek), AIRLOCK_SC(lsetxattr), AIRLOCK_SC(lstat),
  AIRLOCK_SC(madvise), AIRLOCK_SC(membarrier), AIRLOCK_SC(memfd_create), AIRLOCK_SC(memfd_secret),
  AIRLOCK_SC(mincore), AIRLOCK_SC(mkdir), AIRLOCK_SC(mkdirat), AIRLOCK_SC(mknod),
  AIRLOCK_SC(mknodat), AIRLOCK_SC(mlock), AIRLOCK_SC(mlock2), AIRLOCK_SC(mlockall),
  AIRLOCK_SC(mmap), AIRLOCK_SC(modify_ldt), AIRLOCK_SC(mprotect), AIRLOCK_SC(mq_getsetattr),
  AIRLOCK_SC(mq_notify), AIRLOCK_SC(mq_open), AIRLOCK_SC(mq_timedreceive),
  AIRLOCK_SC(mq_timedsend), AIRLOCK_SC(mq_unlink), AIRLOCK_SC(mremap), AIRLOCK_SC(msgctl),
  AIRLOCK_SC(msgget), AIRLOCK_SC(msgrcv), AIRLOCK_SC(msgsnd), AIRLOCK_SC(msync),
  AIRLOCK_SC(munlock), AIRLOCK_SC(munlockall), AIRLOCK_SC(munmap), AIRLOCK_SC(nanosleep),
  AIRLOCK_SC(newfstatat), AIRLOCK_SC(open), AIRLOCK_SC(openat), AIRLOCK_SC(openat2),
  AIRLOCK_SC(pause), AIRLOCK_SC(pidfd_open), AIRLOCK_SC(pidfd_send_signal), AIRLOCK_SC(pipe),
  AIRLOCK_SC(pipe2), AIRLOCK_SC(pkey_alloc), AIRLOCK_SC(pkey_free), AIRLOCK_SC(pkey_mprotect),
  AIRLOCK_SC(poll), AIRLOCK_SC(ppoll), AIRLOCK_SC(prctl), AIRLOCK_SC(pread64), AIRLOCK_SC(preadv),
  AIRLOCK_SC(preadv2), AIRLOCK_SC(prlimit64), AIRLOCK_SC(process_mrelease), AIRLOCK_SC(pselect6),
  AIRLOCK_SC(pwrite64), AIRLOCK_SC(pwritev), AIRLOCK_SC(pwritev2), AIRLOCK_SC(read),
  AIRLOCK_SC(readahead), AIRLOCK_SC(readlink), AIRLOCK_SC(readlinkat), AIRLOCK_SC(readv),
  AIRLOCK_SC(recvfrom), AIRLOCK_SC(recvmmsg), AIRLOCK_SC(recvmsg), AIRLOCK_SC(remap_file_pages),
  AIRLOCK_SC(removexattr), AIRLOCK_SC(rename), AIRLOCK_SC(renameat), AIRLOCK_SC(renameat2),
  AIRLOCK_SC(restart_syscall), AIRLOCK_SC(rmdir), AIRLOCK_SC(rseq), AIRLOCK_SC(rt_sigaction),
  AIRLOCK_SC(rt_sigpending), AIRLOCK_SC(rt_sigprocmask), AIRLOCK_SC(rt_sigqueueinfo),
  AIRLOCK_SC(rt_sigreturn), AIRLOCK_SC(rt_sigsuspend), AIRLOCK_SC(rt_sigtimedwait),
  AIRLOCK_SC(rt_tgsigqueueinfo), AIRLOCK_SC(sched_getaffinity), AIRLOCK_SC(sched_getattr),
  AIRLOCK_SC(sched_getparam), AIRLOCK_SC(sched_get_priority_max),
  AIRLOCK_SC(sched_get_priority_min), AIRLOCK_SC(sched_getscheduler),
  AIRLOCK_SC(sched_rr_get_interval), AIRLOCK_SC(sched_setaffinity), AIRLOCK_SC(sched_setattr),
  AIRLOCK_SC(sched_setparam), AIRLOCK_SC(sched_setscheduler), AIRLOCK_SC(sched_yield),
  AIRLOCK_SC(seccomp), AIRLOCK_SC(select), AIRLOCK_SC(semctl), AIRLOCK_SC(semget),
  AIRLOCK_SC(semop), AIRLOCK_SC(semtimedop), AIRLOCK_SC(sendfile), AIRLOCK_SC(sendmmsg),
  AIRLOCK_SC(sendmsg), AIRLOCK_SC(sendto), AIRLOCK_SC(setfsgid), AIRLOCK_SC(setfsuid),
  AIRLOCK_SC(setgid), AIRLOCK_SC(setgroups), AIRLOCK_SC(setitimer), AIRLOCK_SC(setpgid),
  AIRLOCK_SC(setpriority), AIRLOCK_SC(setregid), AIRLOCK_SC(setresgid), AIRLOCK_SC(setresuid),
  AIRLOCK_SC(setreuid), AIRLOCK_SC(setrlimit), AIRLOCK_SC(set_robust_list), AIRLOCK_SC(setsid),
  AIRLOCK_SC(setsockopt), AIRLOCK_SC(set_thread_area), AIRLOCK_SC(set_tid_address),
  AIRLOCK_SC(setuid), AIRLOCK_SC(setxattr), AIRLOCK_SC(shmat), AIRLOCK_SC(shmctl),
  AIRLOCK_SC(shmdt), AIRLOCK_SC(shmget), AIRLOCK_SC(shutdown), AIRLOCK_SC(sigaltstack),
  AIRLOCK_SC(signalfd), AIRLOCK_SC(signalfd4), AIRLOCK_SC(socketpair), AIRLOCK_SC(splice),
  AIRLOCK_SC(stat), AIRLOCK_SC(statfs), AIRLOCK_SC(statx), AIRLOCK_SC(symlink),
  AIRLOCK_SC(symlinkat), AIRLOCK_SC(sync), AIRLOCK_SC(sync_file_range), AIRLOCK_SC(syncfs),
  AIRLOCK_SC(sysinfo), AIRLOCK_SC(tee), AIRLOCK_SC(tgkill), AIRLOCK_SC(time),
  AIRLOCK_SC(timer_create), AIRLOCK_SC(timer_delete), AIRLOCK_SC(timer_getoverrun),
  AIRLOCK_SC(timer_gettime), AIRLOCK_SC(timer_settime), AIRLOCK_SC(timerfd_create),
  AIRLOCK_SC(timerfd_gettime), AIRLOCK_SC(timerfd_settime), AIRLOCK_SC(times), AIRLOCK_SC(tkill),
  AIRLOCK_SC(truncate), AIRLOCK_SC(umask), AIRLOCK_SC(uname), AIRLOCK_SC(unlink),
  AIRLOCK_SC(unlinkat), AIRLOCK_SC(utime), AIRLOCK_SC(utimensat), AIRLOCK_SC(utimes),
  AIRLOCK_SC(vfork), AIRLOCK_SC(vmsplice), AIRLOCK_SC(wait4), AIRLOCK_SC(waitid),
  AIRLOCK_SC(write), AIRLOCK_SC(writev),
  // Newer than this system's headers (Linux 6.5-6.7), so by number (the
  // numbers are ABI): page-cache residency of an open file (mincore for a
  // descriptor), lchmod, CET shadow stacks, futex2. Each has an ENOSYS
  // fallback in libc, so leaving one out would cost speed, not function.
  allowed_syscall{451, "cachestat"},
  allowed_syscall{452, "fchmodat2"},
  allowed_syscall{453, "map_shadow_stack"},
  allowed_syscall{454, "futex_wake"},
  allowed_syscall{455, "futex_wait"},
  allowed_syscall{456, "futex_requeue"},
};

#undef AIRLOCK_SC
// clang-format on

/// True when no syscall is on both lists: the deny list is the stricter
/// choice and must never be undone by the allow list.
constexpr bool lists_are_disjoint() {
  for (const auto& allowed : allow_list)
    for (const auto& denied : deny_list)
      if (allowed.number == denied.number)
        return false;
  for (const auto& denied : deny_list)
    if (denied.number == __NR_clone || denied.number == __NR_socket
        || denied.number == __NR_personality)
      return false;
  return true;
}
static_assert(lists_are_disjoint(), "a denied syscall is on the allow list");

using filter_ptr = std::unique_ptr<void, void (*)(scmp_filter_ctx)>;

status add_rule(scmp_filter_ctx ctx, uint32_t action, int nr, unsigned count,
                const scmp_arg_cmp* args, const char* name) {
  int rc = ::seccomp_rule_add_array(ctx, action, nr, count, args);
  if (rc != 0)
    return sys_error(errc::internal, std::string("seccomp rule for ") + name, -rc);
  return status::ok();
}

/// clone is allowed without namespace flags (Docker's rule: flags masked
/// with every CLONE_NEW* equal 0) and refused with EPERM with any of them: a
/// new user namespace would hand back every capability and a new mount
/// namespace would allow mounts. clone3 is left to the default ENOSYS: its
/// flags live in memory a filter cannot read, and ENOSYS makes glibc fall
/// back to clone.
status add_clone_rules(scmp_filter_ctx ctx) {
  constexpr uint64_t flags[] = {CLONE_NEWNS,   CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC,
                                CLONE_NEWUSER, CLONE_NEWPID,    CLONE_NEWNET};
  uint64_t all = 0;
  for (uint64_t flag : flags) {
    all |= flag;
    scmp_arg_cmp arg = SCMP_A0(SCMP_CMP_MASKED_EQ, flag, flag);
    if (auto added = add_rule(ctx, SCMP_ACT_ERRNO(EPERM), __NR_clone, 1, &arg, "clone"); !added)
      return added;
  }
  scmp_arg_cmp none = SCMP_A0(SCMP_CMP_MASKED_EQ, all, 0);
  return add_rule(ctx, SCMP_ACT_ALLOW, __NR_clone, 1, &none, "clone");
}

/// socket for every family but AF_VSOCK, as Docker: vsock is not network
/// namespaced and reaches the hypervisor host. The kernel reads the family
/// as an int, so only the low 32 bits are compared (a raw call with high bits
/// set cannot slip 40 past an inequality). Families 0..63 cover AF_MAX (46)
/// with room for new ones; any other value gets the default ENOSYS.
status add_socket_rules(scmp_filter_ctx ctx) {
  constexpr uint64_t family_count = 64;
  for (uint64_t family = 0; family < family_count; ++family) {
    uint32_t action = family == AF_VSOCK ? SCMP_ACT_ERRNO(EPERM) : SCMP_ACT_ALLOW;
    scmp_arg_cmp arg = SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffULL, family);
    if (auto added = add_rule(ctx, action, __NR_socket, 1, &arg, "socket"); !added)
      return added;
  }
  return status::ok();
}

/// Docker allows personality only with 0, 0x8 (PER_LINUX32), 0x20000
/// (UNAME26), 0x20008 and 0xffffffff (query): those five are allowed by
/// equality, every other value is refused with EPERM. libseccomp allows one
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
  if (auto added = add_rule(ctx, SCMP_ACT_ERRNO(EPERM), __NR_personality, 1, &arg, "personality");
      !added)
    return added;
  for (uint64_t value : {0x0ULL, 0x8ULL, 0x20000ULL, 0x20008ULL, 0xffffffffULL}) {
    arg = SCMP_A0(SCMP_CMP_EQ, value);
    if (auto added = add_rule(ctx, SCMP_ACT_ALLOW, __NR_personality, 1, &arg, "personality");
        !added)
      return added;
  }
  return status::ok();
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

std::vector<std::string> allowed_syscall_names() {
  std::vector<std::string> names;
  for (const auto& entry : allow_list)
    names.emplace_back(entry.name);
  return names;
}

result<seccomp_program> build_sandbox_seccomp_filter() {
  // Default ENOSYS, not Docker's EPERM: EPERM is kept for what we refuse on
  // purpose (the deny list, namespace clone flags, personality, vsock), and
  // anything we never decided on, including every syscall newer than this
  // list, looks to the sandbox like a kernel that lacks it, so libc and
  // runtimes take the fallback they already have for older kernels (glibc
  // treats only ENOSYS as "fall back": clone3, fchmodat2, faccessat2, ...).
  // runc does the same for syscalls newer than Docker's profile.
  filter_ptr ctx(::seccomp_init(SCMP_ACT_ERRNO(ENOSYS)), ::seccomp_release);
  if (!ctx)
    return make_status(errc::internal, "seccomp_init failed (libseccomp out of memory?)");
  // Only the native x86_64 ABI: i386 (int 0x80) and x32 syscalls take the
  // bad-arch action, so neither list can be sidestepped by numbering.
  if (int rc = ::seccomp_attr_set(ctx.get(), SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_ERRNO(EPERM));
      rc != 0)
    return sys_error(errc::internal, "seccomp bad-arch action", -rc);
  for (const auto& entry : deny_list)
    if (auto added =
          add_rule(ctx.get(), SCMP_ACT_ERRNO(EPERM), entry.number, 0, nullptr, entry.name);
        !added)
      return added;
  for (const auto& entry : allow_list)
    if (auto added = add_rule(ctx.get(), SCMP_ACT_ALLOW, entry.number, 0, nullptr, entry.name);
        !added)
      return added;
  for (auto* add : {&add_clone_rules, &add_socket_rules, &add_personality_rules})
    if (auto added = add(ctx.get()); !added)
      return added;
  return export_program(ctx.get());
}

int install_seccomp_filter(const sock_fprog& program) noexcept {
  if (::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &program) != 0)
    return errno;
  return 0;
}

} // namespace airlock::worker
