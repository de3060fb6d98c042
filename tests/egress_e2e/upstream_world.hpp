#pragma once
// "The internet" of the egress end-to-end tests, with no real internet: a
// network namespace behind a veth pair whose far side holds 198.51.100.10
// (the real upstream: HTTP on 80 and 8080, HTTPS on 443 with a certificate
// from a test CA) and 198.51.100.11 (an attacker: HTTP on 80 answering
// "attacker", and UDP on 53 and 443 counting what arrives). The host side is
// 198.51.100.1/24, so the worker's egress proxy reaches both by route. The
// servers run on threads of the test process that joined the namespace.
// (Not 203.0.113.0/24: the build machines reach their package mirror there.)
// 198.51.100.12 is a shared host (shared_host.py, Debian's python3-h2): one
// address serving cdn.wild.test, allowed.test and evil.test alike, over
// HTTP/1.1 and h2c upgrades, as a CDN edge or shared hosting would.
//
// Upstream HTTP(S) answers:
//   /echo      JSON {"server":"real","method","path","host","auth_sha256","header_names"}
//              (the Authorization header only as a SHA-256: the sandbox must
//              never see a secret, not even echoed back)
//   /ws        with Upgrade: websocket: 101, then echoes raw bytes
//   /bytes/N   N bytes of 'x'

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/child_process.hpp"
#include "tests/support/host.hpp"
#include "tests/support/http_client.hpp"

namespace airlock::test {

inline constexpr const char* upstream_address = "198.51.100.10";
inline constexpr const char* attacker_address = "198.51.100.11";
inline constexpr const char* shared_host_address = "198.51.100.12";

class upstream_world {
public:
  /// Needs root; nullptr with `error` set when something cannot be made.
  static std::unique_ptr<upstream_world> start(std::string& error);
  ~upstream_world();
  upstream_world(const upstream_world&) = delete;
  upstream_world& operator=(const upstream_world&) = delete;

  /// PEM of the CA that signed the upstream's certificate (for the egress proxy).
  std::string ca_file() const { return dir_.path() + "/upstream-ca.pem"; }
  /// The egress proxy's static name map.
  std::string hosts_file() const { return dir_.path() + "/hosts"; }
  /// UDP datagrams that reached the attacker address (any port).
  uint64_t udp_datagrams() const { return udp_count_.load(); }
  /// HTTP requests the attacker server answered.
  uint64_t attacker_requests() const { return attacker_count_.load(); }

private:
  upstream_world() = default;
  bool make_network(std::string& error);
  bool make_certificates(std::string& error);
  void start_servers();
  bool start_shared_host(std::string& error);

  temp_dir dir_;
  std::string netns_;
  std::string veth_;
  std::string cert_pem_, key_pem_;
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> udp_count_{0};
  std::atomic<uint64_t> attacker_count_{0};
  std::vector<int> sockets_; ///< listeners, closed on stop to end their threads
  std::vector<std::thread> threads_;
  int shared_host_pid_ = -1;
};

} // namespace airlock::test
