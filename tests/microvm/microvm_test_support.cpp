#include "tests/microvm/microvm_test_support.hpp"

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
result<std::string> build_guest(const std::string& agent) {
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

/// The jail as far as this host allows: as root, QEMU runs as `nobody` in
/// its own namespaces; otherwise as the caller, without new namespaces.
vm_options jailed_vm_options() {
  vm_options options;
  options.unshare = test::running_as_root();
  if (test::running_as_root())
    options.vmm_uid = options.vmm_gid = vmm_test_uid;
  return options;
}

result<test_vm_setup> prepare_test_vm(const fs::path& base) {
  auto dir = build_guest();
  if (!dir)
    return dir.error();
  test_vm_setup setup;
  setup.guest_dir = *dir;
  const std::string run_dir = (base / "run").string();
  fs::create_directories(run_dir);
  auto driver = make_template((base / "data").string(), "busybox_v1", "v1");
  if (!driver)
    return driver.error();
  auto image = template_disk_of(**driver, "busybox_v1", (base / "images").string());
  if (!image)
    return image.error();
  setup.image = *image;
  setup.options.run_dir = run_dir;
  setup.options.guest_dir = *dir;
  setup.options.vm = jailed_vm_options();
  setup.options.use_cgroups = test::running_as_root();
  setup.options.cgroups.parent = "airlock-microvm-test";
  // The VMM's uid must reach its disk in the run directory.
  fs::permissions(base, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
  return setup;
}

std::pair<unique_fd, unique_fd> channel_pair() {
  int pair[2] = {-1, -1};
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0)
    return {};
  return {unique_fd(pair[0]), unique_fd(pair[1])};
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

} // namespace airlock::worker::microvm
