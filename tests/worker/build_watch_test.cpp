// A template build's watch: progress as last set, the log read from any
// offset while it grows past what is kept, the cancel flag, and the log
// saved for reads after the build.

#include <gtest/gtest.h>

#include <string>

#include "tests/support/host.hpp"
#include "worker/build_watch.hpp"

namespace airlock::test {
namespace {

using worker::build_watch;

TEST(build_watch, answers_the_last_step_and_the_log_from_an_offset) {
  build_watch watch;
  auto start = watch.read(0);
  EXPECT_TRUE(start.building);
  EXPECT_EQ(start.percent, -1);
  EXPECT_EQ(start.log_end, 0u);
  watch.set_step("layer 1/2", 40, 10, 100);
  watch.append("first\n");
  watch.append("second\n");
  auto at = watch.read(6);
  EXPECT_EQ(at.step, "layer 1/2");
  EXPECT_EQ(at.percent, 40);
  EXPECT_EQ(at.bytes_done, 10u);
  EXPECT_EQ(at.bytes_total, 100u);
  EXPECT_EQ(at.log_offset, 6u);
  EXPECT_EQ(at.log, "second\n");
  EXPECT_EQ(at.log_end, 13u);
  EXPECT_EQ(watch.read(1000).log, "") << "past the end: nothing, not an error";
  EXPECT_EQ(watch.read(1000).log_offset, 13u);
  watch.set_step("seal", 250);
  EXPECT_EQ(watch.read(0).percent, 100) << "percent is clamped";
  EXPECT_EQ(watch.tail(7), "second\n");
}

TEST(build_watch, keeps_the_tail_of_a_long_log_and_offsets_keep_counting) {
  build_watch watch;
  const std::string line(1000, 'x');
  const size_t lines = build_watch::log_bytes_max / 1000 + 100;
  for (size_t i = 0; i < lines; ++i)
    watch.append(line);
  auto at = watch.read(0);
  EXPECT_EQ(at.log_end, lines * 1000);
  EXPECT_EQ(at.log_offset, at.log_end - build_watch::log_bytes_max)
    << "an offset before what is kept starts at the oldest byte kept";
  EXPECT_EQ(at.log.size(), build_watch::chunk_bytes_max) << "one read answers a chunk";
}

TEST(build_watch, cancel_is_seen_through_the_flag_it_lends) {
  build_watch watch;
  const auto* flag = watch.cancel_flag();
  EXPECT_FALSE(flag->load());
  watch.cancel();
  EXPECT_TRUE(flag->load());
  EXPECT_TRUE(watch.cancelled());
}

TEST(build_watch, a_saved_log_reads_back_as_an_ended_build) {
  temp_dir dir("airlock-build-log");
  build_watch watch;
  watch.append("# from minimal\n$ echo hi\nhi\n");
  const auto path = worker::build_log_path(dir.path(), "tpl_a_v1");
  EXPECT_EQ(path.filename(), "tpl_a_v1.build.log");
  ASSERT_TRUE(watch.save_log(path));
  auto saved = worker::read_saved_log(path, 15);
  ASSERT_TRUE(saved) << saved.error().message;
  EXPECT_FALSE(saved->building);
  EXPECT_EQ(saved->log, "$ echo hi\nhi\n");
  EXPECT_EQ(saved->log_end, 28u);
  auto missing = worker::read_saved_log(worker::build_log_path(dir.path(), "none"), 0);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, errc::not_found);
}

} // namespace
} // namespace airlock::test
