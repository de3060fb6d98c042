#include <gtest/gtest.h>
#include <unistd.h>

#include "worker/host_capacity.hpp"

namespace airlock::worker {
namespace {

TEST(host_capacity, parses_mem_total_from_meminfo_text) {
  auto total = parse_meminfo_total_mb("MemFree:  100 kB\nMemTotal:       24576000 kB\n");
  ASSERT_TRUE(total);
  EXPECT_EQ(*total, 24000u);
}

TEST(host_capacity, refuses_meminfo_without_mem_total) {
  EXPECT_EQ(parse_meminfo_total_mb("MemFree: 1 kB\n").code(), errc::invalid_argument);
  EXPECT_EQ(parse_meminfo_total_mb("MemTotal: lots\n").code(), errc::invalid_argument);
}

TEST(host_capacity, probes_this_host_minus_the_reserves) {
  capacity_options options;
  options.reserved_memory_mb = 256;
  auto capacity = probe_host_capacity("/", options);
  ASSERT_TRUE(capacity) << capacity.error().message;
  EXPECT_EQ(capacity->cpu_millis, static_cast<uint32_t>(sysconf(_SC_NPROCESSORS_ONLN)) * 1000);
  EXPECT_GT(capacity->memory_mb, 0u);
  EXPECT_EQ(capacity->sandboxes, options.sandboxes_max);
}

TEST(host_capacity, reports_an_unreadable_data_directory) {
  auto capacity = probe_host_capacity("/no/such/airlock/dir");
  ASSERT_FALSE(capacity);
  EXPECT_EQ(capacity.code(), errc::io_error);
  EXPECT_NE(capacity.error().message.find("/no/such/airlock/dir"), std::string::npos);
}

} // namespace
} // namespace airlock::worker
