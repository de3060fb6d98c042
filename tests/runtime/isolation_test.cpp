// Attacks run as root inside a sandbox. Each must fail; where a failure could
// come from a missing tool rather than the isolation, the test also shows
// that the same tool works on an allowed target.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "sandbox_fixture.hpp"
#include "worker/runtime/caps.hpp"
#include "worker/runtime/sys.hpp"

namespace airlock::worker::testing {
namespace {

namespace fs = std::filesystem;

using isolation = runtime_test;

/// A file in the host's /tmp whose content must never show up in a sandbox.
struct host_marker {
  temp_dir dir{"airlock-marker"};
  std::string path = dir.path() + "/host-secret";
  std::string secret = "host-secret-" + std::to_string(::getpid());
  host_marker() { std::ofstream(path) << secret << "\n"; }
};

TEST_F(isolation, host_files_outside_the_rootfs_are_unreachable) {
  host_marker marker;
  auto box = start_sandbox(unique_id("iso-files"));
  ASSERT_NE(box.runtime, nullptr);
  const std::string name = fs::path(marker.path).filename();
  for (const std::string& attempt :
       {"cat " + marker.path, "cat /proc/1/root" + marker.path,
        "cat ../../../../../.." + marker.path,
        "cd /proc/self/cwd/../../../.. && cat ." + marker.path,
        "cat /proc/self/root/../../.." + marker.path, "chroot / cat " + marker.path,
        "find / -name " + name + " -exec cat {} +", "cat /proc/1/cwd/../../.." + marker.path}) {
    auto out = box.shell.run(attempt);
    EXPECT_EQ(out.output.find(marker.secret), std::string::npos) << attempt << ": " << out.output;
  }
  // /proc/<pid>/root of every visible process is the sandbox's own root.
  auto roots = box.shell.run("for p in /proc/[0-9]*; do ls $p/root/ 2>/dev/null; done | sort -u");
  EXPECT_EQ(roots.output.find("home"), std::string::npos) << roots.output;
  EXPECT_EQ(roots.output.find("work"), std::string::npos) << roots.output;
}

TEST_F(isolation, host_processes_are_invisible_and_cannot_be_signalled) {
  auto box = start_sandbox(unique_id("iso-procs"));
  ASSERT_NE(box.runtime, nullptr);
  auto pids = box.shell.run("ls /proc | grep -E '^[0-9]+$' | wc -l");
  EXPECT_EQ(pids.exit_code, 0);
  EXPECT_LT(std::atoi(pids.output.c_str()), 10) << "more pids than the sandbox runs";
  auto init = box.shell.run("cat /proc/1/cmdline | tr '\\0' ' '");
  EXPECT_EQ(init.output.rfind("/bin/sh -c", 0), 0U) << "pid 1 is not the sandbox's init";
  // The test process is a live host process; its pid means nothing inside.
  std::string host_pid = std::to_string(::getpid());
  EXPECT_NE(box.shell.run("kill -0 " + host_pid).exit_code, 0);
  EXPECT_NE(box.shell.run("kill -9 " + host_pid).exit_code, 0);
  EXPECT_NE(box.shell
              .run("test -e /proc/" + host_pid + "/status && grep -q runtime_integ /proc/"
                   + host_pid + "/status")
              .exit_code,
            0);
}

TEST_F(isolation, mount_module_loading_and_new_namespaces_fail) {
  auto box = start_sandbox(unique_id("iso-mount"));
  ASSERT_NE(box.runtime, nullptr);
  EXPECT_NE(box.shell.run("mount -t tmpfs none /mnt").exit_code, 0);
  EXPECT_NE(box.shell.run("mount -t proc proc /mnt").exit_code, 0);
  EXPECT_NE(box.shell.run("mount --bind / /mnt").exit_code, 0);
  EXPECT_NE(box.shell.run("umount /proc/kcore").exit_code, 0);
  EXPECT_NE(box.shell.run("umount -l /proc/sys").exit_code, 0);
  auto module = box.shell.run("echo garbage > /tmp/evil.ko && insmod /tmp/evil.ko");
  EXPECT_NE(module.exit_code, 0);
  EXPECT_NE(module.output.find("not permitted"), std::string::npos) << module.output;
  // A nested user namespace would hand back every capability.
  EXPECT_NE(box.shell.run("unshare -U -r id").exit_code, 0);
  EXPECT_NE(box.shell.run("unshare -m id").exit_code, 0);
  EXPECT_NE(box.shell.run("nsenter -t 1 -m id").exit_code, 0);
  EXPECT_NE(box.shell.run("hostname evil").exit_code, 0);
  EXPECT_EQ(box.shell.run("hostname").output, box.handle.id + "\n");
}

TEST_F(isolation, proc_sys_sysrq_and_masked_proc_paths_are_protected) {
  auto box = start_sandbox(unique_id("iso-proc"));
  ASSERT_NE(box.runtime, nullptr);
  EXPECT_NE(box.shell.run("echo evil > /proc/sys/kernel/hostname").exit_code, 0);
  EXPECT_EQ(box.shell.run("cat /proc/sys/kernel/hostname").output, box.handle.id + "\n");
  EXPECT_NE(box.shell.run("echo b > /proc/sysrq-trigger").exit_code, 0);
  EXPECT_NE(box.shell.run("echo 1 > /proc/sys/vm/drop_caches").exit_code, 0);
  EXPECT_NE(box.shell.run("echo 1 > /proc/sys/net/ipv4/ip_forward").exit_code, 0);
  for (const char* masked :
       {"/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/sched_debug"}) {
    auto out =
      box.shell.run(std::string("test ! -e ") + masked + " || head -c 64 " + masked + " | wc -c");
    EXPECT_TRUE(out.output.empty() || out.output == "0\n") << masked << ": " << out.output;
  }
  for (const char* masked : {"/proc/acpi", "/proc/scsi"}) {
    auto out = box.shell.run(std::string("test ! -e ") + masked + " || ls -A " + masked);
    EXPECT_EQ(out.output, "") << masked;
  }
  EXPECT_NE(box.shell.run("touch /sys/kernel/evil").exit_code, 0);
  EXPECT_EQ(box.shell.run("ls -A /sys/firmware").output, "");
}

TEST_F(isolation, cgroup_release_agent_and_device_nodes_are_out_of_reach) {
  auto box = start_sandbox(unique_id("iso-cgroup"));
  ASSERT_NE(box.runtime, nullptr);
  EXPECT_NE(box.shell.run("mkdir -p /tmp/cg && mount -t cgroup -o memory cgroup /tmp/cg").exit_code,
            0);
  EXPECT_NE(box.shell.run("mount -t cgroup -o rdma cgroup /tmp/cg").exit_code, 0);
  EXPECT_NE(box.shell.run("mount -t cgroup2 none /tmp/cg").exit_code, 0);
  EXPECT_EQ(box.shell.run("ls -A /sys/fs/cgroup").output, "") << "no cgroupfs is mounted";
  EXPECT_NE(box.shell.run("echo /tmp/x > /sys/fs/cgroup/release_agent").exit_code, 0);
  // The cgroup namespace is rooted at the sandbox's own cgroup.
  auto own = box.shell.run("cat /proc/self/cgroup");
  EXPECT_EQ(own.output.find("airlock"), std::string::npos) << own.output;
  // No CAP_MKNOD over real devices in a user namespace: the kernel refuses;
  // and the rootfs is nodev should a node appear anyway.
  auto mknod = box.shell.run("mknod /tmp/sda b 8 0 || mknod /tmp/mem c 1 1 && head -c 1 /tmp/mem");
  EXPECT_NE(mknod.exit_code, 0) << mknod.output;
  EXPECT_NE(box.shell.run("test -e /dev/mem").exit_code, 0) << "only the minimal /dev exists";
}

/// The mount options of the sandbox's root ("rw,nodev,relatime,..."), from
/// its own mountinfo.
std::string root_mount_options(shell_session& shell) {
  return shell.run("awk '$5 == \"/\" { print $6 }' /proc/self/mountinfo").output;
}

// Docker's default (the runtime's): no no_new_privs, so a set-uid program
// inside (sudo) works, within everything else below.
TEST_F(isolation, seccomp_and_docker_capabilities_are_in_force) {
  auto box = start_sandbox(unique_id("iso-caps"));
  ASSERT_NE(box.runtime, nullptr);
  EXPECT_EQ(box.shell.run("grep NoNewPrivs /proc/self/status").output, "NoNewPrivs:\t0\n");
  auto options = root_mount_options(box.shell);
  EXPECT_EQ(options.find("nosuid"), std::string::npos) << options;
  EXPECT_NE(options.find("nodev"), std::string::npos) << options;
  EXPECT_EQ(box.shell.run("grep ^Seccomp: /proc/self/status").output, "Seccomp:\t2\n");
  char mask[32];
  std::snprintf(mask, sizeof mask, "%016llx",
                static_cast<unsigned long long>(docker_default_capabilities));
  EXPECT_EQ(box.shell.run("grep CapEff /proc/self/status").output,
            std::string("CapEff:\t") + mask + "\n");
  EXPECT_EQ(box.shell.run("grep CapPrm /proc/self/status").output,
            std::string("CapPrm:\t") + mask + "\n");
  EXPECT_EQ(box.shell.run("grep CapBnd /proc/self/status").output,
            std::string("CapBnd:\t") + mask + "\n");
  EXPECT_EQ(box.shell.run("grep CapInh /proc/self/status").output, "CapInh:\t0000000000000000\n");
  EXPECT_EQ(box.shell.run("grep CapAmb /proc/self/status").output, "CapAmb:\t0000000000000000\n");
  // ptrace of anything is refused by the filter (host pids are not even
  // visible: see host_processes_are_invisible_and_cannot_be_signalled).
  auto ptrace = box.shell.run("grep TracerPid /proc/1/status");
  EXPECT_EQ(ptrace.output, "TracerPid:\t0\n");
  EXPECT_NE(box.shell.run("ip addr add 10.200.255.1/32 dev eth0").exit_code, 0)
    << "no CAP_NET_ADMIN: the sandbox cannot change its address";
}

TEST_F(isolation, no_new_privs_when_asked_with_a_nosuid_root) {
  runtime_.reset();
  auto options = test_options(state_->path());
  options.no_new_privs = true;
  auto opened = namespace_runtime::open(options);
  ASSERT_TRUE(opened) << opened.error().message;
  runtime_ = std::move(*opened);
  auto box = start_sandbox(unique_id("iso-nnp"));
  ASSERT_NE(box.runtime, nullptr);
  EXPECT_EQ(box.shell.run("grep NoNewPrivs /proc/self/status").output, "NoNewPrivs:\t1\n");
  EXPECT_NE(root_mount_options(box.shell).find("nosuid"), std::string::npos);
  EXPECT_EQ(box.shell.run("grep ^Seccomp: /proc/self/status").output, "Seccomp:\t2\n");
  char mask[32];
  std::snprintf(mask, sizeof mask, "%016llx",
                static_cast<unsigned long long>(docker_default_capabilities));
  EXPECT_EQ(box.shell.run("grep CapEff /proc/self/status").output,
            std::string("CapEff:\t") + mask + "\n");
}

/// A TCP listener on the host side of a sandbox's veth; counts connections.
struct host_listener {
  unique_fd socket;
  uint16_t port = 0;

  explicit host_listener(const std::string& address) {
    socket.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    ::inet_pton(AF_INET, address.c_str(), &addr.sin_addr);
    EXPECT_EQ(::bind(socket.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(::listen(socket.get(), 4), 0);
    socklen_t len = sizeof addr;
    ::getsockname(socket.get(), reinterpret_cast<sockaddr*>(&addr), &len);
    port = ntohs(addr.sin_port);
  }

  bool has_pending_connection() {
    pollfd pfd{socket.get(), POLLIN, 0};
    return ::poll(&pfd, 1, 0) > 0;
  }
};

TEST_F(isolation, sandboxes_reach_neither_each_other_nor_the_host) {
  auto a = start_sandbox(unique_id("iso-net-a"));
  auto b = start_sandbox(unique_id("iso-net-b"));
  ASSERT_NE(a.runtime, nullptr);
  ASSERT_NE(b.runtime, nullptr);
  // Loopback works and eth0 carries the pool address: the failures below
  // come from the firewall, not from a missing network.
  EXPECT_EQ(a.shell.run("ping -c 1 -W 2 127.0.0.1 >/dev/null").exit_code, 0);
  auto addr = a.shell.run("ip -4 addr show eth0");
  EXPECT_NE(addr.output.find(a.handle.sandbox_address + "/30"), std::string::npos) << addr.output;
  EXPECT_EQ(host_run({"/bin/ping", "-c", "1", "-W", "2", a.handle.sandbox_address}) == 0, false)
    << "replies from the sandbox must be dropped too";

  host_listener on_host(a.handle.host_address);
  std::string port = std::to_string(on_host.port);
  EXPECT_NE(a.shell.run("ping -c 1 -W 1 " + b.handle.sandbox_address).exit_code, 0);
  EXPECT_NE(a.shell.run("ping -c 1 -W 1 " + a.handle.host_address).exit_code, 0);
  EXPECT_NE(a.shell.run("ping -c 1 -W 1 " + b.handle.host_address).exit_code, 0);
  EXPECT_NE(a.shell.run("nc -w 1 " + a.handle.host_address + " " + port + " </dev/null").exit_code,
            0);
  EXPECT_NE(a.shell.run("wget -q -T 1 -O - http://" + b.handle.sandbox_address + ":80/").exit_code,
            0);
  EXPECT_NE(a.shell.run("wget -q -T 1 -O - http://1.1.1.1/").exit_code, 0);
  EXPECT_FALSE(on_host.has_pending_connection()) << "a sandbox connected to the host";
}

} // namespace
} // namespace airlock::worker::testing
