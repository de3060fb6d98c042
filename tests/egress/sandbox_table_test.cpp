#include "worker/egress/sandbox_table.hpp"

#include <thread>

#include <gtest/gtest.h>

#include "worker/egress/address_filter.hpp"

namespace airlock::worker::egress {
namespace {

sandbox_view view(std::string id, std::string address, schema::egress_profile profile) {
  return {std::move(id), "tn_1", "base", std::move(address), {profile, {}}};
}

TEST(sandbox_table, finds_sandboxes_by_source_address) {
  sandbox_table table;
  table.put(view("sb_a", "10.200.0.2", schema::egress_profile::open));
  table.put(view("sb_b", "10.200.0.3", schema::egress_profile::none));
  EXPECT_EQ(table.size(), 2u);
  auto a = table.find(*parse_ipv4("10.200.0.2"));
  ASSERT_TRUE(a);
  EXPECT_EQ(a->sandbox_id, "sb_a");
  EXPECT_EQ(table.find(*parse_ipv4("10.200.0.4")), nullptr);
  table.remove("10.200.0.2");
  table.remove("not an address");
  EXPECT_EQ(table.find(*parse_ipv4("10.200.0.2")), nullptr);
  EXPECT_EQ(table.size(), 1u);
}

TEST(sandbox_table, a_policy_update_leaves_earlier_snapshots_unchanged) {
  sandbox_table table;
  table.put(view("sb_a", "10.200.0.2", schema::egress_profile::none));
  auto before = table.find(*parse_ipv4("10.200.0.2"));
  table.put(view("sb_a", "10.200.0.2", schema::egress_profile::open));
  auto after = table.find(*parse_ipv4("10.200.0.2"));
  ASSERT_TRUE(before && after);
  EXPECT_EQ(before->policy.profile, schema::egress_profile::none);
  EXPECT_EQ(after->policy.profile, schema::egress_profile::open);
  EXPECT_EQ(table.size(), 1u);
}

TEST(sandbox_table, readers_and_writers_run_concurrently) {
  sandbox_table table;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> wrong{0};
  std::thread reader([&] {
    while (!stop)
      if (auto v = table.find(*parse_ipv4("10.200.0.9")))
        wrong += v->sandbox_id != "sb_x";
  });
  for (int i = 0; i < 2000; ++i) {
    table.put(view("sb_x", "10.200.0.9", schema::egress_profile::open));
    if (i % 2 == 0)
      table.remove("10.200.0.9");
  }
  stop = true;
  reader.join();
  EXPECT_EQ(table.size(), 1u);
  EXPECT_EQ(wrong.load(), 0u);
}

} // namespace
} // namespace airlock::worker::egress
