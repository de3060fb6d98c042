#include <gtest/gtest.h>

#include <map>

#include "scheduler/placement.hpp"

namespace airlock::scheduler {
namespace {

worker_view worker(std::string id, uint32_t cpu_free, uint32_t mem_free) {
  worker_view w;
  w.id = std::move(id);
  w.capacity = {4000, 8192, 100'000, 100};
  w.allocated = {4000 - cpu_free, 8192 - mem_free, 0, 0};
  return w;
}

/// Requests as large as the limits: the placements below reserve all of them.
placement_request small() { return {{500, 512, 1024, 0}, {500, 512, 1024, 0}, "base", {}, {}}; }

/// An idle agent's sandbox: limits of a core and 512 MiB, a small request.
placement_request idle_agent() { return {{1000, 512, 2048, 1}, {10, 16, 8, 1}, "base", {}, {}}; }

TEST(placement, rejects_a_spec_when_no_worker_has_capacity) {
  seeded_entropy entropy{1};
  std::vector<worker_view> fleet{worker("wk_a", 100, 8192), worker("wk_b", 4000, 100)};
  auto chosen = place(fleet, small(), {}, entropy);
  ASSERT_FALSE(chosen);
  EXPECT_EQ(chosen.code(), errc::resource_exhausted);
  EXPECT_NE(chosen.error().message.find("500 mCPU"), std::string::npos);
}

TEST(placement, says_to_start_a_worker_when_none_is_registered) {
  seeded_entropy entropy{1};
  auto chosen = place({}, small(), {}, entropy);
  ASSERT_FALSE(chosen);
  EXPECT_NE(chosen.error().message.find("airlockd worker"), std::string::npos);
}

TEST(placement, never_places_on_a_cordoned_worker) {
  seeded_entropy entropy{2};
  auto cordoned = worker("wk_cordoned", 4000, 8192);
  cordoned.schedulable = false;
  std::vector<worker_view> fleet{cordoned, worker("wk_busy", 600, 600)};
  for (int i = 0; i < 50; ++i)
    EXPECT_EQ(*place(fleet, small(), {}, entropy), "wk_busy");
}

TEST(placement, a_sandbox_from_a_snapshot_goes_only_to_the_worker_that_holds_it) {
  seeded_entropy entropy{5};
  std::vector<worker_view> fleet{worker("wk_roomy", 4000, 8192), worker("wk_holder", 600, 600)};
  auto wanted = small();
  wanted.snapshot_worker = "wk_holder";
  for (int i = 0; i < 20; ++i)
    EXPECT_EQ(*place(fleet, wanted, {}, entropy), "wk_holder");
  fleet[1] = worker("wk_holder", 100, 100); // full
  auto refused = place(fleet, wanted, {}, entropy);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.code(), errc::resource_exhausted);
  EXPECT_NE(refused.error().message.find("only worker wk_holder holds the snapshot"),
            std::string::npos)
    << refused.error().message;
  fleet[1].schedulable = false; // lost
  auto away = place(fleet, wanted, {}, entropy);
  ASSERT_FALSE(away);
  EXPECT_NE(away.error().message.find("not ready"), std::string::npos) << away.error().message;
}

TEST(placement, a_microvm_goes_only_to_a_worker_offering_it_and_the_refusal_says_so) {
  seeded_entropy entropy{6};
  auto vms = worker("wk_vms", 600, 600);
  vms.runtimes = {"namespace", "microvm"};
  // A worker naming no runtime offers the namespace one.
  std::vector<worker_view> fleet{worker("wk_roomy", 4000, 8192), vms};
  auto wanted = small();
  wanted.runtime = "microvm";
  for (int i = 0; i < 20; ++i)
    EXPECT_EQ(*place(fleet, wanted, {}, entropy), "wk_vms");
  EXPECT_TRUE(offers_runtime(vms, small())) << "a VM worker takes namespace sandboxes too";
  EXPECT_FALSE(offers_runtime(fleet[0], wanted));
  fleet.pop_back();
  auto refused = place(fleet, wanted, {}, entropy);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.code(), errc::resource_exhausted);
  EXPECT_NE(refused.error().message.find("no ready worker offers the microvm runtime"),
            std::string::npos)
    << refused.error().message;
}

TEST(placement, scoring_every_worker_picks_the_one_with_most_headroom) {
  seeded_entropy entropy{3};
  std::vector<worker_view> fleet{worker("wk_a", 1000, 1000), worker("wk_b", 3000, 6000),
                                 worker("wk_c", 2000, 2000)};
  placement_options options;
  options.sample_k = 0;
  EXPECT_EQ(*place(fleet, small(), options, entropy), "wk_b");
}

TEST(placement, prefers_a_worker_that_has_the_template_cached) {
  seeded_entropy entropy{4};
  auto cached = worker("wk_cached", 2000, 4000);
  cached.templates = {"base"};
  std::vector<worker_view> fleet{cached, worker("wk_cold", 2200, 4200)};
  placement_options options;
  options.sample_k = 0;
  EXPECT_EQ(*place(fleet, small(), options, entropy), "wk_cached");
}

TEST(placement, best_of_two_sampling_spreads_load_yet_favours_free_workers) {
  seeded_entropy entropy{5};
  std::vector<worker_view> fleet{worker("wk_full", 600, 600), worker("wk_half", 2000, 4000),
                                 worker("wk_empty", 4000, 8192)};
  std::map<std::string, int> picks;
  for (int i = 0; i < 3000; ++i)
    ++picks[*place(fleet, small(), {}, entropy)];
  EXPECT_EQ(picks["wk_full"], 0) << "the fullest worker loses every pair it is sampled in";
  EXPECT_GT(picks["wk_empty"], picks["wk_half"]);
  EXPECT_GT(picks["wk_half"], 0);
}

TEST(placement, reserves_requests_so_limits_may_add_up_beyond_capacity) {
  seeded_entropy entropy{6};
  auto host = worker("wk_host", 2000, 8192);
  host.allocated = {};
  int placed = 0;
  for (; placed < 1000; ++placed) {
    auto chosen = place({host}, idle_agent(), {}, entropy);
    if (!chosen)
      break;
    auto need = effective_request(host, idle_agent().requests);
    host.allocated.cpu_millis += need.cpu_millis;
    host.allocated.memory_mb += need.memory_mb;
    host.allocated.sandboxes += 1;
    host.limited.memory_mb += idle_agent().need.memory_mb;
  }
  // 2000 mCPU / 10 mCPU requested = 200, though each may use a whole core.
  EXPECT_EQ(placed, 100) << "the 100-sandbox slot bound of the test worker comes first";
  EXPECT_EQ(host.allocated.cpu_millis, 1000u);
  EXPECT_GT(host.limited.memory_mb, host.capacity.memory_mb);
}

TEST(placement, a_request_left_at_zero_takes_the_workers_default) {
  auto host = worker("wk_host", 4000, 8192);
  host.default_request = {5, 32, 4, 0};
  auto need = effective_request(host, {0, 64, 0, 0});
  EXPECT_EQ(need.cpu_millis, 5u);
  EXPECT_EQ(need.memory_mb, 64u) << "a named request wins over the default";
  EXPECT_EQ(need.disk_mb, 4u);
  host.allocated = {4000 - 4, 0, 0, 0};
  seeded_entropy entropy{7};
  auto chosen = place({host}, {{1000, 512, 0, 1}, {}, "base", {}, {}}, {}, entropy);
  ASSERT_FALSE(chosen) << "the default 5 mCPU does not fit in the 4 left";
}

TEST(placement, the_sum_of_memory_limits_stays_within_the_workers_bound) {
  seeded_entropy entropy{8};
  auto host = worker("wk_host", 4000, 8192);
  host.memory_limit_percent = 200; // limits may reach 16384 MiB
  host.limited.memory_mb = 16'000;
  auto chosen = place({host}, idle_agent(), {}, entropy);
  ASSERT_FALSE(chosen);
  EXPECT_EQ(chosen.code(), errc::resource_exhausted);
  EXPECT_NE(chosen.error().message.find("bound on the sum of memory limits"), std::string::npos)
    << chosen.error().message;
  host.limited.memory_mb = 15'000;
  EXPECT_EQ(*place({host}, idle_agent(), {}, entropy), "wk_host");
}

TEST(placement, a_worker_under_memory_pressure_takes_nothing_and_the_refusal_says_why) {
  seeded_entropy entropy{9};
  auto pressed = worker("wk_pressed", 4000, 8192);
  pressed.memory_pressure = true;
  auto chosen = place({pressed}, idle_agent(), {}, entropy);
  ASSERT_FALSE(chosen);
  EXPECT_NE(chosen.error().message.find("1 worker(s) under memory pressure"), std::string::npos)
    << chosen.error().message;
  std::vector<worker_view> fleet{pressed, worker("wk_calm", 500, 600)};
  for (int i = 0; i < 20; ++i)
    EXPECT_EQ(*place(fleet, idle_agent(), {}, entropy), "wk_calm");
}

} // namespace
} // namespace airlock::scheduler
