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

TEST(memory_pressure, reads_mem_available_and_the_full_stall_average) {
  auto available = parse_meminfo_available_mb("MemTotal: 1 kB\nMemAvailable:   2097152 kB\n");
  ASSERT_TRUE(available);
  EXPECT_EQ(*available, 2048u);
  EXPECT_EQ(parse_meminfo_available_mb("MemTotal: 1 kB\n").code(), errc::invalid_argument);
  auto full = parse_memory_pressure_full_avg10(
    "some avg10=31.50 avg60=2.00 avg300=0.10 total=1\nfull avg10=12.25 avg60=1.00 avg300=0.00 "
    "total=9\n");
  ASSERT_TRUE(full);
  EXPECT_DOUBLE_EQ(*full, 12.25) << "the full line, not the some line";
  EXPECT_FALSE(parse_memory_pressure_full_avg10("some avg10=1.00\n"));
}

TEST(memory_pressure, is_judged_by_stalls_where_psi_exists_and_by_available_memory_always) {
  pressure_options options;
  options.full_avg10_percent_max = 10;
  options.available_mb_min = 512;
  EXPECT_FALSE(judge_memory_pressure(2.0, 8000, options).under);
  auto stalled = judge_memory_pressure(25.0, 8000, options);
  EXPECT_TRUE(stalled.under);
  EXPECT_NE(stalled.reason.find("full avg10"), std::string::npos) << stalled.reason;
  auto short_of_memory = judge_memory_pressure(std::nullopt, 100, options);
  EXPECT_TRUE(short_of_memory.under) << "without PSI, MemAvailable decides";
  EXPECT_NE(short_of_memory.reason.find("MemAvailable is 100 MiB"), std::string::npos);
  EXPECT_FALSE(judge_memory_pressure(std::nullopt, 4096, options).under);
}

TEST(memory_pressure, this_host_can_be_probed) {
  auto now = probe_memory_pressure({});
  ASSERT_TRUE(now) << now.error().message;
  EXPECT_GT(now->available_mb, 0u);
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
