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

constexpr int agent_ready_timeout_ms = 120'000; // TCG on a busy 2-core host
constexpr int command_timeout_ms = 30'000;
constexpr uint32_t vmm_test_uid = 65534; // nobody
constexpr const char* template_marker = "airlock microvm test template\n";

/// Why the VM cannot be booted here ("" when it can).
std::string skip_reason() {
  for (const char* tool : {"qemu-system-x86_64", "mkfs.ext4", "busybox", "objcopy", "xz"})
    if (find_program(tool, default_command_path).empty())
      return std::string("needs ") + tool;
  if (!fs::exists(vm_options{}.firmware))
    return "needs " + vm_options{}.firmware + " (qemu-system-data)";
  return "";
}

fs::path cache_dir() {
  const char* env = std::getenv("AIRLOCK_TEST_CACHE");
  return fs::path(env != nullptr && *env != '\0' ? env : "/var/tmp/airlock-test-cache") / "microvm";
}

/// The guest, built (or found) by the project's script. Fails the caller
/// with the script's output.
result<std::string> build_guest(const std::string& agent = AIRLOCK_GUEST_BINARY) {
  command_options run;
  run.timeout_ms = 600'000;
  auto ran = run_command({"bash", std::string(AIRLOCK_SOURCE_DIR) + "/scripts/microvm-guest",
                          "--agent", agent, "--cache", cache_dir().string()},
                         run);
  if (!ran)
    return ran.error();
  if (!ran->succeeded())
    return make_status(errc::io_error, "scripts/microvm-guest failed: " + ran->output);
  std::string out = ran->output;
  while (!out.empty() && out.back() == '\n')
    out.pop_back();
  return out.substr(out.rfind('\n') == std::string::npos ? 0 : out.rfind('\n') + 1);
}

/// A template tree: static busybox, a few applet links and a marker file.
void make_template_tree(const fs::path& root) {
  for (const char* sub : {"bin", "etc", "proc", "sys", "dev", "run", "tmp", "root"})
    fs::create_directories(root / sub);
  fs::copy_file(find_program("busybox", default_command_path), root / "bin" / "busybox");
  for (const char* applet : {"sh", "uname", "cat", "echo", "ls", "ps", "ip", "nc", "ping"})
    fs::create_symlink("busybox", root / "bin" / applet);
  std::ofstream(root / "etc" / "airlock-template") << template_marker;
  std::ofstream(root / "etc" / "passwd") << "root:x:0:0:root:/root:/bin/sh\n";
}

/// A sealed template `name` in an overlay rootfs driver under `data_dir`,
/// with a manifest whose source is `source` (what a template build writes).
result<std::unique_ptr<rootfs_driver>>
make_template(const std::string& data_dir, const std::string& name, const std::string& source) {
  rootfs_options options;
  options.data_dir = data_dir;
  options.kind = rootfs_kind::overlay;
  auto driver = make_rootfs_driver(options);
  if (!driver)
    return driver.error();
  if ((*driver)->has_template(name))
    if (auto deleted = (*driver)->delete_template(name); !deleted.is_ok())
      return deleted;
  auto staging = (*driver)->create_template(name);
  if (!staging)
    return staging.error();
  make_template_tree(*staging);
  if (auto sealed = (*driver)->seal_template(name); !sealed.is_ok())
    return sealed;
  template_manifest manifest;
  manifest.name = name;
  manifest.source = source;
  test::write_file(manifest_path((*driver)->templates_dir(), name).string(),
                   manifest_to_json(manifest));
  return driver;
}

/// A TCP listener on every host address at an ephemeral port.
struct tcp_listener {
  unique_fd fd;
  uint16_t port = 0;
};

tcp_listener listen_tcp() {
  tcp_listener l;
  l.fd.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  socklen_t length = sizeof address;
  if (!l.fd || ::bind(l.fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) != 0
      || ::listen(l.fd.get(), 8) != 0
      || ::getsockname(l.fd.get(), reinterpret_cast<sockaddr*>(&address), &length) != 0)
    return {};
  l.port = ntohs(address.sin_port);
  return l;
}

/// The VM's network in a table, interface prefix and pool of the test's own:
/// every TCP connection is redirected to `proxy_port` (standing in for the
/// egress proxy) and DNS to `dns_port`.
net_options test_net_options(uint16_t proxy_port, uint16_t dns_port) {
  net_options net;
  net.nft_table = "airlock_vmtest";
  net.interface_prefix = "am";
  net.egress_proxy_port = proxy_port;
  net.egress_dns_port = dns_port;
  return net;
}
constexpr const char* test_address_pool = "10.208.0.0/24";

/// The jail as far as this host allows: as root, QEMU runs as `nobody` in
/// its own namespaces; otherwise as the caller, without new namespaces.
vm_options jailed_vm_options() {
  vm_options options;
  options.unshare = test::running_as_root();
  if (test::running_as_root())
    options.vmm_uid = options.vmm_gid = vmm_test_uid;
  return options;
}

/// The value of `key` ("Uid:") in /proc/<pid>/status, without the blanks after the key.
std::string proc_status(pid_t pid, const std::string& key) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key, 0) == 0)
      return line.substr(line.find_first_not_of(" \t", key.size()));
  return "";
}

std::string trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
    text.pop_back();
  return text;
}

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
    auto dir = build_guest();
    if (!dir)
      return dir.error().message;
    vm_->guest = guest_image_in(*dir);
    const fs::path base = vm_->dir.path();
    vm_->run_dir = (base / "run").string();
    fs::create_directories(vm_->run_dir);
    auto driver = make_template((base / "data").string(), "busybox_v1", "v1");
    if (!driver)
      return driver.error().message;
    auto image = template_disk_of(**driver, "busybox_v1", (base / "images").string());
    if (!image)
      return image.error().message;
    microvm_runtime_options options;
    options.run_dir = vm_->run_dir;
    options.guest_dir = *dir;
    options.vm = jailed_vm_options();
    options.use_cgroups = test::running_as_root();
    options.cgroups.parent = "airlock-microvm-test";
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
    // The VMM's uid must reach its disk in the run directory.
    fs::permissions(base, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
    vm_->runtime = std::make_unique<microvm_runtime>(options);
    int pair[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0)
      return "socketpair failed";
    unique_fd ours(pair[0]);
    unique_fd theirs(pair[1]);
    sandbox_launch_spec spec;
    spec.id = sandbox_id;
    spec.rootfs_path = *image;
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
  EXPECT_EQ(vm_->runtime->set_limits(sandbox_id, 1000, 512).code, errc::unimplemented);
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
  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
  unique_fd ours(pair[0]);
  unique_fd theirs(pair[1]);
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
class microvm_snapshot : public ::testing::Test {
protected:
  struct shared {
    test::temp_dir dir{"airlock-microvm-snap"};
    std::string image;
    std::string run_dir;
    std::unique_ptr<microvm_runtime> runtime;
    std::unique_ptr<guest::guest_client> client;
    std::string failure;
    microvm_runtime_options options; ///< the runtime's, for another one
  };
  static inline shared* vm_ = nullptr;
  static inline std::string skip_;
  static constexpr const char* base_id = "snap-base";

  static void SetUpTestSuite() {
    skip_ = skip_reason();
    if (!skip_.empty())
      return;
    vm_ = new shared();
    vm_->failure = boot();
  }

  static std::string boot() {
    auto dir = build_guest();
    if (!dir)
      return dir.error().message;
    const fs::path base = vm_->dir.path();
    vm_->run_dir = (base / "run").string();
    fs::create_directories(vm_->run_dir);
    auto driver = make_template((base / "data").string(), "busybox_v1", "v1");
    if (!driver)
      return driver.error().message;
    auto image = template_disk_of(**driver, "busybox_v1", (base / "images").string());
    if (!image)
      return image.error().message;
    vm_->image = *image;
    microvm_runtime_options options;
    options.run_dir = vm_->run_dir;
    options.guest_dir = *dir;
    options.vm = jailed_vm_options();
    options.use_cgroups = test::running_as_root();
    options.cgroups.parent = "airlock-microvm-test";
    fs::permissions(base, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
    vm_->options = options;
    vm_->runtime = std::make_unique<microvm_runtime>(options);
    sandbox_launch_spec spec = launch_spec(base_id);
    spec.rootfs_path = *image;
    auto [ours, theirs] = channel_pair();
    spec.channel_fd = theirs.get();
    auto handle = vm_->runtime->create(spec);
    if (!handle)
      return handle.error().message;
    vm_->client = std::make_unique<guest::guest_client>(std::move(ours));
    auto hello = vm_->client->handshake(agent_ready_timeout_ms);
    if (!hello)
      return "the agent did not answer: " + hello.error().message;
    return "";
  }

  static void TearDownTestSuite() {
    if (vm_ != nullptr)
      vm_->runtime.reset();
    delete vm_;
    vm_ = nullptr;
  }

  static sandbox_launch_spec launch_spec(const std::string& id) {
    sandbox_launch_spec spec;
    spec.id = id;
    spec.network.enabled = false;
    spec.limits.memory_mb = 256;
    return spec;
  }

  static std::pair<unique_fd, unique_fd> channel_pair() {
    int pair[2] = {-1, -1};
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0)
      return {};
    return {unique_fd(pair[0]), unique_fd(pair[1])};
  }

  void SetUp() override {
    if (!skip_.empty())
      GTEST_SKIP() << skip_;
    ASSERT_TRUE(vm_->failure.empty()) << vm_->failure;
  }

  static int64_t host_realtime_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
  }

  /// Restores `id` from `dir` on a new channel and refreshes its guest;
  /// the client, or a failed assertion.
  static std::unique_ptr<guest::guest_client> restore(const std::string& id, const std::string& dir,
                                                      restore_mode mode, int64_t* ready_ms,
                                                      guest::refreshed* refreshed_out = nullptr) {
    auto [ours, theirs] = channel_pair();
    auto spec = launch_spec(id);
    spec.channel_fd = theirs.get();
    const auto start = std::chrono::steady_clock::now();
    auto handle = vm_->runtime->restore(spec, dir, mode);
    EXPECT_TRUE(handle) << handle.error().message;
    if (!handle)
      return nullptr;
    auto client = std::make_unique<guest::guest_client>(std::move(ours));
    std::string entropy(64, '\0');
    std::ifstream("/dev/urandom", std::ios::binary).read(entropy.data(), 64);
    auto refreshed = client->refresh(entropy, host_realtime_ns(), id, command_timeout_ms);
    EXPECT_TRUE(refreshed) << refreshed.error().message << "; console: "
                           << test::read_file(vm_->run_dir + "/" + id + ".console.log");
    if (!refreshed)
      return nullptr;
    if (ready_ms != nullptr)
      *ready_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::steady_clock::now() - start)
                    .count();
    if (refreshed_out != nullptr)
      *refreshed_out = *refreshed;
    return client;
  }

  static guest::run_result run(guest::guest_client& client, const std::string& line) {
    guest::start_request request;
    request.process.cmd = line;
    request.process.env = {{"PATH", "/bin"}};
    auto ran = client.run(request, "", command_timeout_ms);
    EXPECT_TRUE(ran) << ran.error().message;
    return ran ? *ran : guest::run_result{};
  }

  /// The counter file's value (-1 when unreadable).
  static long counter(guest::guest_client& client) {
    auto text = client.read_file("/tmp/c", command_timeout_ms);
    return text && !text->empty() ? std::strtol(text->c_str(), nullptr, 10) : -1;
  }
};

TEST_F(microvm_snapshot, a_suspended_vm_restored_goes_on_counting_in_the_same_process) {
  for (const char* applet : {"sleep", "head", "od", "date", "hostname", "kill"})
    run(*vm_->client, std::string("ln -sf busybox /bin/") + applet);
  auto started = run(*vm_->client, "sh -c 'i=0; while :; do i=$((i+1)); echo $i > /tmp/c; "
                                   "sleep 0.1; done' </dev/null >/dev/null 2>&1 & echo $!");
  ASSERT_EQ(started.exit_code, 0) << started.err;
  const std::string pid = trimmed(started.out);
  ASSERT_FALSE(pid.empty());
  // Let it count a while, so that "from where it was" cannot be a restart.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  long before = -1;
  while ((before = counter(*vm_->client)) < 15 && std::chrono::steady_clock::now() < deadline) {
  }
  ASSERT_GE(before, 15);
  const pid_t qemu_pid = vm_->runtime->list().at(0).init_pid;
  const std::string dir = vm_->dir.path() + "/suspended";
  auto info = vm_->runtime->snapshot(base_id, dir, snapshot_mode::suspend);
  ASSERT_TRUE(info) << info.error().message;
  EXPECT_TRUE(vm_->runtime->list().empty());
  EXPECT_EQ(::kill(qemu_pid, 0), -1); // QEMU is gone
  EXPECT_FALSE(fs::exists(vm_->run_dir + "/" + base_id + ".ram"));
  for (const char* name : {"snapshot.json", "state", "memory", "disk.ext4"})
    EXPECT_TRUE(fs::exists(dir + "/" + name)) << name;
  EXPECT_EQ(info->record.memory_mb, 256u);
  EXPECT_GT(info->state_bytes, 0u);
  EXPECT_LT(info->state_bytes, 1u << 20); // device state only, no RAM
  EXPECT_GT(info->memory_bytes, 0u);
  EXPECT_LE(info->memory_bytes, 256u << 20);
  std::printf("microvm snapshot (256 MiB VM, suspend): save %lld ms, total %lld ms; on disk: "
              "state %llu KiB, memory %llu MiB, disk %llu MiB\n",
              static_cast<long long>(info->save_ms), static_cast<long long>(info->total_ms),
              static_cast<unsigned long long>(info->state_bytes >> 10),
              static_cast<unsigned long long>(info->memory_bytes >> 20),
              static_cast<unsigned long long>(info->disk_bytes >> 20));
  RecordProperty("suspend_ms", std::to_string(info->total_ms));
  RecordProperty("snapshot_memory_bytes", std::to_string(info->memory_bytes));

  int64_t ready_ms = 0;
  auto client = restore(base_id, dir, restore_mode::owned, &ready_ms);
  ASSERT_TRUE(client);
  std::printf("microvm restore (owned copy of the RAM file): ready %lld ms\n",
              static_cast<long long>(ready_ms));
  RecordProperty("restore_ms", std::to_string(ready_ms));
  const long after = counter(*client);
  // The same count, not a new loop from 1 (a few ticks pass while it saves
  // and restores in guest time: the guest's clock did not run meanwhile).
  EXPECT_GE(after, before);
  EXPECT_LE(after, before + 10);
  long later = after;
  const auto count_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while ((later = counter(*client)) < after + 3
         && std::chrono::steady_clock::now() < count_deadline) {
  }
  EXPECT_GE(later, after + 3) << "the loop does not go on counting";
  auto alive = run(*client, "kill -0 " + pid + " && cat /proc/" + pid + "/cmdline");
  EXPECT_EQ(alive.exit_code, 0) << "pid " << pid << " is gone: " << alive.err;
  EXPECT_NE(alive.out.find("while"), std::string::npos) << alive.out;
  vm_->client = std::move(client);
}

TEST_F(microvm_snapshot, clones_of_one_base_draw_different_random_bytes_and_take_the_hosts_clock) {
  ASSERT_EQ(vm_->runtime->list().size(), 1u) << "the base VM was not restored";
  const std::string dir = vm_->dir.path() + "/base";
  auto info = vm_->runtime->snapshot(base_id, dir, snapshot_mode::checkpoint);
  ASSERT_TRUE(info) << info.error().message;
  // A checkpoint leaves the VM running.
  EXPECT_EQ(trimmed(run(*vm_->client, "echo on").out), "on");
  std::string bytes[2];
  for (int i = 0; i < 2; ++i) {
    const std::string id = "clone-" + std::to_string(i);
    int64_t ready_ms = 0;
    guest::refreshed refreshed;
    auto client = restore(id, dir, restore_mode::clone, &ready_ms, &refreshed);
    ASSERT_TRUE(client);
    std::printf("microvm clone %d: ready %lld ms after restore began, clock stepped %lld ms\n", i,
                static_cast<long long>(ready_ms),
                static_cast<long long>(refreshed.clock_step_ns / 1'000'000));
    bytes[i] = run(*client, "head -c 32 /dev/urandom | od -An -tx1").out;
    EXPECT_GE(bytes[i].size(), 64u) << bytes[i];
    auto date = run(*client, "date +%s");
    const int64_t host_s = host_realtime_ns() / 1'000'000'000;
    const int64_t guest_s = std::strtoll(date.out.c_str(), nullptr, 10);
    EXPECT_LE(std::llabs(guest_s - host_s), 2) << "guest " << guest_s << " host " << host_s;
    EXPECT_EQ(trimmed(run(*client, "hostname").out), id);
    // The base's processes run on in each clone (the counter's loop too).
    EXPECT_GE(counter(*client), 1);
    EXPECT_EQ(vm_->runtime->snapshot(id, dir + "-of-clone", snapshot_mode::checkpoint).code(),
              errc::unimplemented);
    // Kept running while the next clone starts: both map the base's file.
    if (i == 1) {
      ASSERT_TRUE(vm_->runtime->destroy("clone-0").is_ok());
      ASSERT_TRUE(vm_->runtime->destroy("clone-1").is_ok());
    }
  }
  EXPECT_NE(bytes[0], bytes[1]);
  // The clones read the base's files; they are left as they were.
  EXPECT_TRUE(fs::exists(dir + "/memory"));
  EXPECT_EQ(fs::file_size(dir + "/memory"), 256u << 20);
}

TEST_F(microvm_snapshot, a_pooled_clone_is_handed_its_channel_when_it_is_claimed) {
  const std::string dir = vm_->dir.path() + "/base";
  ASSERT_TRUE(fs::exists(dir + "/snapshot.json"));
  auto pooled = vm_->runtime->prepare_clones(dir, 1);
  ASSERT_TRUE(pooled) << pooled.error().message;
  EXPECT_EQ(*pooled, 1u);
  int64_t ready_ms = 0;
  auto client = restore("clone-pooled", dir, restore_mode::clone, &ready_ms);
  ASSERT_TRUE(client);
  EXPECT_EQ(vm_->runtime->pooled_clones(dir), 0u);
  std::printf("microvm clone from the pool: ready %lld ms after restore began\n",
              static_cast<long long>(ready_ms));
  EXPECT_EQ(trimmed(run(*client, "hostname").out), "clone-pooled");
  EXPECT_GE(run(*client, "head -c 32 /dev/urandom | od -An -tx1").out.size(), 64u);
  auto stats = vm_->runtime->stats("clone-pooled");
  ASSERT_TRUE(stats) << stats.error().message;
  EXPECT_GT(stats->memory_bytes, 0u);
  ASSERT_TRUE(vm_->runtime->destroy("clone-pooled").is_ok());
  EXPECT_FALSE(fs::exists(vm_->run_dir + "/pool.1.ext4"));
}

TEST_F(microvm_snapshot, a_vm_left_by_a_crashed_run_is_ended_and_removed_by_the_next_adopt) {
  auto options = vm_->options;
  options.run_dir = vm_->dir.path() + "/crashed-run";
  fs::create_directories(options.run_dir);
  // The run that crashes: its runtime is never destroyed (as after kill -9).
  auto* crashed = new microvm_runtime(options);
  auto [ours, theirs] = channel_pair();
  auto spec = launch_spec("left-behind");
  spec.rootfs_path = vm_->image;
  spec.channel_fd = theirs.get();
  auto handle = crashed->create(spec);
  ASSERT_TRUE(handle) << handle.error().message;
  const pid_t qemu = handle->init_pid;
  ASSERT_TRUE(fs::exists(options.run_dir + "/left-behind.vm.json"));
  // The next run.
  microvm_runtime next(options);
  auto report = next.adopt();
  ASSERT_TRUE(report) << report.error().message;
  EXPECT_EQ(report->cleaned, std::vector<std::string>{"left-behind"});
  EXPECT_TRUE(report->adopted.empty()) << "a VM whose channel is gone is not taken over";
  EXPECT_TRUE(report->failures.empty());
  EXPECT_EQ(::waitpid(qemu, nullptr, WNOHANG), qemu) << "its QEMU still runs";
  size_t left = 0;
  for (const auto& entry : fs::directory_iterator(options.run_dir)) {
    ADD_FAILURE() << entry.path() << " is left";
    ++left;
  }
  EXPECT_EQ(left, 0u);
  for (const auto& path : handle->cgroup_paths)
    EXPECT_FALSE(fs::exists(path)) << path;
  auto again = next.adopt();
  ASSERT_TRUE(again);
  EXPECT_TRUE(again->cleaned.empty()) << "nothing twice";
}

TEST_F(microvm_snapshot, a_snapshot_from_another_host_is_refused_with_the_reason) {
  const std::string dir = vm_->dir.path() + "/base";
  ASSERT_TRUE(fs::exists(dir + "/snapshot.json"));
  const std::string moved = vm_->dir.path() + "/foreign";
  fs::create_directories(moved);
  auto record = read_vm_snapshot_record(dir);
  ASSERT_TRUE(record) << record.error().message;
  for (const char* name : {"state", "memory", "disk.ext4"})
    fs::create_symlink(dir + "/" + name, moved + "/" + name);
  auto foreign = *record;
  foreign.qemu_version = "9.9.9";
  ASSERT_TRUE(write_vm_snapshot_record(moved, foreign).is_ok());
  auto [ours, theirs] = channel_pair();
  auto spec = launch_spec("foreign");
  spec.channel_fd = theirs.get();
  auto refused = vm_->runtime->restore(spec, moved, restore_mode::clone);
  EXPECT_EQ(refused.code(), errc::wrong_state);
  EXPECT_NE(refused.error().message.find("QEMU '9.9.9'"), std::string::npos)
    << refused.error().message;
  foreign = *record;
  foreign.kernel_sha256 = std::string(64, '0');
  ASSERT_TRUE(write_vm_snapshot_record(moved, foreign).is_ok());
  refused = vm_->runtime->restore(spec, moved, restore_mode::clone);
  EXPECT_EQ(refused.code(), errc::wrong_state);
  EXPECT_NE(refused.error().message.find("kernel"), std::string::npos) << refused.error().message;
  EXPECT_FALSE(fs::exists(vm_->run_dir + "/foreign.ext4"));
}

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
