// One real microVM under TCG, booted once for this executable through
// microvm_runtime: the guest that scripts/microvm-guest builds (cached in the
// test cache), a busybox template tree made into an ext4 image and copied for
// the sandbox, the agent reached over the virtio-serial channel, and (as root)
// a network: the namespace runtime's veth, address and nftables rules (a
// table of the test's own) with a tap into the VM. Then the accelerator probe, which
// on a host whose KVM cannot boot a stock kernel (this one: PVM) must fall back to TCG.

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "guest/client.hpp"
#include "schema/unique_fd.hpp"
#include "tests/microvm/microvm_test_support.hpp"
#include "tests/support/environment.hpp"
#include "tests/support/host.hpp"
#include "worker/command/command.hpp"
#include "worker/microvm/accel_probe.hpp"
#include "worker/microvm/disk_image.hpp"
#include "worker/microvm/microvm_runtime.hpp"
#include "worker/microvm/vm.hpp"
#include "worker/microvm/vm_network.hpp"
#include "worker/rootfs/rootfs_driver.hpp"
#include "worker/rootfs/templates.hpp"

namespace airlock::worker::microvm {
namespace {

namespace fs = std::filesystem;

class microvm_boot : public ::testing::Test {
protected:
  /// The one VM: created through microvm_runtime from a template image.
  struct shared {
    test::temp_dir dir{"airlock-microvm"};
    guest_image guest;
    std::string run_dir;
    std::unique_ptr<microvm_runtime> runtime;
    sandbox_handle handle;
    /// Stand-ins for the egress proxy's ports (as root, with network).
    tcp_listener proxy;
    tcp_listener dns;
    bool network = false;
    std::unique_ptr<guest::guest_client> client;
    guest::hello hello;
    std::string failure;
    int64_t create_ms = 0;
    int64_t agent_ready_ms = 0;
  };
  static inline shared* vm_ = nullptr;
  static inline std::string skip_;
  static constexpr const char* sandbox_id = "boot-test";

  static void SetUpTestSuite() {
    skip_ = skip_reason();
    if (!skip_.empty())
      return;
    vm_ = new shared();
    vm_->failure = boot();
  }

  /// Builds the guest and the template image and boots the VM; the failure, or "".
  static std::string boot() {
    auto setup = prepare_test_vm(vm_->dir.path());
    if (!setup)
      return setup.error().message;
    vm_->guest = guest_image_in(setup->guest_dir);
    vm_->run_dir = setup->options.run_dir;
    microvm_runtime_options options = setup->options;
    // The network needs root (ip, nft, a tap); without it the VM has none.
    vm_->network = test::running_as_root();
    if (vm_->network) {
      vm_->proxy = listen_tcp();
      vm_->dns = listen_tcp();
      if (!vm_->proxy.fd || !vm_->dns.fd)
        return "cannot listen on TCP";
      options.net = test_net_options(vm_->proxy.port, vm_->dns.port);
      options.address_pool = test_address_pool;
    }
    vm_->runtime = std::make_unique<microvm_runtime>(options);
    auto [ours, theirs] = channel_pair();
    if (!ours)
      return "socketpair failed";
    sandbox_launch_spec spec;
    spec.id = sandbox_id;
    spec.rootfs_path = setup->image;
    spec.channel_fd = theirs.get();
    spec.network.enabled = vm_->network;
    spec.limits.memory_mb = 256;
    const auto start = std::chrono::steady_clock::now();
    auto handle = vm_->runtime->create(spec);
    if (!handle)
      return handle.error().message;
    vm_->create_ms = since_ms(start);
    vm_->handle = *handle;
    theirs.reset(); // QEMU holds its own copy
    vm_->client = std::make_unique<guest::guest_client>(std::move(ours));
    auto hello = vm_->client->handshake(agent_ready_timeout_ms);
    if (!hello)
      return "the agent did not answer: " + hello.error().message
             + "; console: " + test::read_file(vm_->run_dir + "/" + sandbox_id + ".console.log");
    vm_->hello = *hello;
    vm_->agent_ready_ms = since_ms(start);
    return "";
  }

  static void TearDownTestSuite() {
    if (vm_ != nullptr) {
      vm_->runtime.reset();
      // The test's cgroup parents, empty now (a worker keeps its own).
      std::error_code ec;
      for (const auto& path : vm_->handle.cgroup_paths)
        fs::remove(fs::path(path).parent_path(), ec);
      if (vm_->network) // the test's own table
        (void)run_command({"/usr/sbin/nft", "delete", "table", "inet", "airlock_vmtest"});
    }
    delete vm_;
    vm_ = nullptr;
  }

  static int64_t since_ms(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now()
                                                                 - start)
      .count();
  }

  void SetUp() override {
    if (!skip_.empty())
      GTEST_SKIP() << skip_;
    ASSERT_TRUE(vm_->failure.empty()) << vm_->failure;
    ASSERT_EQ(vm_->runtime->list().size(), 1u) << "the VM was destroyed by an earlier test";
  }

  /// Runs `line` with /bin/sh in the guest.
  guest::run_result run(const std::string& line) {
    guest::start_request request;
    request.process.cmd = line;
    request.process.env = {{"PATH", "/bin"}};
    auto ran = vm_->client->run(request, "", command_timeout_ms);
    EXPECT_TRUE(ran) << ran.error().message;
    return ran ? *ran : guest::run_result{};
  }
};

TEST_F(microvm_boot, agent_answers_as_pid_1_over_the_virtio_serial_channel) {
  EXPECT_EQ(vm_->hello.pid, 1);
  EXPECT_GT(vm_->hello.protocol_version, 0);
  auto rtt = vm_->client->ping(command_timeout_ms);
  ASSERT_TRUE(rtt) << rtt.error().message;
  RecordProperty("create_ms", std::to_string(vm_->create_ms));
  RecordProperty("agent_ready_ms", std::to_string(vm_->agent_ready_ms));
  std::printf("microvm: create returned %lld ms, agent ready %lld ms after create began (TCG)\n",
              static_cast<long long>(vm_->create_ms), static_cast<long long>(vm_->agent_ready_ms));
}

TEST_F(microvm_boot, uname_r_is_the_guest_kernels_release_not_the_hosts) {
  utsname host{};
  ASSERT_EQ(::uname(&host), 0);
  auto ran = run("uname -r");
  EXPECT_EQ(ran.exit_code, 0) << ran.err;
  EXPECT_EQ(trimmed(ran.out), vm_->guest.release);
  EXPECT_NE(trimmed(ran.out), std::string(host.release));
}

TEST_F(microvm_boot, root_is_the_template_image_on_the_virtio_disk) {
  auto marker = run("cat /etc/airlock-template");
  EXPECT_EQ(marker.exit_code, 0) << marker.err;
  EXPECT_EQ(marker.out, template_marker);
  auto mounts = run("cat /proc/mounts");
  EXPECT_NE(mounts.out.find("/dev/vda / ext4"), std::string::npos) << mounts.out;
}

TEST_F(microvm_boot, pause_and_resume_stop_and_continue_the_guest) {
  ASSERT_TRUE(vm_->runtime->pause(sandbox_id).is_ok());
  auto paused = vm_->runtime->stats(sandbox_id);
  ASSERT_TRUE(paused) << paused.error().message;
  EXPECT_TRUE(paused->frozen);
  EXPECT_GT(paused->memory_bytes, 0u);
  // A paused guest does not answer.
  EXPECT_FALSE(vm_->client->ping(300));
  ASSERT_TRUE(vm_->runtime->resume(sandbox_id).is_ok());
  auto echoed = run("echo resumed");
  EXPECT_EQ(echoed.out, "resumed\n");
  auto running = vm_->runtime->stats(sandbox_id);
  ASSERT_TRUE(running);
  EXPECT_FALSE(running->frozen);
}

TEST_F(microvm_boot, create_refuses_what_is_not_built_yet_and_a_known_id) {
  sandbox_launch_spec spec;
  spec.id = sandbox_id;
  spec.channel_fd = 0;
  spec.network.enabled = false;
  EXPECT_EQ(vm_->runtime->create(spec).code(), errc::already_exists);
  // Memory and vCPUs are fixed at boot; the CPU limit is set in place.
  EXPECT_EQ(vm_->runtime->set_limits(sandbox_id, 1000, 512).code, errc::invalid_argument);
  EXPECT_EQ(vm_->runtime->set_limits(sandbox_id, 2000, 256).code, errc::invalid_argument);
  EXPECT_EQ(vm_->runtime->set_limits(sandbox_id, 0, 256).code, errc::invalid_argument);
  EXPECT_TRUE(vm_->runtime->set_limits(sandbox_id, 500, 256).is_ok());
  EXPECT_TRUE(vm_->runtime->set_limits(sandbox_id, 1000, 256).is_ok());
  // Without an address pool there is no network to give.
  microvm_runtime_options no_pool;
  no_pool.run_dir = vm_->run_dir;
  no_pool.guest_dir = fs::path(vm_->guest.kernel_path).parent_path().string();
  no_pool.use_cgroups = false;
  microvm_runtime without_network(no_pool);
  spec.id = "another";
  spec.network.enabled = true;
  auto refused = without_network.create(spec);
  EXPECT_EQ(refused.code(), errc::unavailable);
  EXPECT_TRUE(without_network.list().empty());
}

// The guest's side: the agent configured eth0 from airlock.net= on the
// kernel command line.
TEST_F(microvm_boot, the_guest_has_the_sandbox_address_its_own_mac_and_a_route_via_the_host) {
  if (!vm_->network)
    GTEST_SKIP() << "needs root: the VM's network (ip, nft, a tap)";
  const sandbox_handle& h = vm_->handle;
  ASSERT_FALSE(h.sandbox_address.empty());
  EXPECT_EQ(h.sandbox_interface, "eth0");
  EXPECT_EQ(h.prefix_length, 30u);
  auto addresses = run("ip -4 addr show dev eth0");
  EXPECT_NE(addresses.out.find("inet " + h.sandbox_address + "/30"), std::string::npos)
    << addresses.out << addresses.err;
  EXPECT_NE(addresses.out.find("UP"), std::string::npos) << addresses.out;
  auto route = run("ip route");
  EXPECT_NE(route.out.find("default via " + h.host_address + " dev eth0"), std::string::npos)
    << route.out << route.err;
  auto mac = run("cat /sys/class/net/eth0/address");
  EXPECT_EQ(trimmed(mac.out), vm_mac_address(sandbox_id));
  // IPv6 is off, as in a namespace sandbox (the firewall drops it anyway).
  auto ipv6 = run("cat /proc/sys/net/ipv6/conf/eth0/disable_ipv6");
  EXPECT_EQ(trimmed(ipv6.out), "1");
}

// The host's side is the namespace runtime's: the veth's host end holds the
// host address, the sandbox is in the firewall's sets, and QEMU itself stays
// in an empty namespace of its own with only the tap's descriptor.
TEST_F(microvm_boot, the_host_side_is_a_veth_in_the_firewall_and_qemu_holds_only_the_tap) {
  if (!vm_->network)
    GTEST_SKIP() << "needs root: the VM's network (ip, nft, a tap)";
  const sandbox_handle& h = vm_->handle;
  EXPECT_EQ(h.host_interface, host_interface_name("am", sandbox_id));
  EXPECT_TRUE(interface_exists(h.host_interface));
  auto listed = firewall_has(test_net_options(0, 0), h.host_interface);
  ASSERT_TRUE(listed) << listed.error().message;
  EXPECT_TRUE(*listed);
  struct stat sandbox_ns {};
  struct stat qemu_ns {};
  ASSERT_EQ(::stat(h.netns_path.c_str(), &sandbox_ns), 0) << h.netns_path;
  ASSERT_EQ(::stat(("/proc/" + std::to_string(h.init_pid) + "/ns/net").c_str(), &qemu_ns), 0);
  EXPECT_NE(sandbox_ns.st_ino, qemu_ns.st_ino);
  command_options in_sandbox_ns;
  unique_fd netns(::open(h.netns_path.c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(netns);
  in_sandbox_ns.netns_fd = netns.get();
  auto links = run_command({"/sbin/ip", "-o", "link"}, in_sandbox_ns);
  ASSERT_TRUE(links) << links.error().message;
  for (const char* name : {"tap0", "veth0", "br0"})
    EXPECT_NE(links->output.find(std::string(name)), std::string::npos) << links->output;
  for (const char* port : {"tap0", "veth0"}) {
    auto line = links->output.substr(links->output.find(std::string(port)));
    line = line.substr(0, line.find('\n'));
    EXPECT_NE(line.find(",UP,"), std::string::npos) << line;
    EXPECT_NE(line.find(" master br0 "), std::string::npos) << line;
  }
}

// Only through the rules: a TCP connection to any port of the host address
// is redirected to the egress proxy's port (here the test's listener), never
// reaches the port it named; ICMP and other UDP are dropped.
TEST_F(microvm_boot, the_guest_reaches_the_host_only_through_the_egress_redirect) {
  if (!vm_->network)
    GTEST_SKIP() << "needs root: the VM's network (ip, nft, a tap)";
  const sandbox_handle& h = vm_->handle;
  tcp_listener elsewhere = listen_tcp();
  ASSERT_TRUE(elsewhere.fd);
  // The proxy's stand-in takes one connection, reads a line and closes it,
  // which ends nc in the guest.
  std::string peer_address;
  std::string received;
  std::thread proxy([&] {
    pollfd ready{vm_->proxy.fd.get(), POLLIN, 0};
    if (::poll(&ready, 1, command_timeout_ms) != 1)
      return;
    sockaddr_in peer{};
    socklen_t length = sizeof peer;
    unique_fd accepted(
      ::accept4(vm_->proxy.fd.get(), reinterpret_cast<sockaddr*>(&peer), &length, SOCK_CLOEXEC));
    if (!accepted)
      return;
    char text[INET_ADDRSTRLEN] = {};
    ::inet_ntop(AF_INET, &peer.sin_addr, text, sizeof text);
    peer_address = text;
    timeval wait{5, 0};
    ::setsockopt(accepted.get(), SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof wait);
    char buffer[64];
    ssize_t n = 0;
    while (received.find('\n') == std::string::npos
           && (n = ::recv(accepted.get(), buffer, sizeof buffer, 0)) > 0)
      received.append(buffer, static_cast<size_t>(n));
  });
  auto sent =
    run("echo through-the-rules | nc " + h.host_address + " " + std::to_string(elsewhere.port));
  proxy.join();
  EXPECT_EQ(peer_address, h.sandbox_address)
    << "nothing arrived on the egress port: " << sent.out << sent.err;
  EXPECT_EQ(received, "through-the-rules\n");
  EXPECT_EQ(::accept4(elsewhere.fd.get(), nullptr, nullptr, SOCK_CLOEXEC), -1)
    << "the port the guest named was reached directly";
  EXPECT_NE(run("ping -c 1 -W 1 " + h.host_address).exit_code, 0);
}

TEST_F(microvm_boot, qemu_runs_jailed) {
  const pid_t pid = vm_->handle.init_pid;
  EXPECT_EQ(trimmed(proc_status(pid, "NoNewPrivs:")), "1");
  EXPECT_EQ(trimmed(proc_status(pid, "Seccomp:")), "2"); // QEMU's own filter
  if (!test::running_as_root())
    GTEST_SKIP() << "needs root: the uid drop and namespaces";
  const std::string uid = std::to_string(vmm_test_uid);
  EXPECT_EQ(proc_status(pid, "Uid:"), uid + "\t" + uid + "\t" + uid + "\t" + uid);
  // In its own cgroup, bounded.
  ASSERT_FALSE(vm_->handle.cgroup_paths.empty());
  const std::string procs = test::read_file(vm_->handle.cgroup_paths[0] + "/cgroup.procs");
  EXPECT_NE(procs.find(std::to_string(pid) + "\n"), std::string::npos) << procs;
  auto stats = vm_->runtime->stats(sandbox_id);
  ASSERT_TRUE(stats) << stats.error().message;
  EXPECT_GT(stats->memory_bytes, 0u);
  EXPECT_GT(stats->pids_current, 1u); // QEMU's threads
  const std::string proc = "/proc/" + std::to_string(pid);
  for (const char* ns : {"net", "ipc", "uts", "pid", "mnt"})
    EXPECT_NE(fs::read_symlink(proc + "/ns/" + ns),
              fs::read_symlink(std::string("/proc/self/ns/") + ns))
      << ns;
  // pid 1 of a pid namespace of its own: NSpid lists the host's pid, then 1.
  EXPECT_EQ(proc_status(pid, "NSpid:"), std::to_string(pid) + "\t1");
  // Its root is the jail: /usr and the VM's own files, nothing else of the host.
  const fs::path root = proc + "/root";
  EXPECT_TRUE(fs::exists(root / "usr/bin"));
  EXPECT_TRUE(fs::exists(root / "dev/urandom"));
  EXPECT_FALSE(fs::exists(root / "home"));
  EXPECT_FALSE(fs::exists(root / "etc/passwd"));
  EXPECT_FALSE(fs::exists(root / "root"));
  const fs::path disk = fs::path(vm_->run_dir) / (std::string(sandbox_id) + ".ext4");
  EXPECT_TRUE(fs::exists(root / disk.relative_path())) << disk;
  size_t beside_disk = 0;
  for ([[maybe_unused]] const auto& entry :
       fs::directory_iterator(root / disk.parent_path().relative_path()))
    ++beside_disk;
  EXPECT_LE(beside_disk, 3u) << "the run directory shows this VM's disk, console and RAM file only";
  // Only QEMU's processes: its /proc lists pid 1 and no other process.
  size_t processes = 0;
  for (const auto& entry : fs::directory_iterator(root / "proc"))
    if (std::isdigit(static_cast<unsigned char>(entry.path().filename().string()[0])))
      ++processes;
  EXPECT_EQ(processes, 1u);
}

TEST_F(microvm_boot, a_tree_as_root_gets_its_own_image_and_destroy_removes_it) {
  const fs::path tree = fs::path(vm_->dir.path()) / "plain-tree";
  make_template_tree(tree);
  auto [ours, theirs] = channel_pair();
  ASSERT_TRUE(ours);
  sandbox_launch_spec spec;
  spec.id = "from-tree";
  spec.rootfs_path = tree.string();
  spec.channel_fd = theirs.get();
  spec.network.enabled = false;
  auto handle = vm_->runtime->create(spec);
  ASSERT_TRUE(handle) << handle.error().message;
  EXPECT_TRUE(fs::exists(vm_->run_dir + "/from-tree.ext4"));
  EXPECT_EQ(vm_->runtime->list().size(), 2u);
  ASSERT_TRUE(vm_->runtime->destroy("from-tree").is_ok());
  EXPECT_EQ(::kill(handle->init_pid, 0), -1);
  EXPECT_FALSE(fs::exists(vm_->run_dir + "/from-tree.ext4"));
  EXPECT_FALSE(fs::exists(vm_->run_dir + "/from-tree.qmp"));
}

// Last in this suite: it destroys the shared VM.
TEST_F(microvm_boot, destroy_leaves_no_process_socket_or_disk) {
  const pid_t pid = vm_->handle.init_pid;
  ASSERT_GT(pid, 0);
  ASSERT_FALSE(fs::is_empty(vm_->run_dir));
  vm_->client.reset();
  auto destroyed = vm_->runtime->destroy(sandbox_id);
  EXPECT_TRUE(destroyed.is_ok()) << destroyed.message;
  EXPECT_EQ(::kill(pid, 0), -1);
  EXPECT_EQ(errno, ESRCH);
  EXPECT_TRUE(fs::is_empty(vm_->run_dir)) << "left in " << vm_->run_dir;
  for (const auto& path : vm_->handle.cgroup_paths)
    EXPECT_FALSE(fs::exists(path)) << path;
  EXPECT_TRUE(vm_->runtime->list().empty());
  if (vm_->network) {
    const sandbox_handle& h = vm_->handle;
    EXPECT_FALSE(interface_exists(h.host_interface)) << h.host_interface;
    EXPECT_FALSE(fs::exists(h.netns_path)) << h.netns_path;
    auto listed = firewall_has(test_net_options(0, 0), h.host_interface);
    ASSERT_TRUE(listed) << listed.error().message;
    EXPECT_FALSE(*listed) << "nft element for " << h.host_interface;
  }
  EXPECT_TRUE(vm_->runtime->destroy(sandbox_id).is_ok()); // idempotent
}

// Memory snapshots: one more VM (256 MiB) booted for the suite, suspended and
// restored as itself, then a checkpoint of it as the base of two clones.
TEST(microvm_disk, a_templates_image_is_made_once_per_version_and_replaced_when_it_is_rebuilt) {
  if (auto why = skip_reason(); !why.empty())
    GTEST_SKIP() << why;
  test::temp_dir dir("airlock-microvm-disk");
  const std::string images = dir.path() + "/images";
  auto driver = make_template(dir.path() + "/data", "tiny", "first build");
  ASSERT_TRUE(driver) << driver.error().message;
  auto first = template_disk_of(**driver, "tiny", images);
  ASSERT_TRUE(first) << first.error().message;
  const auto made_at = fs::last_write_time(*first);
  auto again = template_disk_of(**driver, "tiny", images);
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(*again, *first);
  EXPECT_EQ(fs::last_write_time(*again), made_at);
  // Rebuilt under the same name (a new manifest): a new image, the old one gone.
  auto rebuilt = make_template(dir.path() + "/data", "tiny", "second build");
  ASSERT_TRUE(rebuilt) << rebuilt.error().message;
  auto second = template_disk_of(**rebuilt, "tiny", images);
  ASSERT_TRUE(second) << second.error().message;
  EXPECT_NE(*second, *first);
  EXPECT_FALSE(fs::exists(*first));
  // A sandbox's copy is its own file.
  const std::string copy = dir.path() + "/sandbox.ext4";
  ASSERT_TRUE(sandbox_disk(*second, copy).is_ok());
  EXPECT_EQ(fs::file_size(copy), fs::file_size(*second));
  EXPECT_EQ(sandbox_disk(*second, copy).code, errc::already_exists);
  EXPECT_EQ(template_disk_of(**rebuilt, "missing", images).code(), errc::not_found);
}

TEST(microvm_guest_build, is_cached_by_its_inputs_and_rebuilt_when_one_changes) {
  if (auto why = skip_reason(); !why.empty())
    GTEST_SKIP() << why;
  auto first = build_guest();
  ASSERT_TRUE(first) << first.error().message;
  auto again = build_guest();
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(*again, *first);
  // Another agent (one more byte at its end) is another input: a new guest,
  // sharing the kernel extracted once for the package.
  test::temp_dir scratch("airlock-microvm-agent");
  const std::string agent = scratch.path() + "/airlock-guest";
  fs::copy_file(AIRLOCK_GUEST_BINARY, agent);
  std::ofstream(agent, std::ios::app) << '\n';
  auto changed = build_guest(agent);
  ASSERT_TRUE(changed) << changed.error().message;
  EXPECT_NE(*changed, *first);
  EXPECT_TRUE(fs::exists(*changed + "/initramfs.cpio"));
  EXPECT_TRUE(fs::equivalent(*changed + "/vmlinux", *first + "/vmlinux"));
  fs::remove_all(*changed);
}

TEST(microvm_accel, probe_falls_back_to_tcg_when_kvm_cannot_boot_the_guest_and_says_so) {
  if (auto why = skip_reason(); !why.empty())
    GTEST_SKIP() << why;
  auto dir = build_guest();
  ASSERT_TRUE(dir) << dir.error().message;
  test::temp_dir run_dir("airlock-microvm-probe");
  std::vector<std::string> lines;
  accel_options options;
  options.kvm_probe_timeout_ms = 5'000;
  // QEMU keeps the caller's uid here: this host's /dev/kvm is root's alone
  // (0600), and the probe must reach the guest's boot to show what KVM does.
  vm_options vmm = jailed_vm_options();
  vmm.vmm_uid = vmm.vmm_gid = 0;
  auto choice = choose_accelerator(guest_image_in(*dir), run_dir.path(), options, vmm,
                                   [&lines](std::string_view line) { lines.emplace_back(line); });
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], choice.reason);
  std::printf("%s\n", choice.reason.c_str());
  RecordProperty("accelerator", std::string(to_string(choice.accel)));
  EXPECT_TRUE(fs::is_empty(run_dir.path()));
  if (choice.accel == accelerator::kvm) {
    // A host with a KVM that boots stock kernels: nothing to fall back from.
    EXPECT_TRUE(choice.probed);
    GTEST_SKIP() << "KVM boots the guest on this host: " << choice.reason;
  }
  EXPECT_NE(choice.reason.find("using TCG"), std::string::npos);
  if (::access("/dev/kvm", R_OK | W_OK) == 0) {
    EXPECT_TRUE(choice.probed) << "an openable /dev/kvm must be probed, not trusted";
  }
}

TEST(microvm_accel, a_missing_kvm_device_means_tcg_without_a_probe) {
  accel_options options;
  options.kvm_device = "/nonexistent/kvm";
  std::vector<std::string> lines;
  auto choice = choose_accelerator({}, "/nonexistent", options, {},
                                   [&lines](std::string_view line) { lines.emplace_back(line); });
  EXPECT_EQ(choice.accel, accelerator::tcg);
  EXPECT_FALSE(choice.probed);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("using TCG"), std::string::npos);
}

} // namespace
} // namespace airlock::worker::microvm
