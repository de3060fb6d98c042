#pragma once
// A microVM's eth0, configured by the agent as PID 1 (docs/microvm.md,
// "Network"). The host passes `airlock.net=ADDRESS/PREFIX,GATEWAY` on the
// kernel command line; the VM's /init hands the value over as `--net`. The
// agent sets the address on eth0 (virtio-net, its MAC chosen by the host),
// brings lo and eth0 up and routes everything via the gateway (the host side
// of the sandbox's veth), with IPv6 off as in a namespace sandbox (the host's
// firewall drops it anyway). Plain ioctls: no tool is needed in the guest.

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "schema/errc.hpp"

namespace airlock::guest {

struct guest_network {
  uint32_t address = 0; ///< host byte order
  uint32_t prefix_length = 0;
  uint32_t gateway = 0; ///< host byte order; inside the address's subnet
  /// eth0's hardware address to set; none: keep the NIC's (a first boot's
  /// is QEMU's; a clone's refresh gives its own, or it would keep its base's).
  std::optional<std::array<uint8_t, 6>> mac;
};

/// "10.200.0.2/30,10.200.0.1" and optionally ",02:00:00:00:00:01" (a unicast
/// MAC); nothing for anything else (a prefix outside 1..32, a gateway
/// outside the subnet, a malformed or multicast MAC).
std::optional<guest_network> parse_guest_network(std::string_view text);

/// Configures `interface` (eth0) and lo as above, replacing an address and
/// default route it had (a VM restored onto a new slot). Waits up to
/// `wait_ms` for the interface to appear (the driver probes the NIC as it
/// loads).
status configure_guest_network(const guest_network& network, const std::string& interface = "eth0",
                               int wait_ms = 3000);

} // namespace airlock::guest
