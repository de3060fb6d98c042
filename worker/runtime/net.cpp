#include "worker/runtime/net.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <thread>

#include "schema/unique_fd.hpp"
#include "worker/runtime/sys.hpp"

namespace airlock::worker {

uint32_t address_pool::blocks() const noexcept {
  return uint32_t{1} << (block_prefix - prefix_length);
}

namespace {

std::string format_ipv4(uint32_t address) {
  in_addr addr{htonl(address)};
  char text[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &addr, text, sizeof text);
  return text;
}

} // namespace

command_options tool_options(const net_options& o, std::string stdin_text) {
  command_options run;
  run.timeout_ms = o.command_timeout_ms;
  run.stdin_text = std::move(stdin_text);
  run.clean_env = true;
  return run;
}

result<address_pool> parse_address_pool(std::string_view cidr, uint32_t block_prefix) {
  auto slash = cidr.find('/');
  if (slash == std::string_view::npos)
    return make_status(errc::invalid_argument,
                       "address pool '" + std::string(cidr) + "' is not a CIDR like 10.200.0.0/16");
  std::string address(cidr.substr(0, slash));
  in_addr parsed{};
  int prefix = std::atoi(std::string(cidr.substr(slash + 1)).c_str());
  if (::inet_pton(AF_INET, address.c_str(), &parsed) != 1 || prefix < 8 || prefix > 30)
    return make_status(errc::invalid_argument,
                       "address pool '" + std::string(cidr) + "': bad address or prefix");
  if (block_prefix != 30 && block_prefix != 31)
    return make_status(errc::invalid_argument, "sandbox blocks must be /30 or /31");
  if (static_cast<uint32_t>(prefix) > block_prefix)
    return make_status(errc::invalid_argument, "address pool smaller than one sandbox block");
  address_pool pool{ntohl(parsed.s_addr), static_cast<uint32_t>(prefix), block_prefix};
  uint32_t host_mask = (uint32_t{1} << (32 - pool.prefix_length)) - 1;
  if ((pool.base & host_mask) != 0)
    return make_status(errc::invalid_argument,
                       "address pool '" + std::string(cidr) + "' has host bits set");
  return pool;
}

result<sandbox_addresses> pool_addresses(const address_pool& pool, uint32_t slot) {
  if (slot >= pool.blocks())
    return make_status(errc::resource_exhausted,
                       "slot " + std::to_string(slot) + " is outside the address pool");
  uint32_t block = pool.base + (slot << (32 - pool.block_prefix));
  // A /30 keeps network and broadcast addresses unused; a /31 (RFC 3021)
  // uses both.
  uint32_t first = pool.block_prefix == 30 ? block + 1 : block;
  return sandbox_addresses{format_ipv4(first), format_ipv4(first + 1), pool.block_prefix};
}

result<uint32_t> slot_table::take(uint32_t bound) {
  std::lock_guard lock(mutex_);
  uint32_t slot = 0;
  while (slot < bound && in_use_.count(slot) != 0)
    ++slot;
  if (slot >= bound)
    return make_status(errc::resource_exhausted,
                       "all " + std::to_string(bound) + " sandbox slots are in use");
  in_use_.insert(slot);
  return slot;
}

bool slot_table::claim(uint32_t slot) {
  std::lock_guard lock(mutex_);
  return in_use_.insert(slot).second;
}

void slot_table::release(uint32_t slot) {
  std::lock_guard lock(mutex_);
  in_use_.erase(slot);
}

bool slot_table::taken(uint32_t slot) const {
  std::lock_guard lock(mutex_);
  return in_use_.count(slot) != 0;
}

std::string host_interface_name(std::string_view prefix, std::string_view id) {
  uint32_t hash = 2166136261U;
  for (char c : id) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 16777619U;
  }
  char hex[9];
  std::snprintf(hex, sizeof hex, "%08x", hash);
  return std::string(prefix.substr(0, 2)) + hex + "h";
}

namespace {

/// A rule that logs (rate-limited) what the next rule drops. Separate from the
/// drop: a `limit` that no longer matches must not let the packet through.
std::string log_rule(const net_options& o, const std::string& match, const std::string& kind) {
  if (o.drop_log_group == 0)
    return "";
  return "    " + match + (match.empty() ? "" : " ") + "limit rate "
         + std::to_string(o.drop_log_per_second) + "/second burst "
         + std::to_string(o.drop_log_per_second) + " packets log group "
         + std::to_string(o.drop_log_group) + " prefix \"airlock:" + kind + "\"\n";
}

/// The rules of the egress chain and the chains the egress proxy needs. Without a
/// egress proxy (ports 0) everything a sandbox sends is dropped.
std::string egress_rules(const net_options& o) {
  if (o.egress_proxy_port == 0 || o.egress_dns_port == 0)
    return "  chain egress {\n" + log_rule(o, "", "proto")
           + "    counter drop comment \"no egress proxy: nothing leaves\"\n"
             "  }\n"
             "  chain input {\n"
           + log_rule(o, "iifname @sandbox_ifs", "host")
           + "    iifname @sandbox_ifs counter drop comment \"the host's own services\"\n"
             "  }\n";
  std::string proxy = std::to_string(o.egress_proxy_port);
  std::string dns = std::to_string(o.egress_dns_port);
  // egress (raw priority, after the source check): only TCP and DNS go on;
  // dstnat then redirects every TCP connection to the egress proxy's proxy port and
  // every DNS query to its resolver, whatever address the guest chose; input
  // accepts only those redirected flows, so the host's own services, the
  // control plane, the metadata address and other sandboxes are unreachable.
  return "  chain egress {\n"
         "    meta l4proto tcp accept\n"
         "    udp dport 53 accept\n"
         + log_rule(o, "", "proto")
         + "    counter drop comment \"not TCP or DNS: other UDP (QUIC), ICMP\"\n"
           "  }\n"
           "  chain dstnat {\n"
           "    iifname @sandbox_ifs meta l4proto { tcp, udp } th dport 53 redirect to :"
         + dns
         + "\n"
           "    iifname @sandbox_ifs meta l4proto tcp redirect to :"
         + proxy
         + "\n"
           "  }\n"
           "  chain input {\n"
           "    iifname @sandbox_ifs ct status dnat tcp dport { "
         + proxy + ", " + dns
         + " } accept\n"
           "    iifname @sandbox_ifs ct status dnat udp dport "
         + dns + " accept\n" + log_rule(o, "iifname @sandbox_ifs", "host")
         + "    iifname @sandbox_ifs counter drop comment \"the host's own services\"\n"
           "  }\n";
}

} // namespace

status ensure_firewall(const net_options& o) {
  const std::string& t = o.nft_table;
  // Declarations are "add if missing"; the flushes and rules rewrite the
  // chains in the same transaction, so a rerun never duplicates rules and
  // never drops the sets' elements.
  std::string script =
    "table inet " + t
    + " {\n"
      "  set sandbox_ifs { type ifname; }\n"
      "  set sandbox_src { type ifname . ipv4_addr; }\n"
      "  chain prerouting { type filter hook prerouting priority raw; policy "
      "accept; }\n"
      "  chain dstnat { type nat hook prerouting priority dstnat; policy "
      "accept; }\n"
      "  chain input { type filter hook input priority filter; policy accept; }\n"
      "  chain forward { type filter hook forward priority filter; policy "
      "accept; }\n"
      "  chain egress { }\n"
      "}\n";
  for (const char* chain : {"prerouting", "dstnat", "input", "forward", "egress"})
    script += "flush chain inet " + t + " " + chain + "\n";
  script +=
    "table inet " + t
    + " {\n"
      "  chain prerouting {\n"
      "    iifname @sandbox_ifs iifname . ip saddr @sandbox_src goto egress\n"
    + log_rule(o, "iifname @sandbox_ifs meta protocol != arp", "spoof")
    + "    iifname @sandbox_ifs counter drop comment \"spoofed source, IPv6 or other "
      "protocol\"\n"
      "  }\n"
    + egress_rules(o) + "  chain forward {\n" + log_rule(o, "iifname @sandbox_ifs", "fwd")
    + "    iifname @sandbox_ifs counter drop comment \"nothing is routed out of a sandbox\"\n"
      "    oifname @sandbox_ifs counter drop comment \"nothing is routed into a sandbox\"\n"
      "  }\n"
      "}\n";
  auto run = tool_options(o, script);
  return run_checked("create nftables table inet " + t, {o.nft_path, "-f", "-"}, run);
}

status firewall_add(const net_options& o, const std::string& host_if,
                    const std::string& sandbox_address) {
  std::string script = "add element inet " + o.nft_table + " sandbox_src { " + host_if + " . "
                       + sandbox_address + " }\n" + "add element inet " + o.nft_table
                       + " sandbox_ifs { " + host_if + " }\n";
  auto run = tool_options(o, script);
  return run_checked("add " + host_if + " to the nftables sets", {o.nft_path, "-f", "-"}, run);
}

result<bool> firewall_has(const net_options& o, const std::string& host_if) {
  // The whole listing, so that the search below sees every interface.
  auto run = tool_options(o);
  run.output_bytes_max = size_t{1} << 20;
  auto listed = run_command({o.nft_path, "list", "set", "inet", o.nft_table, "sandbox_ifs"}, run);
  if (!listed)
    return listed.error();
  if (listed->exit_code != 0)
    return false; // no table, no set: no entry
  if (listed->output_cut)
    return make_status(errc::resource_exhausted, "the nftables set listing exceeds 1 MiB");
  return listed->output.find("\"" + host_if + "\"") != std::string::npos;
}

status firewall_remove(const net_options& o, const std::string& host_if,
                       const std::string& sandbox_address) {
  std::string remove_ifs =
    "delete element inet " + o.nft_table + " sandbox_ifs { " + host_if + " }\n";
  std::string remove_src = "delete element inet " + o.nft_table + " sandbox_src { " + host_if
                           + " . " + sandbox_address + " }\n";
  // Usual case: both entries exist and go in one transaction (one nft run).
  auto run = tool_options(o, remove_ifs + remove_src);
  auto both = run_command({o.nft_path, "-f", "-"}, run);
  if (!both)
    return both.error();
  if (both->exit_code == 0)
    return status::ok();
  // After a crash either entry may already be gone, which fails the whole
  // transaction: delete each on its own, then check.
  for (const std::string& script : {remove_ifs, remove_src}) {
    run.stdin_text = script;
    if (auto one = run_command({o.nft_path, "-f", "-"}, run); !one)
      return one.error();
  }
  auto present = firewall_has(o, host_if);
  if (!present)
    return present.error();
  if (*present)
    return make_status(errc::io_error,
                       "nftables entry for " + host_if + " survived its deletion: " + both->output);
  return status::ok();
}

status disable_ipv6(int netns_fd) {
  // /proc/sys/net belongs to the namespace of the thread that opens it, so a
  // short-lived thread joins the sandbox's namespace to write it.
  status outcome = status::ok();
  std::thread writer([netns_fd, &outcome] {
    if (::setns(netns_fd, CLONE_NEWNET) != 0) {
      outcome = sys_error(errc::io_error, "setns into the sandbox's network namespace", errno);
      return;
    }
    for (const char* path : {"/proc/sys/net/ipv6/conf/all/disable_ipv6",
                             "/proc/sys/net/ipv6/conf/default/disable_ipv6"}) {
      unique_fd file(::open(path, O_WRONLY | O_CLOEXEC));
      if (!file) {
        if (errno == ENOENT)
          return; // a kernel without IPv6
        outcome = sys_error(errc::io_error, std::string("open ") + path, errno);
        return;
      }
      if (::write(file.get(), "1", 1) != 1) {
        outcome = sys_error(errc::io_error, std::string("write ") + path, errno);
        return;
      }
    }
  });
  writer.join();
  return outcome;
}

status add_veth(const net_options& o, const std::string& host_if, const std::string& peer,
                const std::string& netns, const sandbox_addresses& a) {
  std::string prefix = "/" + std::to_string(a.prefix_length);
  std::string host_batch = "link add " + host_if + " type veth peer name " + peer + " netns "
                           + netns + "\n" + "addr add " + a.host + prefix + " dev " + host_if + "\n"
                           + "link set " + host_if + " up\n";
  auto run = tool_options(o, host_batch);
  return run_checked("create veth " + host_if, {o.ip_path, "-batch", "-"}, run);
}

status create_veth(const net_options& o, const std::string& host_if, pid_t pid,
                   const sandbox_addresses& a) {
  if (auto made = add_veth(o, host_if, "eth0", std::to_string(pid), a); !made)
    return made;
  std::string prefix = "/" + std::to_string(a.prefix_length);
  auto run = tool_options(o);
  std::string ns_path = "/proc/" + std::to_string(pid) + "/ns/net";
  unique_fd netns(::open(ns_path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!netns)
    return sys_error(errc::io_error, "open " + ns_path, errno);
  if (auto quiet = disable_ipv6(netns.get()); !quiet)
    return quiet;
  run.stdin_text = "link set lo up\naddr add " + a.sandbox + prefix
                   + " dev eth0\nlink set eth0 up\nroute add default via " + a.host + "\n";
  run.netns_fd = netns.get();
  return run_checked("configure eth0 inside the sandbox", {o.ip_path, "-batch", "-"}, run);
}

bool interface_exists(const std::string& name) { return ::if_nametoindex(name.c_str()) != 0; }

status remove_veth(const net_options& o, const std::string& host_if) {
  if (!interface_exists(host_if))
    return status::ok();
  auto run = tool_options(o);
  auto removed = run_checked("delete veth " + host_if, {o.ip_path, "link", "del", host_if}, run);
  if (!removed && interface_exists(host_if))
    return removed;
  return status::ok(); // gone meanwhile (its namespace died)
}

} // namespace airlock::worker
