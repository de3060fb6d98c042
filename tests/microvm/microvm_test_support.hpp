#pragma once
// What the microVM integration suites share (boot_test.cpp, snapshot_test.cpp):
// why a VM cannot boot here, the guest built by scripts/microvm-guest into the
// test cache, a busybox template, the VM's test network and the jail's options.

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>

#include "schema/errc.hpp"
#include "schema/unique_fd.hpp"
#include "worker/microvm/microvm_runtime.hpp"
#include "worker/microvm/vm.hpp"
#include "worker/rootfs/rootfs_driver.hpp"
#include "worker/runtime/net.hpp"

namespace airlock::worker::microvm {

namespace fs = std::filesystem;

inline constexpr int agent_ready_timeout_ms = 120'000; // TCG on a busy 2-core host
inline constexpr int command_timeout_ms = 30'000;
inline constexpr uint32_t vmm_test_uid = 65534; // nobody
inline constexpr const char* template_marker = "airlock microvm test template\n";

/// Why the VM cannot be booted here ("" when it can).
std::string skip_reason();

fs::path cache_dir();

/// The guest, built (or found) by the project's script. Fails the caller
/// with the script's output.
result<std::string> build_guest(const std::string& agent = AIRLOCK_GUEST_BINARY);

/// A template tree: static busybox, a few applet links and a marker file.
void make_template_tree(const fs::path& root);

/// A sealed template `name` in an overlay rootfs driver under `data_dir`,
/// with a manifest whose source is `source` (what a template build writes).
result<std::unique_ptr<rootfs_driver>>
make_template(const std::string& data_dir, const std::string& name, const std::string& source);

/// A TCP listener on every host address at an ephemeral port.
struct tcp_listener {
  unique_fd fd;
  uint16_t port = 0;
};

tcp_listener listen_tcp();

/// The VM's network in a table, interface prefix and pool of the test's own:
/// every TCP connection is redirected to `proxy_port` (standing in for the
/// egress proxy) and DNS to `dns_port`.
net_options test_net_options(uint16_t proxy_port, uint16_t dns_port);
inline constexpr const char* test_address_pool = "10.208.0.0/24";

/// The jail as far as this host allows: as root, QEMU runs as `nobody` in
/// its own namespaces; otherwise as the caller, without new namespaces.
vm_options jailed_vm_options();

/// What a suite needs before its first VM: the guest built, a busybox
/// template made into a disk image, a run directory and the runtime's options
/// (jail, cgroups) for a VM without network; the suite adds its own.
struct test_vm_setup {
  std::string guest_dir;
  std::string image;
  microvm_runtime_options options;
};

/// Builds `test_vm_setup` under `base` (made reachable by the VMM's uid).
result<test_vm_setup> prepare_test_vm(const fs::path& base);

/// A connected pair of stream sockets: ours and the VM's channel.
std::pair<unique_fd, unique_fd> channel_pair();

/// The value of `key` ("Uid:") in /proc/<pid>/status, without the blanks after the key.
std::string proc_status(pid_t pid, const std::string& key);

std::string trimmed(std::string text);

} // namespace airlock::worker::microvm
