#include "worker/egress/address_filter.hpp"

#include <gtest/gtest.h>

namespace airlock::worker::egress {
namespace {

uint32_t addr(std::string_view text) {
  auto a = parse_ipv4(text);
  EXPECT_TRUE(a) << text;
  return a.value_or(0);
}

TEST(address_filter, parses_and_formats_ipv4) {
  EXPECT_EQ(parse_ipv4("1.2.3.4"), 0x01020304u);
  EXPECT_EQ(parse_ipv4("255.255.255.255"), 0xffffffffu);
  for (std::string_view bad : {"", "1.2.3", "1.2.3.4.5", "256.1.1.1", "01.2.3.4", "1.2.3.4 ",
                               "a.b.c.d", "1..2.3", "-1.2.3.4", "1.2.3.4/8"})
    EXPECT_EQ(parse_ipv4(bad), std::nullopt) << bad;
  EXPECT_EQ(format_ipv4(0xa9fea9feu), "169.254.169.254");
}

TEST(address_filter, parses_cidr_ranges_and_clears_host_bits) {
  auto r = parse_cidr("10.1.2.3/8");
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, (cidr{0x0a000000u, 8}));
  EXPECT_EQ(*parse_cidr("1.2.3.4"), (cidr{0x01020304u, 32}));
  EXPECT_EQ(*parse_cidr("0.0.0.0/0"), (cidr{0, 0}));
  for (std::string_view bad : {"10.0.0.0/33", "10.0.0.0/", "10.0.0/8", "10.0.0.0/x", "x"}) {
    auto parsed = parse_cidr(bad);
    EXPECT_FALSE(parsed) << bad;
    EXPECT_EQ(parsed.code(), errc::invalid_argument);
  }
  EXPECT_TRUE(parse_cidr("0.0.0.0/0")->contains(0xdeadbeefu));
  EXPECT_TRUE(parse_cidr("10.0.0.0/8")->contains(addr("10.255.0.1")));
  EXPECT_FALSE(parse_cidr("10.0.0.0/8")->contains(addr("11.0.0.1")));
}

TEST(address_filter, refuses_private_loopback_metadata_and_reserved_addresses) {
  address_filter filter;
  for (std::string_view denied :
       {"0.0.0.0", "0.1.2.3", "10.0.0.1", "100.64.0.1", "100.127.255.255", "127.0.0.1",
        "127.255.255.254", "169.254.169.254", "172.16.0.1", "172.31.255.255", "192.0.0.8",
        "192.168.1.1", "198.18.0.1", "198.19.255.255", "224.0.0.1", "239.255.255.250", "240.0.0.1",
        "255.255.255.255"}) {
    auto reason = filter.refuse_reason(addr(denied));
    ASSERT_TRUE(reason) << denied;
    EXPECT_EQ(reason->rfind(std::string(denied), 0), 0u) << *reason;
  }
  EXPECT_EQ(*filter.refuse_reason(addr("169.254.169.254")),
            "169.254.169.254 is in 169.254.0.0/16, the link-local/metadata range");
  for (std::string_view allowed :
       {"1.1.1.1", "8.8.8.8", "100.63.255.255", "100.128.0.0", "172.15.255.255", "172.32.0.0",
        "192.0.2.1", "198.51.100.7", "203.0.113.9", "198.20.0.1", "223.255.255.255"})
    EXPECT_EQ(filter.refuse_reason(addr(allowed)), std::nullopt) << allowed;
}

TEST(address_filter, allowed_private_ranges_open_only_themselves) {
  address_filter filter({*parse_cidr("10.20.0.0/16")});
  EXPECT_EQ(filter.refuse_reason(addr("10.20.3.4")), std::nullopt);
  EXPECT_TRUE(filter.refuse_reason(addr("10.21.0.1")));
  EXPECT_TRUE(filter.refuse_reason(addr("127.0.0.1")));
}

TEST(address_filter, extra_denied_ranges_win_over_allowed_ones) {
  address_filter filter({*parse_cidr("10.0.0.0/8")},
                        {*parse_cidr("10.200.0.0/16"), *parse_cidr("203.0.113.128/25")});
  EXPECT_EQ(filter.refuse_reason(addr("10.1.0.1")), std::nullopt);
  auto pool = filter.refuse_reason(addr("10.200.0.5"));
  ASSERT_TRUE(pool);
  EXPECT_NE(pool->find("10.200.0.0/16"), std::string::npos) << *pool;
  EXPECT_TRUE(filter.refuse_reason(addr("203.0.113.200")));
  EXPECT_EQ(filter.refuse_reason(addr("203.0.113.5")), std::nullopt);
}

} // namespace
} // namespace airlock::worker::egress
