#include <gtest/gtest.h>

#include "guest/guest_network.hpp"

namespace airlock::guest {
namespace {

TEST(guest_network, parses_address_prefix_and_gateway) {
  auto parsed = parse_guest_network("10.200.0.6/30,10.200.0.5");
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->address, 0x0ac80006u);
  EXPECT_EQ(parsed->prefix_length, 30u);
  EXPECT_EQ(parsed->gateway, 0x0ac80005u);
}

TEST(guest_network, takes_a_unicast_mac_after_the_gateway) {
  auto parsed = parse_guest_network("10.200.0.6/30,10.200.0.5,02:1a:2B:3c:4d:5e");
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->gateway, 0x0ac80005u);
  ASSERT_TRUE(parsed->mac);
  EXPECT_EQ(*parsed->mac, (std::array<uint8_t, 6>{0x02, 0x1a, 0x2b, 0x3c, 0x4d, 0x5e}));
  EXPECT_FALSE(parse_guest_network("10.200.0.6/30,10.200.0.5")->mac);
  for (const char* bad :
       {"10.200.0.6/30,10.200.0.5,", "10.200.0.6/30,10.200.0.5,02:1a:2b:3c:4d",
        "10.200.0.6/30,10.200.0.5,02:1a:2b:3c:4d:5g", "10.200.0.6/30,10.200.0.5,02-1a-2b-3c-4d-5e",
        "10.200.0.6/30,10.200.0.5,03:1a:2b:3c:4d:5e", // multicast
        "10.200.0.6/30,10.200.0.9,02:1a:2b:3c:4d:5e"})
    EXPECT_FALSE(parse_guest_network(bad)) << bad;
}

TEST(guest_network, refuses_what_is_not_an_address_in_one_subnet_with_its_gateway) {
  for (const char* bad :
       {"", "1", "10.200.0.6/30", "10.200.0.6,10.200.0.5", "10.200.0.6/33,10.200.0.5",
        "10.200.0.6/0,10.200.0.5", "10.200.0.6/3x,10.200.0.5", "10.200.0.6/30,10.200.0.9",
        "10.200.0.6/30,10.200.0.6", "10.200.0.256/30,10.200.0.5", "10.200.0.6/30,"})
    EXPECT_FALSE(parse_guest_network(bad)) << bad;
}

} // namespace
} // namespace airlock::guest
