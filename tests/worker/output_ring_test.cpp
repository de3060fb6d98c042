#include <gtest/gtest.h>

#include "worker/output_ring.hpp"

namespace airlock::worker {
namespace {

TEST(output_ring, reads_from_any_offset_inside_the_window) {
  output_ring ring(8);
  ring.append("hello");
  auto all = ring.read(0, 100);
  ASSERT_TRUE(all);
  EXPECT_EQ(*all, "hello");
  EXPECT_EQ(*ring.read(2, 2), "ll");
  EXPECT_EQ(*ring.read(5, 10), "");
  EXPECT_EQ(ring.read(6, 1).code(), errc::invalid_argument);
}

TEST(output_ring, drops_the_oldest_bytes_and_reports_reads_before_the_window) {
  output_ring ring(8);
  ring.append("0123456");
  ring.append("789ab"); // wraps
  EXPECT_EQ(ring.start_offset(), 4u);
  EXPECT_EQ(ring.end_offset(), 12u);
  EXPECT_EQ(*ring.read(4, 100), "456789ab");
  auto gone = ring.read(3, 1);
  ASSERT_FALSE(gone);
  EXPECT_EQ(gone.code(), errc::wrong_state);
  EXPECT_NE(gone.error().message.find("resume from offset 4"), std::string::npos);
}

TEST(output_ring, keeps_only_the_tail_of_an_append_larger_than_the_buffer) {
  output_ring ring(4);
  ring.append("abcdefghij");
  EXPECT_EQ(ring.start_offset(), 6u);
  EXPECT_EQ(*ring.read(6, 100), "ghij");
}

} // namespace
} // namespace airlock::worker
