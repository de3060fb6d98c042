#pragma once
// Network: each sandbox has its own network namespace (loopback up) and a
// veth pair to the host: `<prefix><hash>h` on the host, eth0 inside, with a
// /30 from the pool (host .1, sandbox .2, default route via the host side).
// One nftables table (`inet <table>`, created idempotently) drops, in the
// raw prerouting hook, every packet from a sandbox's veth whose source is not
// the sandbox's own IPv4 address (so IPv6 too); the `egress` chain lets only
// TCP and DNS on, and those are redirected to the worker's egress proxy
// (worker/egress), which judges every connection. Nothing else reaches the
// host, and nothing is routed to or from a sandbox. The worker runs `ip` and
// `nft` without a shell.

#include <sys/types.h>

#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <string_view>

#include "schema/errc.hpp"
#include "worker/command/command.hpp"

namespace airlock::worker {

/// Where the tools are and which table is ours.
struct net_options {
  /// Default: "/sbin/ip".
  std::string ip_path = "/sbin/ip";
  /// Default: "/usr/sbin/nft".
  std::string nft_path = "/usr/sbin/nft";
  /// The inet table holding every sandbox's rules. Default: "airlock".
  std::string nft_table = "airlock";
  /// Host-side interface names start with this (2 characters). Default: "al".
  std::string interface_prefix = "al";
  /// The egress proxy's TCP port on every sandbox's host-side address;
  /// all TCP from sandboxes is redirected there. 0 with egress_dns_port 0: no
  /// egress proxy, nothing leaves a sandbox. Default: 0.
  uint16_t egress_proxy_port = 0;
  /// The egress proxy's DNS port; all UDP and TCP port 53 goes there. Default: 0.
  uint16_t egress_dns_port = 0;
  /// NFLOG group the firewall logs its drops of sandbox packets to (rate
  /// limited; the egress firewall_log turns them into audit records); 0: no
  /// logging. Default: 0.
  uint16_t drop_log_group = 0;
  /// Drops logged per second per rule at most. Default: 100.
  uint32_t drop_log_per_second = 100;
  /// Each ip/nft run is killed after this long. Default: 5000.
  uint32_t command_timeout_ms = 5000;
};

/// A block of IPv4 addresses carved into equal per-sandbox blocks.
struct address_pool {
  uint32_t base = 0;          ///< host byte order, aligned to prefix_length
  uint32_t prefix_length = 0; ///< of the whole pool
  uint32_t block_prefix = 30; ///< of each sandbox's block (30 or 31)

  /// Number of sandbox blocks in the pool.
  uint32_t blocks() const noexcept;
};

/// "10.200.0.0/16" with /30 blocks. invalid_argument on a malformed CIDR, a
/// host part that is not zero, or a block that does not fit.
result<address_pool> parse_address_pool(std::string_view cidr, uint32_t block_prefix = 30);

/// The two addresses of one sandbox.
struct sandbox_addresses {
  std::string host;
  std::string sandbox;
  uint32_t prefix_length = 0;
};

/// Addresses of block `slot`: first usable on the host side, next for the
/// sandbox. invalid_argument when the slot is outside the pool.
result<sandbox_addresses> pool_addresses(const address_pool& pool, uint32_t slot);

/// Which blocks of the address pool (slots) are taken. Every runtime of one
/// worker that draws addresses from the same pool shares one table, so that a
/// VM and a namespace sandbox never get the same block. Thread-safe.
class slot_table {
public:
  /// The lowest free slot below `bound`, now taken; resource_exhausted when
  /// every one is.
  result<uint32_t> take(uint32_t bound);
  /// Takes `slot` (a sandbox found again after a restart); false when taken.
  bool claim(uint32_t slot);
  /// Frees `slot`; nothing when it was free.
  void release(uint32_t slot);
  bool taken(uint32_t slot) const;

private:
  mutable std::mutex mutex_;
  std::set<uint32_t> in_use_;
};

/// `<prefix><8 hex of FNV-1a(id)>h`: at most 15 characters whatever the id.
std::string host_interface_name(std::string_view prefix, std::string_view id);

/// How the runtime runs ip and nft: its timeout, `stdin_text` as the batch on
/// stdin, and an empty environment (the tools get absolute paths).
command_options tool_options(const net_options& options, std::string stdin_text = {});

/// Creates the table, sets and chains if missing and (re)writes the rules in
/// one transaction; sandbox entries already in the sets survive.
status ensure_firewall(const net_options& options);

/// Adds the sandbox's interface (and interface . address) to the sets. Done
/// before the veth exists so that no packet ever passes unfiltered.
status firewall_add(const net_options& options, const std::string& host_if,
                    const std::string& sandbox_address);

/// Removes the sandbox's set entries; ok when they (or the table) are gone.
status firewall_remove(const net_options& options, const std::string& host_if,
                       const std::string& sandbox_address);

/// True when `host_if` is in the table's interface set.
result<bool> firewall_has(const net_options& options, const std::string& host_if);

/// Creates the veth pair with the peer directly inside the network namespace
/// of `pid` (our unreaped child) as eth0, addresses both ends, brings up lo
/// and eth0 and sets the default route via the host side.
status create_veth(const net_options& options, const std::string& host_if, pid_t pid,
                   const sandbox_addresses& addresses);

/// The host half of create_veth: the pair `host_if` / `peer`, the peer made
/// directly inside the network namespace `netns` (a pid, or the path of a
/// namespace file such as /run/netns/NAME), the host side addressed and up.
/// The peer is left down and without an address.
status add_veth(const net_options& options, const std::string& host_if, const std::string& peer,
                const std::string& netns, const sandbox_addresses& addresses);

/// Turns IPv6 off inside the network namespace `netns_fd` before its
/// interfaces come up: the firewall drops all IPv6 anyway, and without it an
/// interface does not emit autoconfiguration packets that would only be
/// logged as drops.
status disable_ipv6(int netns_fd);

/// Deletes the host side (which takes the peer with it); ok when absent.
status remove_veth(const net_options& options, const std::string& host_if);

/// True when a network interface `name` exists in the worker's namespace.
bool interface_exists(const std::string& name);

} // namespace airlock::worker
