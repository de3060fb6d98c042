#pragma once
// The "hosts" of a cluster test on one machine: network namespaces, each with
// its own address on a veth whose other end is a port of one bridge in the
// test's own namespace. Daemons run in a host's namespace (nsenter --net:
// the mount namespace and files stay shared, so data directories, btrfs
// images and cgroups are where the test looks for them); the test reaches
// every host through the bridge, as a client on the same network would.

#include <string>
#include <vector>

namespace airlock::test::cluster {

/// Where a daemon runs: a network namespace (empty: the test's own, on
/// loopback) and the address it serves at.
struct host_address {
  std::string netns;
  std::string ip = "127.0.0.1";
  /// The veth end on the bridge: where a capture sees this host's traffic.
  std::string port_device;
};

class host_network {
public:
  /// The bridge and the namespace of each host, named after `prefix` (at
  /// most 5 characters: device names have 15). Removes what a killed earlier
  /// run left under the same names first. ok() tells whether it worked.
  host_network(const std::string& prefix, int hosts);
  ~host_network();
  host_network(const host_network&) = delete;
  host_network& operator=(const host_network&) = delete;

  /// Empty when every host is up; else what failed.
  const std::string& error() const { return error_; }
  host_address host(int n) const { return hosts_.at(static_cast<size_t>(n)); }
  const std::string& bridge() const { return bridge_; }

  /// What is left of the network after the destructor's clean-up would run:
  /// namespaces and devices by name (empty: nothing).
  static std::vector<std::string> leftovers(const std::string& prefix, int hosts);

private:
  void remove();

  std::string prefix_;
  std::string bridge_;
  std::vector<host_address> hosts_;
  std::string error_;
};

} // namespace airlock::test::cluster
