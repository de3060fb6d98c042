#include "worker/microvm/vm_network.hpp"

#include <fcntl.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

namespace airlock::worker::microvm {
namespace {

/// The names inside the VM's namespace (its own, so fixed names are fine).
constexpr const char* inner_veth = "veth0";
constexpr const char* tap_name = "tap0";
constexpr const char* bridge_name = "br0";

status errno_status(const std::string& what, int error) {
  return make_status(errc::io_error, what + ": " + std::strerror(error));
}

/// Opens a tap device named tap0 inside the namespace `netns_fd`: a tun
/// descriptor makes its device in the namespace of the thread that opens
/// it, so a short-lived thread joins the namespace to open it.
result<unique_fd> open_tap(int netns_fd) {
  result<unique_fd> outcome = make_status(errc::internal, "tap: not opened");
  std::thread opener([netns_fd, &outcome] {
    if (::setns(netns_fd, CLONE_NEWNET) != 0) {
      outcome = errno_status("setns into the VM's network namespace", errno);
      return;
    }
    unique_fd tun(::open("/dev/net/tun", O_RDWR | O_CLOEXEC));
    if (!tun) {
      outcome = errno_status("open /dev/net/tun", errno);
      return;
    }
    ifreq request{};
    std::strncpy(request.ifr_name, tap_name, IFNAMSIZ - 1);
    // No packet-information header: QEMU's tap backend reads plain frames.
    request.ifr_flags = IFF_TAP | IFF_NO_PI;
    if (::ioctl(tun.get(), TUNSETIFF, &request) != 0) {
      outcome = errno_status("create the tap device", errno);
      return;
    }
    outcome = std::move(tun);
  });
  opener.join();
  return outcome;
}

} // namespace

std::string vm_netns_name(const net_options& options, std::string_view id) {
  return options.nft_table + "-" + std::string(id);
}

std::string vm_netns_path(const std::string& netns_name) { return "/run/netns/" + netns_name; }

bool vm_netns_exists(const std::string& netns_name) {
  return ::access(vm_netns_path(netns_name).c_str(), F_OK) == 0;
}

result<unique_fd> wire_vm_network(const net_options& o, const vm_link& link) {
  auto wired = [&]() -> result<unique_fd> {
    if (auto added = firewall_add(o, link.host_interface, link.addresses.sandbox); !added)
      return added;
    auto run = tool_options(o);
    if (auto made = run_checked("create network namespace " + link.netns_name,
                                {o.ip_path, "netns", "add", link.netns_name}, run);
        !made)
      return made;
    const std::string path = vm_netns_path(link.netns_name);
    unique_fd netns(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!netns)
      return errno_status("open " + path, errno);
    if (auto quiet = disable_ipv6(netns.get()); !quiet)
      return quiet;
    if (auto veth = add_veth(o, link.host_interface, inner_veth, path, link.addresses); !veth)
      return veth;
    auto tap = open_tap(netns.get());
    if (!tap)
      return tap.error();
    // STP stays off (the default): the ports forward as soon as they are up.
    run.stdin_text = std::string("link add ") + bridge_name + " type bridge\n" + "link set "
                     + inner_veth + " master " + bridge_name + "\n" + "link set " + tap_name
                     + " master " + bridge_name + "\n" + "link set " + inner_veth + " up\n"
                     + "link set " + tap_name + " up\n" + "link set " + bridge_name + " up\n";
    run.netns_fd = netns.get();
    if (auto bridged = run_checked("bridge the VM's tap and veth", {o.ip_path, "-batch", "-"}, run);
        !bridged)
      return bridged;
    return std::move(*tap);
  }();
  if (!wired)
    (void)unwire_vm_network(o, link);
  return wired;
}

status unwire_vm_network(const net_options& o, const vm_link& link) {
  status outcome = remove_veth(o, link.host_interface);
  if (vm_netns_exists(link.netns_name)) {
    auto run = tool_options(o);
    auto removed = run_checked("delete network namespace " + link.netns_name,
                               {o.ip_path, "netns", "delete", link.netns_name}, run);
    if (!removed && vm_netns_exists(link.netns_name) && outcome)
      outcome = removed;
  }
  if (auto removed = firewall_remove(o, link.host_interface, link.addresses.sandbox);
      !removed && outcome)
    outcome = removed;
  return outcome;
}

} // namespace airlock::worker::microvm
