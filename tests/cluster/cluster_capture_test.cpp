// What crosses the wire between the hosts of a cluster, captured the way an
// attacker on the path would (a raw packet socket on the bridge ports of the
// control plane's and the worker's hosts): a 5 MiB file relayed through the
// control plane and a process's relayed output must not appear in clear on
// the cluster link, nor a credential's secret fetched by the worker's egress
// proxy, nor a file sent straight to the worker's data listener.
// The same capture sees the test's own plain HTTP calls to the control
// plane, so a capture that misses everything cannot pass.

#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <netinet/ip.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <string>
#include <thread>

#include "tests/cluster/cluster_fixture.hpp"

namespace airlock::test::cluster {
namespace {

/// TCP payload bytes on one network device, by the port on either side.
class packet_capture {
public:
  packet_capture(const std::string& device, std::vector<uint16_t> ports)
      : ports_(std::move(ports)) {
    fd_ = ::socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(ETH_P_ALL));
    if (fd_ < 0)
      return;
    int size = 256 << 20; // never drop: a dropped packet could hide clear text
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof size);
    sockaddr_ll where{};
    where.sll_family = AF_PACKET;
    where.sll_protocol = htons(ETH_P_ALL);
    where.sll_ifindex = static_cast<int>(::if_nametoindex(device.c_str()));
    if (where.sll_ifindex == 0) {
      ::close(fd_);
      fd_ = -1;
      return;
    }
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&where), sizeof where) != 0) {
      ::close(fd_);
      fd_ = -1;
      return;
    }
    reader_ = std::thread([this] { read(); });
  }

  ~packet_capture() { stop(); }

  bool ok() const { return fd_ >= 0; }

  /// Stops capturing; the packets the kernel dropped for want of room.
  unsigned stop() {
    if (reader_.joinable()) {
      stop_ = true;
      reader_.join();
    }
    unsigned dropped = 0;
    if (fd_ >= 0) {
      tpacket_stats stats{};
      socklen_t length = sizeof stats;
      if (::getsockopt(fd_, SOL_PACKET, PACKET_STATISTICS, &stats, &length) == 0)
        dropped = stats.tp_drops;
      ::close(fd_);
      fd_ = -1;
    }
    return dropped;
  }

  /// Every payload byte seen on `port` (either side), in arrival order.
  std::string bytes_of(uint16_t port) {
    std::lock_guard lock(mutex_);
    return payloads_[port];
  }

private:
  void read() {
    std::vector<char> frame(1 << 17);
    while (!stop_) {
      pollfd ready{fd_, POLLIN, 0};
      if (::poll(&ready, 1, 50) <= 0)
        continue;
      ssize_t n = ::recv(fd_, frame.data(), frame.size(), 0);
      if (n < static_cast<ssize_t>(sizeof(ether_header) + sizeof(iphdr)))
        continue;
      auto* ip = reinterpret_cast<const iphdr*>(frame.data() + sizeof(ether_header));
      if (ip->version != 4 || ip->protocol != IPPROTO_TCP)
        continue;
      const size_t ip_length = ip->ihl * 4u;
      const size_t total = std::min<size_t>(ntohs(ip->tot_len), n - sizeof(ether_header));
      if (total < ip_length + sizeof(tcphdr))
        continue;
      auto* tcp = reinterpret_cast<const tcphdr*>(frame.data() + sizeof(ether_header) + ip_length);
      const size_t header = ip_length + tcp->doff * 4u;
      if (total <= header)
        continue;
      const char* payload = frame.data() + sizeof(ether_header) + header;
      std::lock_guard lock(mutex_);
      for (uint16_t port : ports_)
        if (ntohs(tcp->source) == port || ntohs(tcp->dest) == port)
          payloads_[port].append(payload, total - header);
    }
  }

  int fd_ = -1;
  std::vector<uint16_t> ports_;
  std::thread reader_;
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::map<uint16_t, std::string> payloads_;
};

TEST_F(cluster_e2e, relayed_files_and_output_cross_the_cluster_link_only_encrypted) {
  start_control();
  auto& worker = start_worker(0);
  ASSERT_TRUE(eventually([&] { return worker_in_state("clue2e-0", "ready"); }, rejoin_bound));
  const std::string id = create_running();
  ASSERT_FALSE(id.empty());

  // The control plane's bridge port carries the cluster link and the API;
  // the worker's carries the link and its data listener.
  packet_capture capture(control_host().port_device, {control_->cluster_port, control_->port});
  packet_capture worker_side(place_of(0).host.port_device, {worker.port});
  ASSERT_TRUE(capture.ok() && worker_side.ok()) << "raw packet sockets need CAP_NET_RAW";

  // A file of 5 MiB through the control plane: marker lines between bytes
  // that do not compress.
  const std::string file_marker = "FILE-MARKER-5b1d0c-never-in-clear";
  std::string content;
  for (size_t i = 0; content.size() < (5u << 20); ++i) {
    content += file_marker;
    for (int j = 0; j < 64; ++j)
      content.push_back(static_cast<char>(((i * 64 + j) * 2654435761u) >> 13));
  }
  const std::string files = "/v1/sandboxes/" + id + "/files?path=/tmp/capture.bin";
  auto put = call("PUT", control_->url() + files, key_, content,
                  {{"Content-Type", "application/octet-stream"}});
  ASSERT_EQ(put.status, 201) << put.raw;
  auto back = call("GET", control_->url() + files, key_);
  ASSERT_EQ(back.status, 200);
  EXPECT_TRUE(back.raw == content);

  // A process's output, relayed through the control plane.
  const std::string output_marker = "OUTPUT-MARKER-77aa31";
  auto started =
    exec(control_->url(), id, key_, "for i in $(seq 1 50); do echo " + output_marker + "-$i; done");
  const std::string attach_url = started["attach_url"];
  auto relayed = control_->url() + attach_url.substr(attach_url.find("/v1/"));
  auto output = read_events(relayed + "/output", key_);
  ASSERT_TRUE(output.exited);
  EXPECT_NE(output_text(output.events).find(output_marker + "-50"), std::string::npos);

  // The same file straight to the worker's data listener, with a token.
  auto token = call("POST", control_->url() + "/v1/sandboxes/" + id + "/token", key_,
                    json{{"scope", "all"}, {"ttl_s", 600}}.dump());
  ASSERT_EQ(token.status, 201) << token.raw;
  const std::string direct = token.body["data_url"].get<std::string>() + "/v1/sandboxes/" + id
                             + "/files?path=/tmp/direct.bin";
  auto direct_put = call("PUT", direct, token.body["token"], content,
                         {{"Content-Type", "application/octet-stream"}});
  ASSERT_EQ(direct_put.status, 201) << direct_put.raw;

  // A credential fetched over the link: a sandbox whose egress allows
  // api.test sends a plain HTTP request for it; the worker's egress proxy
  // asks the control plane for the sandbox's credentials (their secret
  // rendered into the header value) before it tries the upstream, which does
  // not exist here. The injection is audited.
  const std::string secret = "CRED-SECRET-4f1e9a-never-in-clear";
  const std::string with_egress =
    create_running({{"egress", {{"profile", "allowlist"}, {"allow", {"api.test"}}}}});
  ASSERT_FALSE(with_egress.empty());
  auto credential =
    call("POST", control_->url() + "/v1/credentials", key_,
         json{{"name", "capture-token"},
              {"scope", {{"sandbox", with_egress}}},
              {"hosts", {"api.test"}},
              {"inject", {{"header", "Authorization"}, {"value_template", "Bearer {secret}"}}},
              {"secret", secret}}
           .dump());
  ASSERT_EQ(credential.status, 201) << credential.raw;
  exec(control_->url(), with_egress, key_,
       "printf 'GET / HTTP/1.1\\r\\nHost: api.test\\r\\nConnection: close\\r\\n\\r\\n' "
       "| nc -w 5 192.0.2.1 80");
  EXPECT_TRUE(eventually(
    [&] {
      auto audit =
        call("GET",
             control_->url() + "/v1/audit?sandbox_id=" + with_egress + "&kind=credential&limit=100",
             key_);
      return audit.status == 200 && audit.raw.find("capture-token") != std::string::npos;
    },
    operation_bound))
    << "the egress proxy did not use the credential: no fetch to look for";

  EXPECT_EQ(capture.stop(), 0u) << "the capture dropped packets: it proves nothing";
  EXPECT_EQ(worker_side.stop(), 0u) << "the capture dropped packets: it proves nothing";
  const std::string data_plane = worker_side.bytes_of(worker.port);
  EXPECT_GT(data_plane.size(), content.size()) << "the capture missed the direct upload";
  EXPECT_EQ(data_plane.find(file_marker), std::string::npos) << "file bytes in clear to the worker";
  EXPECT_EQ(data_plane.find(token.body["token"].get<std::string>()), std::string::npos)
    << "the data-plane token in clear";
  const std::string link = capture.bytes_of(control_->cluster_port);
  const std::string api = capture.bytes_of(control_->port);
  // The capture saw both transfers: the file crossed the link twice.
  EXPECT_GT(link.size(), 2 * content.size()) << "the cluster link carried less than the file";
  EXPECT_NE(api.find(file_marker), std::string::npos)
    << "the capture misses the plain HTTP it must see";
  EXPECT_EQ(link.find(file_marker), std::string::npos) << "file bytes in clear on the link";
  EXPECT_EQ(link.find(output_marker), std::string::npos) << "output in clear on the link";
  EXPECT_EQ(link.find(key_), std::string::npos) << "the API key in clear on the link";
  EXPECT_EQ(link.find(secret), std::string::npos) << "a credential's secret in clear on the link";
}

} // namespace
} // namespace airlock::test::cluster
