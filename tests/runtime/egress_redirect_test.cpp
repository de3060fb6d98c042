// The host side of egress: with egress proxy ports configured, every TCP
// connection and every DNS query a sandbox makes lands on the egress proxy's ports
// whatever address it chose, the egress proxy can read the address the guest
// wanted (SO_ORIGINAL_DST), and nothing else (other UDP, ICMP, the host's own
// ports) leaves the sandbox. The egress proxy itself is tested in tests/egress.

#include <arpa/inet.h>
#include <linux/netfilter_ipv4.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "sandbox_fixture.hpp"

namespace airlock::worker::testing {
namespace {

/// A socket on 0.0.0.0 with an ephemeral port.
struct host_socket {
  unique_fd fd;
  uint16_t port = 0;

  explicit host_socket(int type) {
    fd.reset(::socket(AF_INET, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    EXPECT_EQ(::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    if (type == SOCK_STREAM) {
      EXPECT_EQ(::listen(fd.get(), 8), 0);
    }
    socklen_t len = sizeof addr;
    ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len);
    port = ntohs(addr.sin_port);
  }

  bool readable(int timeout_ms) {
    pollfd pfd{fd.get(), POLLIN, 0};
    return ::poll(&pfd, 1, timeout_ms) > 0;
  }
};

class egress_redirect : public runtime_test {
protected:
  void SetUp() override {
    runtime_test::SetUp();
    if (IsSkipped() || HasFatalFailure())
      return;
    // Reopen the runtime with the egress proxy's ports: the table's rules are
    // rewritten with redirects to them.
    runtime_.reset();
    auto options = test_options(state_->path());
    options.net.egress_proxy_port = proxy_.port;
    options.net.egress_dns_port = dns_udp_.port;
    options.net.drop_log_group = 4242; // rules with logging must load too
    auto opened = namespace_runtime::open(options);
    ASSERT_TRUE(opened) << opened.error().message;
    runtime_ = std::move(*opened);
  }

  host_socket proxy_{SOCK_STREAM};
  // The DNS port must be free for TCP and UDP alike: bind UDP first, then TCP
  // on the same number.
  host_socket dns_udp_{SOCK_DGRAM};
};

TEST_F(egress_redirect,
       tcp_to_any_address_lands_on_the_egress_proxy_with_its_original_destination) {
  auto box = start_sandbox(unique_id("egr-tcp"));
  ASSERT_NE(box.runtime, nullptr);
  // Runs in the background: nc waits for an answer the test never sends.
  std::thread guest([&box] { box.shell.run("echo hi | nc -w 2 203.0.113.7 8443", 20000); });
  ASSERT_TRUE(proxy_.readable(10000)) << "the connection never reached the egress proxy port";
  unique_fd accepted(::accept4(proxy_.fd.get(), nullptr, nullptr, SOCK_CLOEXEC));
  ASSERT_TRUE(accepted.valid());
  sockaddr_in original{};
  socklen_t len = sizeof original;
  ASSERT_EQ(::getsockopt(accepted.get(), SOL_IP, SO_ORIGINAL_DST, &original, &len), 0);
  char text[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &original.sin_addr, text, sizeof text);
  EXPECT_STREQ(text, "203.0.113.7");
  EXPECT_EQ(ntohs(original.sin_port), 8443);
  sockaddr_in peer{};
  len = sizeof peer;
  ::getpeername(accepted.get(), reinterpret_cast<sockaddr*>(&peer), &len);
  ::inet_ntop(AF_INET, &peer.sin_addr, text, sizeof text);
  EXPECT_EQ(std::string(text), box.handle.sandbox_address)
    << "the egress proxy knows the sandbox by its source";
  accepted.reset();
  guest.join();
}

TEST_F(egress_redirect,
       dns_to_any_resolver_lands_on_the_egress_proxy_and_other_udp_and_icmp_do_not_leave) {
  auto box = start_sandbox(unique_id("egr-dns"));
  ASSERT_NE(box.runtime, nullptr);
  // A DNS query to an outside resolver: redirected to the egress proxy's DNS port.
  std::thread guest([&box] { box.shell.run("nslookup -timeout=2 example.com 8.8.8.8", 20000); });
  ASSERT_TRUE(dns_udp_.readable(10000))
    << "the DNS query never reached the egress proxy's resolver";
  char query[512];
  sockaddr_in from{};
  socklen_t len = sizeof from;
  ssize_t n =
    ::recvfrom(dns_udp_.fd.get(), query, sizeof query, 0, reinterpret_cast<sockaddr*>(&from), &len);
  EXPECT_GT(n, 12) << "a DNS header and a question";
  guest.join();

  // Other UDP (QUIC's port 443 included), ICMP and the host's own TCP ports
  // never arrive: UDP to the proxy port's number is not redirected, pings fail.
  host_socket udp_other{SOCK_DGRAM};
  EXPECT_EQ(box.shell
                .run("echo x | nc -u -w 1 " + box.handle.host_address + " "
                     + std::to_string(udp_other.port))
                .exit_code
              >= 0,
            true);
  EXPECT_EQ(box.shell.run("echo x | nc -u -w 1 203.0.113.7 443").exit_code >= 0, true);
  EXPECT_FALSE(udp_other.readable(200)) << "a sandbox's UDP reached a host port";
  EXPECT_NE(box.shell.run("ping -c 1 -W 1 " + box.handle.host_address).exit_code, 0);
  EXPECT_NE(box.shell.run("ping -c 1 -W 1 203.0.113.7").exit_code, 0);
  EXPECT_FALSE(proxy_.readable(0)) << "nothing but TCP reaches the proxy port";
  EXPECT_EQ(box.shell.run("cat /proc/sys/net/ipv6/conf/eth0/disable_ipv6").output, "1\n")
    << "IPv6 is off inside the sandbox";
}

} // namespace
} // namespace airlock::worker::testing
