// Unit tests of the namespace runtime's pure parts and of its seccomp filter
// (installed in a forked child: needs no root).

#include <gtest/gtest.h>

#include <linux/io_uring.h>
#include <linux/keyctl.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "worker/runtime/cgroup_driver.hpp"
#include "worker/runtime/mount_ns.hpp"
#include "worker/runtime/net.hpp"
#include "worker/runtime/seccomp_filter.hpp"
#include "worker/runtime/state_file.hpp"
#include "worker/runtime/user_ns.hpp"

namespace airlock::worker {
namespace {

constexpr const char* hybrid_mountinfo =
  "22 28 0:21 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw\n"
  "25 22 0:24 / /sys/fs/cgroup ro,nosuid shared:9 - tmpfs tmpfs ro,mode=755\n"
  "26 25 0:25 / /sys/fs/cgroup/unified rw,nosuid shared:10 - cgroup2 cgroup2 rw\n"
  "27 25 0:26 / /sys/fs/cgroup/systemd rw shared:11 - cgroup cgroup rw,xattr,name=systemd\n"
  "30 25 0:29 / /sys/fs/cgroup/cpu rw shared:14 - cgroup cgroup rw,cpu\n"
  "31 25 0:30 / /sys/fs/cgroup/cpuacct rw shared:15 - cgroup cgroup rw,cpuacct\n"
  "32 25 0:31 / /sys/fs/cgroup/memory rw shared:16 - cgroup cgroup rw,memory\n"
  "33 25 0:32 / /sys/fs/cgroup/pids rw shared:17 - cgroup cgroup rw,pids\n"
  "34 25 0:33 / /sys/fs/cgroup/freezer rw shared:18 - cgroup cgroup rw,freezer\n"
  "35 25 0:34 / /sys/fs/cgroup/net\\040cls rw shared:19 - cgroup cgroup rw,net_cls,net_prio\n";

TEST(cgroup_mounts, finds_every_v1_controller_and_the_unified_mount) {
  auto mounts = parse_cgroup_mounts(hybrid_mountinfo);
  EXPECT_EQ(mounts.v2_path, "/sys/fs/cgroup/unified");
  EXPECT_EQ(mounts.v1_paths.at("memory"), "/sys/fs/cgroup/memory");
  EXPECT_EQ(mounts.v1_paths.at("cpuacct"), "/sys/fs/cgroup/cpuacct");
  EXPECT_EQ(mounts.v1_paths.at("net_prio"), "/sys/fs/cgroup/net cls");
  EXPECT_EQ(mounts.v1_paths.count("name=systemd"), 0U);
  EXPECT_EQ(mounts.v1_paths.count("xattr"), 0U) << "a mount flag, not a controller";
}

TEST(cgroup_mounts, a_pure_v2_host_has_no_v1_controllers) {
  auto mounts = parse_cgroup_mounts("25 22 0:24 / /sys/fs/cgroup rw,nosuid,nodev,noexec shared:9 - "
                                    "cgroup2 cgroup2 rw,nsdelegate\n");
  EXPECT_EQ(mounts.v2_path, "/sys/fs/cgroup");
  EXPECT_TRUE(mounts.v1_paths.empty());
  EXPECT_EQ(make_cgroup_v1_driver(mounts, "airlock").code(), errc::unavailable);
}

TEST(cpu_share, follows_the_request_as_kubernetes_maps_it) {
  EXPECT_EQ(cpu_shares_for(1000), 1024u) << "a core's request is the default share";
  EXPECT_EQ(cpu_shares_for(250), 256u);
  EXPECT_EQ(cpu_shares_for(1), 2u) << "never below the kernel's minimum";
  EXPECT_EQ(cpu_weight_for(1000), 39u) << "v2: 1024 shares is weight 39";
  EXPECT_EQ(cpu_weight_for(1), 1u);
  EXPECT_EQ(cpu_weight_for(1'000'000), 10'000u) << "capped at the largest weight";
  EXPECT_LT(cpu_weight_for(100), cpu_weight_for(2000));
}

TEST(cpu_quota, follows_the_limit_and_never_goes_below_the_kernels_minimum) {
  EXPECT_EQ(cpu_quota_us(250, 100'000), 25'000u);
  EXPECT_EQ(cpu_quota_us(2000, 100'000), 200'000u) << "two cores";
  EXPECT_EQ(cpu_quota_us(1, 100'000), cpu_quota_min_us);
}

TEST(sandbox_ids, allow_only_short_lowercase_path_safe_names) {
  EXPECT_TRUE(valid_sandbox_id("sb-1_a"));
  EXPECT_FALSE(valid_sandbox_id(""));
  EXPECT_FALSE(valid_sandbox_id("../etc"));
  EXPECT_FALSE(valid_sandbox_id("Upper"));
  EXPECT_FALSE(valid_sandbox_id(std::string(64, 'a')));
}

TEST(address_pool, carves_slash_30_blocks_with_host_first) {
  auto pool = parse_address_pool("10.200.128.0/17");
  ASSERT_TRUE(pool) << pool.error().message;
  EXPECT_EQ(pool->blocks(), 8192U);
  auto first = pool_addresses(*pool, 0);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->host, "10.200.128.1");
  EXPECT_EQ(first->sandbox, "10.200.128.2");
  EXPECT_EQ(first->prefix_length, 30U);
  auto second = pool_addresses(*pool, 1);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->host, "10.200.128.5");
  auto last = pool_addresses(*pool, 8191);
  ASSERT_TRUE(last);
  EXPECT_EQ(last->sandbox, "10.200.255.254");
  EXPECT_EQ(pool_addresses(*pool, 8192).code(), errc::resource_exhausted);
}

TEST(address_pool, rejects_malformed_pools) {
  EXPECT_EQ(parse_address_pool("10.200.0.0").code(), errc::invalid_argument);
  EXPECT_EQ(parse_address_pool("10.200.0.1/16").code(), errc::invalid_argument);
  EXPECT_EQ(parse_address_pool("10.200.0.0/31").code(), errc::invalid_argument);
  EXPECT_EQ(parse_address_pool("300.1.0.0/16").code(), errc::invalid_argument);
  auto slash31 = parse_address_pool("10.200.0.0/24", 31);
  ASSERT_TRUE(slash31);
  EXPECT_EQ(pool_addresses(*slash31, 1)->host, "10.200.0.2");
  EXPECT_EQ(pool_addresses(*slash31, 1)->sandbox, "10.200.0.3");
}

TEST(host_interface_name, fits_ifnamsiz_whatever_the_id) {
  auto name = host_interface_name("al", std::string(63, 'x'));
  EXPECT_EQ(name.size(), 11U);
  EXPECT_EQ(name.rfind("al", 0), 0U);
  EXPECT_EQ(name.back(), 'h');
  EXPECT_EQ(name, host_interface_name("al", std::string(63, 'x')));
  EXPECT_NE(name, host_interface_name("al", "other"));
}

TEST(id_ranges, give_each_slot_its_own_range_and_refuse_overflow) {
  auto range = slot_id_range(100000, 65536, 2);
  ASSERT_TRUE(range);
  EXPECT_EQ(range->host_base, 100000U + 2 * 65536U);
  EXPECT_EQ(id_map_text(*range), "0 231072 65536\n");
  EXPECT_EQ(slot_id_range(100000, 65536, 70000).code(), errc::invalid_argument);
}

TEST(state_records, round_trip_and_reject_damage) {
  sandbox_record record;
  record.id = "sb-1";
  record.slot = 3;
  record.init_pid = 4242;
  record.init_start_time = 987654321;
  record.uid_base = 296608;
  record.ids_count = 65536;
  record.cgroup_driver = "v1";
  record.network = true;
  record.host_interface = "al0123abcdh";
  record.host_address = "10.200.0.13";
  record.sandbox_address = "10.200.0.14";
  record.prefix_length = 30;
  auto decoded = decode_record(encode_record(record));
  ASSERT_TRUE(decoded) << decoded.error().message;
  EXPECT_EQ(encode_record(*decoded), encode_record(record));
  EXPECT_EQ(decode_record("version=2\n").code(), errc::unsupported_version);
  EXPECT_EQ(decode_record("garbage").code(), errc::corrupt_record);
  std::string damaged = encode_record(record);
  damaged.replace(damaged.find("slot=3"), 6, "slot=x");
  EXPECT_EQ(decode_record(damaged).code(), errc::corrupt_record);
}

TEST(mount_plan, masks_proc_and_ends_in_pivot_root) {
  mount_plan plan;
  build_mount_plan({"/srv/rootfs", true, 64}, plan);
  const auto& ops = plan.ops();
  ASSERT_FALSE(ops.empty());
  EXPECT_EQ(ops.front().what, mount_op::kind::make_private);
  EXPECT_EQ(ops.back().what, mount_op::kind::pivot);
  EXPECT_EQ(ops[plan.host_steps() - 1].what, mount_op::kind::enter);
  auto has = [&ops](mount_op::kind what, const std::string& target) {
    for (const auto& op : ops)
      if (op.what == what && op.target != nullptr && target == op.target)
        return true;
    return false;
  };
  for (const auto& path : masked_proc_paths())
    EXPECT_TRUE(has(mount_op::kind::bind, path)) << path;
  for (const auto& path : readonly_proc_paths())
    EXPECT_TRUE(has(mount_op::kind::remount_ro, path)) << path;
  EXPECT_TRUE(has(mount_op::kind::mount_fs, "dev/pts"));
  EXPECT_TRUE(has(mount_op::kind::symlink, "dev/ptmx"));
  EXPECT_TRUE(has(mount_op::kind::mount_fs, "sys"));
  EXPECT_NE(plan.describe(1).find("/srv/rootfs"), std::string::npos);
}

/// One probe run under the filter: the errno it produced (0: it succeeded).
struct probe {
  const char* what;
  int expected;
};

long raw_i386_getpid() {
  long result = 20; // __NR_getpid on i386
  asm volatile("int $0x80" : "+a"(result) : : "memory");
  return result;
}

/// Whether this kernel runs i386 system calls (int 0x80) at all: a kernel
/// without IA32 emulation faults them (SIGSEGV) before any filter sees them,
/// so there is nothing for the filter to refuse.
bool kernel_has_i386_abi() {
  static const bool present = [] {
    pid_t pid = ::fork();
    if (pid == 0) {
      raw_i386_getpid();
      ::_exit(0);
    }
    int wstatus = 0;
    return pid > 0 && ::waitpid(pid, &wstatus, 0) == pid && WIFEXITED(wstatus)
           && WEXITSTATUS(wstatus) == 0;
  }();
  return present;
}

/// Set before the probing child forks (the probe itself must not fork).
bool i386_abi_present = true;

/// Runs in the forked child, after the filter is installed.
int run_probe(int index) {
  auto err = [](long rc) { return rc < 0 ? errno : 0; };
  switch (index) {
    case 0: return err(::syscall(SYS_unshare, CLONE_NEWUSER));
    case 1: return err(::syscall(SYS_unshare, CLONE_NEWNS));
    case 2: {
      clone_args args{};
      args.exit_signal = SIGCHLD;
      return err(::syscall(SYS_clone3, &args, sizeof args));
    }
    case 3: return err(::syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0));
    case 4: return err(::syscall(SYS_clone, CLONE_NEWNET | SIGCHLD, 0, 0, 0, 0));
    case 5: return err(::syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0));
    case 6: return err(::syscall(SYS_ptrace, PTRACE_TRACEME, 0, 0, 0));
    case 7: {
      io_uring_params params{};
      return err(::syscall(SYS_io_uring_setup, 1, &params));
    }
    case 8: return err(::syscall(SYS_personality, 0x0040000UL)); // ADDR_NO_RANDOMIZE
    case 9: return err(::syscall(SYS_personality, 1UL));
    case 10: return err(::syscall(SYS_personality, 0x100000000UL));
    case 11: return err(::syscall(SYS_personality, 0xffffffffUL)); // query: allowed
    case 12: return err(::syscall(SYS_personality, 0x20008UL));    // allowed
    case 13: // see the_i386_abi_is_refused for a kernel without it
      if (!i386_abi_present)
        return EPERM;
      return raw_i386_getpid() == -EPERM ? EPERM : 0;
    case 14: return err(::syscall(0x40000000 | SYS_getpid)); // x32 ABI
    case 15: return err(::syscall(SYS_mount, "none", "/", "tmpfs", 0, 0));
    case 16: return err(::syscall(SYS_setns, 0, 0));
    case 17: return err(::syscall(SYS_bpf, 0, 0, 0));
    case 18: return err(::syscall(SYS_fsopen, "tmpfs", 0));
    case 19: return err(::syscall(SYS_getpid));
    case 20: { // threads: glibc gets ENOSYS from clone3 and falls back to clone
      int value = 0;
      std::thread([&value] { value = 1; }).join();
      return value == 1 ? 0 : EINVAL;
    }
    case 21: {
      pid_t pid = ::fork();
      if (pid == 0)
        ::_exit(0);
      int wstatus = 0;
      return pid > 0 && ::waitpid(pid, &wstatus, 0) == pid ? 0 : errno;
    }
    case 22: return err(::syscall(1000)); // no such syscall
    case 23:
      return err(::syscall(SYS_set_mempolicy, 0, nullptr, 0)); // MPOL_DEFAULT: works unfiltered
    case 24: return err(::syscall(SYS_syslog, 3, nullptr, 0));
    case 25: return err(::syscall(SYS_acct, nullptr));
    case 26: return err(::syscall(SYS_swapon, "/nonexistent", 0));
    case 27: return err(::syscall(SYS_reboot, 0, 0, 0, nullptr));
    case 28: return err(::syscall(SYS_socket, AF_VSOCK, SOCK_STREAM, 0));
    case 29: return err(::syscall(SYS_socket, (1UL << 32) | AF_VSOCK, SOCK_STREAM, 0));
    case 30: {
      long fd = ::syscall(SYS_socket, AF_INET, SOCK_DGRAM, 0);
      return fd >= 0 && ::close(static_cast<int>(fd)) == 0 ? 0 : errno;
    }
    case 31: {
      long fd = ::syscall(SYS_socket, AF_UNIX, SOCK_STREAM, 0);
      return fd >= 0 && ::close(static_cast<int>(fd)) == 0 ? 0 : errno;
    }
    case 32: return err(::syscall(SYS_clone, CLONE_NEWNS | SIGCHLD, 0, 0, 0, 0));
    case 33: { // a plain clone is allowed (fork above goes through clone too)
      long pid = ::syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
      if (pid == 0)
        ::_exit(0);
      int wstatus = 0;
      return pid > 0 && ::waitpid(static_cast<pid_t>(pid), &wstatus, 0) == pid ? 0 : errno;
    }
    case 34: return err(::syscall(SYS_personality, 0UL)); // PER_LINUX: allowed
    case 35: return err(::syscall(SYS_move_pages, 0, 0, nullptr, nullptr, nullptr, 0));
    default: return -1;
  }
}

constexpr probe probes[] = {
  {"unshare(NEWUSER)", EPERM},
  {"unshare(NEWNS)", EPERM},
  {"clone3", ENOSYS},
  {"clone(NEWUSER)", EPERM},
  {"clone(NEWNET)", EPERM},
  {"keyctl", EPERM},
  {"ptrace(TRACEME)", EPERM},
  {"io_uring_setup", EPERM},
  {"personality(ADDR_NO_RANDOMIZE)", EPERM},
  {"personality(1)", EPERM},
  {"personality(>32 bits)", EPERM},
  {"personality(query)", 0},
  {"personality(0x20008)", 0},
  {"i386 int 0x80", EPERM},
  {"x32 getpid", EPERM},
  {"mount", EPERM},
  {"setns", EPERM},
  {"bpf", EPERM},
  {"fsopen", EPERM},
  {"getpid", 0},
  {"pthread_create", 0},
  {"fork", 0},
  {"syscall 1000 (unknown)", ENOSYS},
  {"set_mempolicy (unlisted)", ENOSYS},
  {"syslog", EPERM},
  {"acct", EPERM},
  {"swapon", EPERM},
  {"reboot", EPERM},
  {"socket(AF_VSOCK)", EPERM},
  {"socket(AF_VSOCK | 1 << 32)", EPERM},
  {"socket(AF_INET)", 0},
  {"socket(AF_UNIX)", 0},
  {"clone(NEWNS)", EPERM},
  {"clone(SIGCHLD)", 0},
  {"personality(PER_LINUX)", 0},
  {"move_pages (unlisted)", ENOSYS},
};

TEST(seccomp_filter, the_i386_abi_is_refused) {
  if (!kernel_has_i386_abi())
    GTEST_SKIP()
      << "this kernel has no i386 ABI (int 0x80 faults without any filter): nothing to refuse";
  auto program = build_sandbox_seccomp_filter();
  ASSERT_TRUE(program) << program.error().message;
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto view = program->view();
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || install_seccomp_filter(view) != 0)
      ::_exit(2);
    ::_exit(raw_i386_getpid() == -EPERM ? 0 : 1);
  }
  int wstatus = 0;
  ASSERT_EQ(::waitpid(pid, &wstatus, 0), pid);
  EXPECT_TRUE(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0)
    << "int 0x80 was not refused with EPERM";
}

TEST(seccomp_filter, denies_the_docker_list_and_keeps_ordinary_calls_working) {
  i386_abi_present = kernel_has_i386_abi();
  auto program = build_sandbox_seccomp_filter();
  ASSERT_TRUE(program) << program.error().message;
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  constexpr size_t count = std::size(probes);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int results[count];
    auto view = program->view();
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || install_seccomp_filter(view) != 0)
      ::_exit(2);
    for (size_t i = 0; i < count; ++i)
      results[i] = run_probe(static_cast<int>(i));
    (void)!::write(pipe_fds[1], results, sizeof results);
    ::_exit(0);
  }
  ::close(pipe_fds[1]);
  int results[count] = {};
  ssize_t n = ::read(pipe_fds[0], results, sizeof results);
  ::close(pipe_fds[0]);
  int wstatus = 0;
  ASSERT_EQ(::waitpid(pid, &wstatus, 0), pid);
  ASSERT_TRUE(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0)
    << "the probing child did not finish: "
    << (WIFSIGNALED(wstatus)
          ? "killed by signal " + std::to_string(WTERMSIG(wstatus))
          : "exit status " + std::to_string(WEXITSTATUS(wstatus))
              + (WEXITSTATUS(wstatus) == 2 ? " (the filter did not install)" : ""))
    << " after " << n << " of " << sizeof results << " result bytes";
  ASSERT_EQ(n, static_cast<ssize_t>(sizeof results));
  for (size_t i = 0; i < count; ++i)
    EXPECT_EQ(results[i], probes[i].expected)
      << probes[i].what << " gave " << std::strerror(results[i]);
}

TEST(seccomp_filter, lists_the_syscalls_docs_promise) {
  auto names = denied_syscall_names();
  for (const char* name : {"kexec_load", "init_module", "open_by_handle_at", "bpf", "ptrace",
                           "keyctl", "mount", "unshare", "setns", "io_uring_setup", "userfaultfd",
                           "pidfd_getfd", "mount_setattr", "fsopen", "kcmp", "syslog"})
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name;
}

TEST(seccomp_filter, never_allows_a_denied_syscall_and_allows_the_common_ones) {
  auto allowed = allowed_syscall_names();
  auto denied = denied_syscall_names();
  for (const auto& name : denied)
    EXPECT_EQ(std::find(allowed.begin(), allowed.end(), name), allowed.end()) << name;
  for (const char* name : {"read", "openat", "execve", "mmap", "futex", "epoll_wait", "statx",
                           "close_range", "pidfd_open", "rseq", "getrandom", "faccessat2", "chroot",
                           "arch_prctl", "signalfd4", "memfd_create"})
    EXPECT_NE(std::find(allowed.begin(), allowed.end(), name), allowed.end()) << name;
  // Argument-filtered and ENOSYS ones are not on the unconditional list.
  for (const char* name : {"clone", "clone3", "socket", "personality", "adjtimex",
                           "name_to_handle_at", "io_uring_setup", "set_mempolicy"})
    EXPECT_EQ(std::find(allowed.begin(), allowed.end(), name), allowed.end()) << name;
}

} // namespace
} // namespace airlock::worker
