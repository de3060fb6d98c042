#include "guest/guest_network.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <net/route.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "schema/hex.hpp"
#include "schema/unique_fd.hpp"

namespace airlock::guest {
namespace {

std::optional<uint32_t> parse_ipv4(std::string_view text) {
  std::string copy(text);
  in_addr parsed{};
  if (::inet_pton(AF_INET, copy.c_str(), &parsed) != 1)
    return std::nullopt;
  return ntohl(parsed.s_addr);
}

status failed(const std::string& what, int error) {
  return make_status(errc::io_error, "guest network: " + what + ": " + std::strerror(error));
}

sockaddr ipv4_sockaddr(uint32_t address) {
  sockaddr_in in{};
  in.sin_family = AF_INET;
  in.sin_addr.s_addr = htonl(address);
  sockaddr out{};
  std::memcpy(&out, &in, sizeof in);
  return out;
}

status set_up(int sock, const std::string& interface) {
  ifreq request{};
  std::strncpy(request.ifr_name, interface.c_str(), IFNAMSIZ - 1);
  if (::ioctl(sock, SIOCGIFFLAGS, &request) != 0)
    return failed("read the flags of " + interface, errno);
  request.ifr_flags = static_cast<short>(request.ifr_flags | IFF_UP);
  if (::ioctl(sock, SIOCSIFFLAGS, &request) != 0)
    return failed("bring up " + interface, errno);
  return status::ok();
}

/// IPv6 off before eth0 comes up: no autoconfiguration packets for the
/// host's firewall to drop. A kernel without IPv6 has no such file.
status disable_ipv6() {
  for (const char* path : {"/proc/sys/net/ipv6/conf/all/disable_ipv6",
                           "/proc/sys/net/ipv6/conf/default/disable_ipv6"}) {
    unique_fd file(::open(path, O_WRONLY | O_CLOEXEC));
    if (!file) {
      if (errno == ENOENT)
        return status::ok();
      return failed(std::string("open ") + path, errno);
    }
    if (::write(file.get(), "1", 1) != 1)
      return failed(std::string("write ") + path, errno);
  }
  return status::ok();
}

int64_t monotonic_ms() {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<int64_t>(now.tv_sec) * 1000 + now.tv_nsec / 1'000'000;
}

} // namespace

namespace {

/// "02:00:0a:c8:00:06": six two-digit hex bytes, unicast.
std::optional<std::array<uint8_t, 6>> parse_mac(std::string_view text) {
  if (text.size() != 17)
    return std::nullopt;
  std::array<uint8_t, 6> mac{};
  for (size_t i = 0; i < 6; ++i) {
    const int high = schema::hex_digit_value(text[i * 3]);
    const int low = schema::hex_digit_value(text[i * 3 + 1]);
    if (high < 0 || low < 0 || (i < 5 && text[i * 3 + 2] != ':'))
      return std::nullopt;
    mac[i] = static_cast<uint8_t>(high << 4 | low);
  }
  if ((mac[0] & 1) != 0) // multicast
    return std::nullopt;
  return mac;
}

} // namespace

std::optional<guest_network> parse_guest_network(std::string_view text) {
  std::optional<std::array<uint8_t, 6>> mac;
  if (auto last = text.rfind(','); last != std::string_view::npos && text.find(',') != last) {
    mac = parse_mac(text.substr(last + 1));
    if (!mac)
      return std::nullopt;
    text = text.substr(0, last);
  }
  auto slash = text.find('/');
  auto comma = text.find(',');
  if (slash == std::string_view::npos || comma == std::string_view::npos || comma < slash)
    return std::nullopt;
  auto address = parse_ipv4(text.substr(0, slash));
  auto gateway = parse_ipv4(text.substr(comma + 1));
  std::string_view prefix_text = text.substr(slash + 1, comma - slash - 1);
  if (!address || !gateway || prefix_text.empty() || prefix_text.size() > 2)
    return std::nullopt;
  uint32_t prefix = 0;
  for (char c : prefix_text) {
    if (c < '0' || c > '9')
      return std::nullopt;
    prefix = prefix * 10 + static_cast<uint32_t>(c - '0');
  }
  if (prefix < 1 || prefix > 32)
    return std::nullopt;
  const uint32_t mask = prefix == 32 ? ~uint32_t{0} : ~((uint32_t{1} << (32 - prefix)) - 1);
  if ((*address & mask) != (*gateway & mask) || *address == *gateway)
    return std::nullopt;
  return guest_network{*address, prefix, *gateway, mac};
}

status configure_guest_network(const guest_network& network, const std::string& interface,
                               int wait_ms) {
  const int64_t deadline = monotonic_ms() + wait_ms;
  while (::if_nametoindex(interface.c_str()) == 0) {
    if (monotonic_ms() >= deadline)
      return make_status(errc::not_found, "guest network: no interface " + interface + " after "
                                            + std::to_string(wait_ms) + " ms");
    ::usleep(10'000);
  }
  if (auto quiet = disable_ipv6(); !quiet)
    return quiet;
  unique_fd sock(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!sock)
    return failed("socket", errno);
  if (auto lo = set_up(sock.get(), "lo"); !lo)
    return lo;
  ifreq request{};
  std::strncpy(request.ifr_name, interface.c_str(), IFNAMSIZ - 1);
  if (network.mac) {
    // virtio-net changes it live and tells QEMU (its MAC filter follows).
    request.ifr_hwaddr.sa_family = ARPHRD_ETHER;
    std::memcpy(request.ifr_hwaddr.sa_data, network.mac->data(), network.mac->size());
    if (::ioctl(sock.get(), SIOCSIFHWADDR, &request) != 0)
      return failed("set the MAC of " + interface, errno);
  }
  request.ifr_addr = ipv4_sockaddr(network.address);
  if (::ioctl(sock.get(), SIOCSIFADDR, &request) != 0)
    return failed("set the address of " + interface, errno);
  const uint32_t mask = network.prefix_length == 32
                          ? ~uint32_t{0}
                          : ~((uint32_t{1} << (32 - network.prefix_length)) - 1);
  request.ifr_netmask = ipv4_sockaddr(mask);
  if (::ioctl(sock.get(), SIOCSIFNETMASK, &request) != 0)
    return failed("set the netmask of " + interface, errno);
  if (auto up = set_up(sock.get(), interface); !up)
    return up;
  rtentry route{};
  route.rt_dst = ipv4_sockaddr(0);
  route.rt_genmask = ipv4_sockaddr(0);
  route.rt_gateway = ipv4_sockaddr(network.gateway);
  route.rt_flags = RTF_UP | RTF_GATEWAY;
  std::string device = interface;
  route.rt_dev = device.data();
  // A restored VM had a default route via its old gateway: gone first (no
  // route there, ESRCH, is fine: a first configuration has none).
  rtentry old_route{};
  old_route.rt_dst = ipv4_sockaddr(0);
  old_route.rt_genmask = ipv4_sockaddr(0);
  old_route.rt_flags = RTF_UP;
  for (int removed = 0; removed < 16 && ::ioctl(sock.get(), SIOCDELRT, &old_route) == 0;
       ++removed) {
  }
  if (::ioctl(sock.get(), SIOCADDRT, &route) != 0)
    return failed("add the default route via the host", errno);
  return status::ok();
}

} // namespace airlock::guest
