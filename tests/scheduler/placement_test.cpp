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

placement_request small() { return {{500, 512, 1024, 0}, "base"}; }

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

} // namespace
} // namespace airlock::scheduler
