// firewall_log against the kernel: a network namespace plays a sandbox behind
// a veth pair, an nftables table logs and drops its packets to a random NFLOG
// group, and the records must reach the audit sink. Needs root; skips
// otherwise or when nfnetlink_log is missing.

#include <arpa/inet.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/support/environment.hpp"
#include "tests/support/wait.hpp"
#include "worker/egress/firewall_log.hpp"

extern char** environ;

namespace airlock::worker::egress {
namespace {

using namespace std::chrono_literals;

constexpr const char* outside_address = "198.51.100.7"; // TEST-NET-2: never routed anywhere

/// Runs argv quietly (stdin from `input` when given); its exit status, or -1.
int run(const std::vector<std::string>& argv, const std::string& input = "") {
  int in[2];
  if (::pipe2(in, O_CLOEXEC) != 0)
    return -1;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], 0);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  std::vector<char*> args;
  for (const auto& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  int spawned = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(in[0]);
  if (spawned == 0 && !input.empty())
    (void)!::write(in[1], input.data(), input.size());
  ::close(in[1]);
  if (spawned != 0)
    return -1;
  int wstatus = 0;
  if (::waitpid(pid, &wstatus, 0) != pid)
    return -1;
  return WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1;
}

/// Collects records; waits for them on a condition with a bound.
class test_sink final : public audit_sink {
public:
  void record(schema::audit_record r) override {
    std::lock_guard lock(mutex_);
    records_.push_back(std::move(r));
    changed_.notify_all();
  }
  /// The first record matching `match`, within 5 s.
  std::optional<schema::audit_record>
  wait_for(const std::function<bool(const schema::audit_record&)>& match) {
    std::unique_lock lock(mutex_);
    std::optional<schema::audit_record> found;
    changed_.wait_for(lock, 5s, [&] {
      for (const auto& r : records_)
        if (match(r))
          found = r;
      return found.has_value();
    });
    return found;
  }
  size_t size() {
    std::lock_guard lock(mutex_);
    return records_.size();
  }

private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<schema::audit_record> records_;
};

/// Waits up to 5 s for `condition`.
bool eventually(const std::function<bool()>& condition) {
  return airlock::test::wait_for(condition, 5s);
}

uint16_t random_group() {
  std::random_device entropy;
  return static_cast<uint16_t>(1000 + entropy() % 59001);
}

std::string dotted(uint32_t host_order) {
  in_addr a{htonl(host_order)};
  char text[INET_ADDRSTRLEN];
  return inet_ntop(AF_INET, &a, text, sizeof(text));
}

class firewall_log_test : public ::testing::Test {
protected:
  void SetUp() override {
    AIRLOCK_REQUIRE_ROOT("network namespaces, nftables and NFLOG");
    if (run({"ip", "-V"}) != 0 || run({"nft", "--version"}) != 0)
      GTEST_SKIP() << "needs the ip and nft tools";
    auto pid = std::to_string(::getpid());
    netns_ = "alfwlog" + pid;
    host_if_ = "alfw" + pid + "h";
    table_ = "airlock_fwlog_" + pid;
    group_ = random_group();
    // One /30 per test process out of 10.213.0.0/16 (no other airlock test uses it).
    uint32_t block = (10u << 24 | 213u << 16) + (static_cast<uint32_t>(::getpid()) % 16384) * 4;
    host_address_ = dotted(block + 1);
    sandbox_address_ = dotted(block + 2);
    spoofed_address_ = dotted(block + 6); // "another sandbox"
    ASSERT_EQ(run({"ip", "netns", "add", netns_}), 0);
    made_netns_ = true;
    ASSERT_EQ(
      run({"ip", "link", "add", host_if_, "type", "veth", "peer", "name", "eth0", "netns", netns_}),
      0);
    made_link_ = true;
    std::string batch =
      "addr add " + host_address_ + "/30 dev " + host_if_ + "\nlink set " + host_if_ + " up\n";
    ASSERT_EQ(run({"ip", "-batch", "-"}, batch), 0);
    std::string inner = "addr add " + sandbox_address_ + "/30 dev eth0\nlink set eth0 up\n"
                        + "link set lo up\nroute add default via " + host_address_ + "\n";
    ASSERT_EQ(run({"ip", "-n", netns_, "-batch", "-"}, inner), 0);
    ifindex_ = static_cast<int>(::if_nametoindex(host_if_.c_str()));
    ASSERT_GT(ifindex_, 0);
    ASSERT_EQ(run({"nft", "-f", "-"}, ruleset()), 0);
    made_table_ = true;
  }

  void TearDown() override {
    log_.reset();
    if (made_table_)
      run({"nft", "delete", "table", "inet", table_});
    if (made_link_)
      run({"ip", "link", "del", host_if_});
    if (made_netns_)
      run({"ip", "netns", "del", netns_});
  }

  /// Like the worker's rules, minus the redirects: spoofed sources, then
  /// protocols other than TCP, logged to our group and dropped.
  std::string ruleset() const {
    std::string g = std::to_string(group_);
    return "table inet " + table_ + " {\n chain pre {\n  type filter hook prerouting priority raw;"
           + " policy accept;\n" + "  iifname \"" + host_if_ + "\" ip saddr != " + sandbox_address_
           + " log group " + g + " prefix \"airlock:spoof\" drop\n" + "  iifname \"" + host_if_
           + "\" meta l4proto { udp, icmp } log group " + g
           + " prefix \"airlock:proto\" drop\n }\n}\n";
  }

  /// Starts the log with a lookup that knows our veth; skips when the kernel
  /// has no nfnetlink_log.
  void start(firewall_log_options options = {}) {
    options.group = group_;
    auto sandbox = std::make_shared<sandbox_view>(
      sandbox_view{"sb_fwlog", "tn_fwlog", "base", sandbox_address_, {}});
    auto lookup = [sandbox, ifindex = ifindex_](int index) -> std::shared_ptr<const sandbox_view> {
      return index == ifindex ? sandbox : nullptr;
    };
    auto started = firewall_log::start(std::move(options), lookup, sink_);
    if (started.code() == errc::unavailable)
      GTEST_SKIP() << "nfnetlink_log unavailable: " << started.error().message;
    ASSERT_TRUE(started.has_value()) << started.error().message;
    log_ = std::move(started).value();
  }

  /// Runs `body` on a thread that has entered the sandbox's network namespace.
  void in_sandbox(const std::function<void()>& body) {
    std::string path = "/run/netns/" + netns_;
    std::string failure;
    std::thread([&] {
      int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0 || ::setns(fd, CLONE_NEWNET) != 0)
        failure = std::strerror(errno);
      if (fd >= 0)
        ::close(fd);
      if (failure.empty())
        body();
    }).join();
    ASSERT_EQ(failure, "");
  }

  void send_udp(uint16_t port) {
    in_sandbox([&] {
      int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
      sockaddr_in to{};
      to.sin_family = AF_INET;
      to.sin_port = htons(port);
      inet_pton(AF_INET, outside_address, &to.sin_addr);
      EXPECT_EQ(::sendto(fd, "quic?", 5, 0, reinterpret_cast<sockaddr*>(&to), sizeof(to)), 5);
      ::close(fd);
    });
  }

  std::shared_ptr<test_sink> sink_ = std::make_shared<test_sink>();
  std::unique_ptr<firewall_log> log_;
  std::string netns_, host_if_, table_;
  std::string host_address_, sandbox_address_, spoofed_address_;
  uint16_t group_ = 0;
  int ifindex_ = 0;
  bool made_netns_ = false, made_link_ = false, made_table_ = false;
};

uint16_t checksum(const uint8_t* data, size_t size) {
  uint32_t sum = 0;
  for (size_t i = 0; i + 1 < size; i += 2)
    sum += static_cast<uint32_t>(data[i] << 8 | data[i + 1]);
  if (size % 2 != 0)
    sum += static_cast<uint32_t>(data[size - 1] << 8);
  while (sum >> 16)
    sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

TEST_F(firewall_log_test, records_a_udp_packet_from_a_sandbox_with_its_owner) {
  start();
  send_udp(443);
  auto r = sink_->wait_for([](const auto& x) { return x.target == "198.51.100.7:443"; });
  ASSERT_TRUE(r.has_value()) << "no record for the UDP packet; received " << log_->received();
  EXPECT_EQ(r->sandbox_id, "sb_fwlog");
  EXPECT_EQ(r->tenant_id, "tn_fwlog");
  EXPECT_EQ(r->kind, "egress");
  EXPECT_EQ(r->decision, "denied");
  EXPECT_EQ(r->reason, "UDP is not allowed (only TCP and DNS leave a sandbox)");
  EXPECT_EQ(r->detail, "firewall: airlock:proto proto=udp src=" + sandbox_address_);
  EXPECT_GT(r->at_ms, 0);
  EXPECT_GE(log_->received(), 1u);
}

TEST_F(firewall_log_test, records_a_packet_with_a_forged_source_as_spoofing) {
  start();
  in_sandbox([&] {
    int fd = ::socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_RAW); // implies IP_HDRINCL
    ASSERT_GE(fd, 0) << std::strerror(errno);
    uint8_t packet[28] = {0x45, 0, 0, 28, 0, 0, 0, 0, 64, IPPROTO_UDP};
    inet_pton(AF_INET, spoofed_address_.c_str(), packet + 12);
    inet_pton(AF_INET, outside_address, packet + 16);
    uint8_t udp[8] = {0x30, 0x39, 0, 53, 0, 8, 0, 0}; // 12345 -> 53
    std::memcpy(packet + 20, udp, sizeof(udp));
    sockaddr_in to{};
    to.sin_family = AF_INET;
    inet_pton(AF_INET, outside_address, &to.sin_addr);
    EXPECT_EQ(::sendto(fd, packet, sizeof(packet), 0, reinterpret_cast<sockaddr*>(&to), sizeof(to)),
              28)
      << std::strerror(errno);
    ::close(fd);
  });
  auto r = sink_->wait_for(
    [](const auto& x) { return x.detail.find("airlock:spoof") != std::string::npos; });
  ASSERT_TRUE(r.has_value()) << "no spoofing record; received " << log_->received();
  EXPECT_EQ(r->reason,
            "source address " + spoofed_address_ + " is not the sandbox's own (spoofing)");
  EXPECT_EQ(r->target, "198.51.100.7:53");
  EXPECT_EQ(r->sandbox_id, "sb_fwlog"); // known by the interface, whatever the source says
}

TEST_F(firewall_log_test, records_an_icmp_echo_by_destination_address) {
  start();
  in_sandbox([&] {
    int fd = ::socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_ICMP);
    ASSERT_GE(fd, 0) << std::strerror(errno);
    uint8_t echo[16] = {8, 0, 0, 0, 0x12, 0x34, 0, 1, 'a', 'i', 'r', 'l', 'o', 'c', 'k', '!'};
    uint16_t sum = checksum(echo, sizeof(echo));
    echo[2] = static_cast<uint8_t>(sum >> 8);
    echo[3] = static_cast<uint8_t>(sum);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    inet_pton(AF_INET, outside_address, &to.sin_addr);
    EXPECT_EQ(::sendto(fd, echo, sizeof(echo), 0, reinterpret_cast<sockaddr*>(&to), sizeof(to)),
              16);
    ::close(fd);
  });
  auto r = sink_->wait_for([](const auto& x) { return x.reason == "ICMP is not allowed"; });
  ASSERT_TRUE(r.has_value()) << "no ICMP record; received " << log_->received();
  EXPECT_EQ(r->target, "198.51.100.7");
  EXPECT_EQ(r->detail,
            "firewall: airlock:proto proto=icmp src=" + sandbox_address_ + " icmp_type=8");
  EXPECT_EQ(r->sandbox_id, "sb_fwlog");
}

TEST_F(firewall_log_test, counts_drops_past_the_rate_limit_without_recording_them) {
  firewall_log_options options;
  options.records_per_second_max = 3;
  options.now_ms = [] { return int64_t{1'700'000'000'000}; }; // one frozen second
  start(options);
  constexpr uint16_t packets = 10;
  for (uint16_t i = 0; i < packets; ++i)
    send_udp(static_cast<uint16_t>(20000 + i));
  ASSERT_TRUE(eventually([&] { return log_->received() >= packets; }))
    << "received " << log_->received();
  ASSERT_TRUE(eventually([&] { return sink_->size() + log_->suppressed() == log_->received(); }));
  EXPECT_EQ(sink_->size(), 3u);
  EXPECT_EQ(log_->suppressed(), log_->received() - 3);
  EXPECT_EQ(log_->overruns(), 0u);
}

TEST_F(firewall_log_test, refuses_a_group_another_socket_already_listens_on) {
  start();
  firewall_log_options options;
  options.group = group_;
  auto second = firewall_log::start(options, nullptr, sink_);
  ASSERT_FALSE(second.has_value());
  EXPECT_EQ(second.code(), errc::already_exists) << second.error().message;
  // The first one still works.
  send_udp(8443);
  EXPECT_TRUE(sink_->wait_for([](const auto& x) { return x.target == "198.51.100.7:8443"; }));
}

} // namespace
} // namespace airlock::worker::egress
