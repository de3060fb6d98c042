// firewall_log without the kernel: NFLOG messages built by hand, parsed and
// turned into audit records.

#include <arpa/inet.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_log.h>
#include <linux/netlink.h>

#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "worker/egress/firewall_log.hpp"

namespace airlock::worker::egress {
namespace {

/// An NFULNL_MSG_PACKET message with the attributes firewall_log reads.
class nflog_message {
public:
  nflog_message() {
    bytes_.resize(NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(nfgenmsg)));
    nlmsghdr header{};
    header.nlmsg_type = (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_PACKET;
    std::memcpy(bytes_.data(), &header, sizeof(header));
  }
  nflog_message& attribute(uint16_t type, const void* data, size_t size) {
    size_t at = bytes_.size();
    bytes_.resize(at + NLA_ALIGN(NLA_HDRLEN + size));
    nlattr header{static_cast<uint16_t>(NLA_HDRLEN + size), type};
    std::memcpy(bytes_.data() + at, &header, sizeof(header));
    std::memcpy(bytes_.data() + at + NLA_HDRLEN, data, size);
    return *this;
  }
  nflog_message& prefix(const std::string& text) {
    return attribute(NFULA_PREFIX, text.c_str(), text.size() + 1);
  }
  nflog_message& indev(uint32_t ifindex) {
    uint32_t be = htonl(ifindex);
    return attribute(NFULA_IFINDEX_INDEV, &be, sizeof(be));
  }
  nflog_message& hw_protocol(uint16_t ethertype) {
    nfulnl_msg_packet_hdr hdr{htons(ethertype), 0, 0};
    return attribute(NFULA_PACKET_HDR, &hdr, sizeof(hdr));
  }
  nflog_message& payload(const std::vector<uint8_t>& packet) {
    return attribute(NFULA_PAYLOAD, packet.data(), packet.size());
  }
  std::vector<uint8_t> bytes() const {
    // nlmsg_len in host order, written byte by byte (the header starts the vector).
    auto length = static_cast<uint32_t>(bytes_.size());
    uint8_t raw[sizeof(length)];
    std::memcpy(raw, &length, sizeof(length));
    std::vector<uint8_t> out(raw, raw + sizeof(raw));
    out.insert(out.end(), bytes_.begin() + sizeof(length), bytes_.end());
    return out;
  }

private:
  std::vector<uint8_t> bytes_;
};

std::vector<uint8_t> ipv4(uint8_t protocol, const char* src, const char* dst,
                          std::vector<uint8_t> transport, uint16_t fragment_offset = 0) {
  std::vector<uint8_t> p(20);
  p[0] = 0x45;
  uint16_t total = htons(static_cast<uint16_t>(20 + transport.size()));
  std::memcpy(&p[2], &total, 2);
  uint16_t frag = htons(fragment_offset);
  std::memcpy(&p[6], &frag, 2);
  p[8] = 64;
  p[9] = protocol;
  inet_pton(AF_INET, src, &p[12]);
  inet_pton(AF_INET, dst, &p[16]);
  p.insert(p.end(), transport.begin(), transport.end());
  return p;
}

std::vector<uint8_t> ports(uint16_t src, uint16_t dst) {
  return {uint8_t(src >> 8), uint8_t(src), uint8_t(dst >> 8), uint8_t(dst), 0, 8, 0, 0};
}

schema::audit_record record_of(const nflog_message& m, const sandbox_view* sandbox = nullptr) {
  auto bytes = m.bytes();
  auto drop = parse_nflog_packet(bytes);
  EXPECT_TRUE(drop.has_value()) << (drop ? "" : drop.error().message);
  if (!drop)
    return {};
  return describe_drop(*drop, sandbox, 1234);
}

TEST(firewall_log_parse, reads_prefix_interface_and_payload_of_a_packet_message) {
  auto packet = ipv4(IPPROTO_UDP, "10.0.0.2", "198.51.100.7", ports(40000, 443));
  auto bytes =
    nflog_message().hw_protocol(0x0800).prefix("airlock:proto").indev(17).payload(packet).bytes();
  auto drop = parse_nflog_packet(bytes);
  ASSERT_TRUE(drop.has_value()) << drop.error().message;
  EXPECT_EQ(drop->prefix, "airlock:proto");
  EXPECT_EQ(drop->in_ifindex, 17);
  EXPECT_EQ(drop->hw_protocol, 0x0800);
  EXPECT_EQ(drop->payload, std::string(packet.begin(), packet.end()));
}

TEST(firewall_log_parse, describes_a_udp_drop_with_the_sandbox_and_the_destination_port) {
  sandbox_view sandbox{"sb_1", "tn_1", "base", "10.0.0.2", {}};
  auto r = record_of(nflog_message()
                       .prefix("airlock:proto")
                       .indev(3)
                       .payload(ipv4(IPPROTO_UDP, "10.0.0.2", "198.51.100.7", ports(40000, 443))),
                     &sandbox);
  EXPECT_EQ(r.at_ms, 1234);
  EXPECT_EQ(r.sandbox_id, "sb_1");
  EXPECT_EQ(r.tenant_id, "tn_1");
  EXPECT_EQ(r.kind, "egress");
  EXPECT_EQ(r.decision, "denied");
  EXPECT_EQ(r.reason, "UDP is not allowed (only TCP and DNS leave a sandbox)");
  EXPECT_EQ(r.target, "198.51.100.7:443");
  EXPECT_EQ(r.detail, "firewall: airlock:proto proto=udp src=10.0.0.2");
}

TEST(firewall_log_parse, describes_an_icmp_echo_by_address_and_type) {
  auto r =
    record_of(nflog_message()
                .prefix("airlock:proto")
                .payload(ipv4(IPPROTO_ICMP, "10.0.0.2", "198.51.100.7", {8, 0, 0, 0, 0, 1, 0, 1})));
  EXPECT_EQ(r.reason, "ICMP is not allowed");
  EXPECT_EQ(r.target, "198.51.100.7");
  EXPECT_EQ(r.detail, "firewall: airlock:proto proto=icmp src=10.0.0.2 icmp_type=8");
  EXPECT_EQ(r.sandbox_id, "");
}

TEST(firewall_log_parse, names_the_forged_source_of_a_spoofed_packet) {
  auto r = record_of(nflog_message()
                       .prefix("airlock:spoof")
                       .payload(ipv4(IPPROTO_TCP, "10.0.0.6", "198.51.100.7", ports(1234, 80))));
  EXPECT_EQ(r.reason, "source address 10.0.0.6 is not the sandbox's own (spoofing)");
  EXPECT_EQ(r.target, "198.51.100.7:80");
  EXPECT_EQ(r.detail, "firewall: airlock:spoof proto=tcp src=10.0.0.6");
}

TEST(firewall_log_parse, reports_ipv6_behind_extension_headers_with_its_port) {
  std::vector<uint8_t> p(40);
  p[0] = 0x60;
  p[6] = IPPROTO_HOPOPTS;
  inet_pton(AF_INET6, "fd00::2", &p[8]);
  inet_pton(AF_INET6, "2001:db8::1", &p[24]);
  std::vector<uint8_t> hop = {IPPROTO_UDP, 0, 1, 4, 0, 0, 0, 0};
  p.insert(p.end(), hop.begin(), hop.end());
  auto udp = ports(5000, 53);
  p.insert(p.end(), udp.begin(), udp.end());
  auto r = record_of(nflog_message().hw_protocol(0x86dd).prefix("airlock:spoof").payload(p));
  EXPECT_EQ(r.reason, "IPv6 is not allowed");
  EXPECT_EQ(r.target, "[2001:db8::1]:53");
  EXPECT_EQ(r.detail, "firewall: airlock:spoof proto=udp src=fd00::2");
}

TEST(firewall_log_parse, reports_host_and_forwarding_drops_in_words) {
  auto tcp = ipv4(IPPROTO_TCP, "10.0.0.2", "10.0.0.1", ports(1234, 7070));
  auto host = record_of(nflog_message().prefix("airlock:host").payload(tcp));
  EXPECT_EQ(host.reason, "the host's own services are unreachable");
  EXPECT_EQ(host.target, "10.0.0.1:7070");
  auto fwd = record_of(nflog_message().prefix("airlock:fwd").payload(tcp));
  EXPECT_EQ(fwd.reason,
            "routing through the host is not allowed (only the egress proxy is reachable)");
  auto other = record_of(nflog_message().prefix("someone-else").payload(tcp));
  EXPECT_EQ(other.reason, "dropped by the host firewall (rule prefix \"someone-else\")");
}

TEST(firewall_log_parse, blames_the_missing_egress_proxy_for_dropped_tcp_and_dns) {
  // Without an egress proxy the worker's rules send even TCP and DNS to the proto drop.
  for (auto [protocol, port] : {std::pair{IPPROTO_TCP, 443}, std::pair{IPPROTO_UDP, 53}}) {
    auto r = record_of(nflog_message()
                         .prefix("airlock:proto")
                         .payload(ipv4(static_cast<uint8_t>(protocol), "10.0.0.2", "198.51.100.7",
                                       ports(4000, static_cast<uint16_t>(port)))));
    EXPECT_EQ(r.reason, "no egress proxy runs: nothing leaves a sandbox");
  }
}

TEST(firewall_log_parse, omits_the_port_of_a_later_fragment) {
  auto r = record_of(
    nflog_message()
      .prefix("airlock:proto")
      .payload(ipv4(IPPROTO_UDP, "10.0.0.2", "198.51.100.7", {1, 2, 3, 4, 5, 6, 7, 8}, 185)));
  EXPECT_EQ(r.target, "198.51.100.7");
  EXPECT_EQ(r.reason, "UDP is not allowed (only TCP and DNS leave a sandbox)");
}

TEST(firewall_log_parse, describes_a_non_ip_frame_by_its_ethertype) {
  auto r = record_of(nflog_message()
                       .hw_protocol(0x0806)
                       .prefix("airlock:spoof")
                       .payload({0x00, 0x01, 0x08, 0x00, 6, 4, 0, 1}));
  EXPECT_EQ(r.reason, "non-IP traffic is not allowed");
  EXPECT_EQ(r.target, "ethertype 0x0806");
  EXPECT_EQ(r.detail, "firewall: airlock:spoof proto=non-ip ethertype=0x0806");
}

TEST(firewall_log_parse, names_other_ip_protocols) {
  auto r = record_of(nflog_message()
                       .prefix("airlock:proto")
                       .payload(ipv4(IPPROTO_GRE, "10.0.0.2", "198.51.100.7", {0, 0, 0, 0})));
  EXPECT_EQ(r.reason, "IP protocol gre is not allowed (only TCP and DNS leave a sandbox)");
  EXPECT_EQ(r.target, "198.51.100.7");
}

TEST(firewall_log_parse, rejects_an_attribute_longer_than_its_message) {
  auto bytes = nflog_message().prefix("airlock:proto").bytes();
  nlattr bad{500, NFULA_PAYLOAD};
  size_t at = bytes.size();
  bytes.resize(at + sizeof(bad));
  std::memcpy(bytes.data() + at, &bad, sizeof(bad));
  auto length = static_cast<uint32_t>(bytes.size());
  std::memcpy(bytes.data(), &length, sizeof(length));
  auto drop = parse_nflog_packet(bytes);
  ASSERT_FALSE(drop.has_value());
  EXPECT_EQ(drop.code(), errc::invalid_argument);
}

TEST(firewall_log_parse, rejects_a_message_that_is_not_a_packet) {
  auto bytes = nflog_message().prefix("airlock:proto").bytes();
  uint16_t config = (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_CONFIG;
  std::memcpy(bytes.data() + offsetof(nlmsghdr, nlmsg_type), &config, sizeof(config));
  EXPECT_EQ(parse_nflog_packet(bytes).code(), errc::invalid_argument);
  EXPECT_EQ(parse_nflog_packet(std::span<const uint8_t>(bytes.data(), 8)).code(),
            errc::invalid_argument);
}

TEST(firewall_log_parse, start_refuses_group_zero_and_a_missing_sink) {
  struct null_sink final : audit_sink {
    void record(schema::audit_record) override {}
  };
  auto no_group = firewall_log::start({}, nullptr, std::make_shared<null_sink>());
  EXPECT_EQ(no_group.code(), errc::invalid_argument);
  firewall_log_options options;
  options.group = 4242;
  EXPECT_EQ(firewall_log::start(options, nullptr, nullptr).code(), errc::invalid_argument);
}

} // namespace
} // namespace airlock::worker::egress
