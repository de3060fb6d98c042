#pragma once
// A VM's network (docs/microvm.md, "Network"): exactly what a namespace
// sandbox has on the host (its slot's /30, the host side of a veth pair
// `<prefix><hash>h` with the host address, the sandbox's entries in the
// nftables sets, so the source check, the redirect to the egress proxy and
// the drops are the same rules), plus, inside a network namespace of the
// sandbox's own (/run/netns/<table>-<id>), a bridge joining the veth's inner
// end and a tap device. QEMU gets only the tap's descriptor; the guest's eth0
// (virtio-net) holds the sandbox address with a MAC of its own, and its
// agent sets the default route via the host address. The namespace has no
// address and no route: it only carries the guest's frames to the veth.

#include <cstdint>
#include <string>
#include <string_view>

#include "schema/errc.hpp"
#include "schema/unique_fd.hpp"
#include "worker/runtime/net.hpp"

namespace airlock::worker::microvm {

/// One VM's network on the host.
struct vm_link {
  std::string netns_name;     ///< under /run/netns
  std::string host_interface; ///< host side of the veth pair
  sandbox_addresses addresses;
  uint32_t slot = 0; ///< the address block's index in the pool
};

/// `<table>-<id>`: per airlockd instance (its table), per sandbox.
std::string vm_netns_name(const net_options& options, std::string_view id);
/// /run/netns/<name>.
std::string vm_netns_path(const std::string& netns_name);

/// Adds the firewall entries (before any interface exists, as the namespace
/// runtime does), the namespace (IPv6 off), the veth pair, the tap device and
/// the bridge; returns the tap's descriptor (the device lives while it, or
/// QEMU's copy, is open). On failure removes what it made.
result<unique_fd> wire_vm_network(const net_options& options, const vm_link& link);

/// Removes the veth pair, the namespace (with the bridge, and a tap whose
/// descriptors are closed) and the firewall entries. Idempotent: ok for what
/// is already gone.
status unwire_vm_network(const net_options& options, const vm_link& link);

/// True when /run/netns/<name> exists.
bool vm_netns_exists(const std::string& netns_name);

} // namespace airlock::worker::microvm
