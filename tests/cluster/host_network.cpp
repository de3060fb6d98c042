#include "tests/cluster/host_network.hpp"

#include <net/if.h>
#include <sys/stat.h>

#include <string>
#include <vector>

#include "tests/support/child_process.hpp"
#include "tests/support/host.hpp"

namespace airlock::test::cluster {

namespace {

constexpr const char* ip_path = "/usr/sbin/ip";

/// The bridge's own address; host n gets .(10 + n).
constexpr const char* subnet = "10.250.0.";

/// Runs `ip args...`; empty on success, else what it said.
std::string run_ip(const std::vector<std::string>& args) {
  temp_dir scratch("airlock-ip");
  std::vector<std::string> argv{ip_path};
  argv.insert(argv.end(), args.begin(), args.end());
  auto process =
    child_process::spawn(argv, {"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}, scratch.path() + "/stderr");
  if (!process)
    return "cannot run " + std::string(ip_path);
  auto status = process->wait_exit(std::chrono::seconds(20));
  if (status == 0)
    return {};
  std::string said;
  for (const auto& arg : args)
    said += " " + arg;
  return "ip" + said + ": " + read_file(process->stderr_path());
}

std::string netns_of(const std::string& prefix, int n) { return prefix + "-h" + std::to_string(n); }
std::string port_of(const std::string& prefix, int n) { return prefix + "p" + std::to_string(n); }

bool netns_exists(const std::string& name) {
  struct stat info {};
  return ::stat(("/run/netns/" + name).c_str(), &info) == 0;
}

bool device_exists(const std::string& name) { return ::if_nametoindex(name.c_str()) != 0; }

} // namespace

host_network::host_network(const std::string& prefix, int hosts)
    : prefix_(prefix), bridge_(prefix + "br") {
  remove(); // a killed earlier run's namespaces and bridge
  auto step = [this](const std::vector<std::string>& args) {
    if (error_.empty())
      error_ = run_ip(args);
  };
  step({"link", "add", bridge_, "type", "bridge"});
  step({"addr", "add", std::string(subnet) + "1/24", "dev", bridge_});
  step({"link", "set", bridge_, "up"});
  for (int n = 0; n < hosts; ++n) {
    host_address host{netns_of(prefix_, n), subnet + std::to_string(10 + n), port_of(prefix_, n)};
    step({"netns", "add", host.netns});
    step({"link", "add", host.port_device, "type", "veth", "peer", "name", "eth0", "netns",
          host.netns});
    step({"link", "set", host.port_device, "master", bridge_});
    step({"link", "set", host.port_device, "up"});
    step({"-n", host.netns, "addr", "add", host.ip + "/24", "dev", "eth0"});
    step({"-n", host.netns, "link", "set", "eth0", "up"});
    step({"-n", host.netns, "link", "set", "lo", "up"});
    hosts_.push_back(std::move(host));
  }
}

host_network::~host_network() { remove(); }

void host_network::remove() {
  // Deleting a namespace deletes its veth end, and with it the bridge port.
  for (int n = 0; n < 16; ++n) {
    if (netns_exists(netns_of(prefix_, n)))
      run_ip({"netns", "delete", netns_of(prefix_, n)});
    if (device_exists(port_of(prefix_, n)))
      run_ip({"link", "delete", port_of(prefix_, n)});
  }
  if (device_exists(bridge_))
    run_ip({"link", "delete", bridge_});
}

std::vector<std::string> host_network::leftovers(const std::string& prefix, int hosts) {
  std::vector<std::string> left;
  for (int n = 0; n < hosts; ++n) {
    if (netns_exists(netns_of(prefix, n)))
      left.push_back("network namespace " + netns_of(prefix, n));
    if (device_exists(port_of(prefix, n)))
      left.push_back("device " + port_of(prefix, n));
  }
  if (device_exists(prefix + "br"))
    left.push_back("device " + prefix + "br");
  return left;
}

} // namespace airlock::test::cluster
