#include <gtest/gtest.h>

#include "worker/output_log.hpp"

namespace airlock::worker {
namespace {

std::string joined(const output_slice& slice) {
  std::string out;
  for (const auto& piece : slice.pieces)
    out +=
      std::to_string(piece.fd) + ":" + piece.bytes + "@" + std::to_string(piece.end_offset) + " ";
  return out;
}

TEST(output_log, interleaves_both_streams_in_arrival_order_with_combined_offsets) {
  output_log log(64);
  log.append(1, "out1\n");
  log.append(2, "err1\n");
  log.append(1, "out2\n");
  auto all = log.read(0, 100, true, true);
  ASSERT_TRUE(all);
  EXPECT_EQ(joined(*all), "1:out1\n@5 2:err1\n@10 1:out2\n@15 ");
  EXPECT_EQ(all->next_offset, 15u);
  auto middle = log.read(7, 100, true, true);
  ASSERT_TRUE(middle);
  EXPECT_EQ(joined(*middle), "2:r1\n@10 1:out2\n@15 ");
}

TEST(output_log, filters_skip_unwanted_bytes_but_move_the_next_offset) {
  output_log log(64);
  log.append(1, "out1\n");
  log.append(2, "err1\n");
  log.append(1, "out2\n");
  log.append(2, "err2\n");
  auto out = log.read(0, 100, true, false);
  ASSERT_TRUE(out);
  EXPECT_EQ(joined(*out), "1:out1\n@5 1:out2\n@15 ");
  EXPECT_EQ(out->next_offset, 20u);
  auto err = log.read(0, 100, false, true);
  ASSERT_TRUE(err);
  EXPECT_EQ(joined(*err), "2:err1\n@10 2:err2\n@20 ");
  auto none = log.read(3, 100, false, false);
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->pieces.empty());
  EXPECT_EQ(none->next_offset, 20u);
}

TEST(output_log, max_bytes_cuts_a_piece_and_the_next_read_continues_there) {
  output_log log(64);
  log.append(1, "abcdef");
  log.append(2, "XY");
  auto first = log.read(0, 4, true, true);
  ASSERT_TRUE(first);
  EXPECT_EQ(joined(*first), "1:abcd@4 ");
  EXPECT_EQ(first->next_offset, 4u);
  auto second = log.read(first->next_offset, 3, true, true);
  ASSERT_TRUE(second);
  EXPECT_EQ(joined(*second), "1:ef@6 2:X@7 ");
  EXPECT_EQ(log.read(9, 1, true, true).code(), errc::invalid_argument);
}

TEST(output_log, dropped_bytes_are_gone_and_the_message_names_where_to_resume) {
  output_log log(8);
  log.append(1, "0123");
  log.append(2, "4567");
  log.append(1, "89");
  EXPECT_EQ(log.start_offset(), 2u);
  auto gone = log.read(1, 10, true, true);
  ASSERT_FALSE(gone);
  EXPECT_EQ(gone.code(), errc::gone);
  EXPECT_NE(gone.error().message.find("resume from offset 2"), std::string::npos);
  auto rest = log.read(2, 10, true, true);
  ASSERT_TRUE(rest);
  EXPECT_EQ(joined(*rest), "1:23@4 2:4567@8 1:89@10 ");
}

TEST(output_log, per_stream_reads_use_stream_offsets) {
  output_log log(8);
  log.append(1, "0123");
  log.append(2, "abcd");
  log.append(1, "45");
  EXPECT_EQ(log.stream_end(1), 6u);
  EXPECT_EQ(log.stream_start(1), 2u);
  EXPECT_EQ(*log.read_stream(1, 2, 100), "2345");
  EXPECT_EQ(*log.read_stream(1, 3, 2), "34");
  EXPECT_EQ(*log.read_stream(2, 1, 100), "bcd");
  auto dropped = log.read_stream(1, 1, 100);
  ASSERT_FALSE(dropped);
  EXPECT_EQ(dropped.code(), errc::wrong_state);
  EXPECT_EQ(log.read_stream(2, 5, 1).code(), errc::invalid_argument);
}

TEST(output_log, alternating_streams_beyond_runs_max_drop_the_oldest_runs) {
  output_log log(1024, 4);
  for (int i = 0; i < 10; ++i)
    log.append(i % 2 == 0 ? 1 : 2, "x");
  EXPECT_EQ(log.start_offset(), 6u);
  EXPECT_EQ(log.read(5, 10, true, true).code(), errc::gone);
  auto tail = log.read(6, 10, true, true);
  ASSERT_TRUE(tail);
  EXPECT_EQ(tail->pieces.size(), 4u);
}

} // namespace
} // namespace airlock::worker
