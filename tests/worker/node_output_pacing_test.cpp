// The node actor's output pacing: a slow reader holds a fast writer back
// without losing a byte, no reader lets old output go, and a reader that
// leaves stops holding the writer back.

#include "tests/worker/node_actor_fixture.hpp"

namespace airlock::worker::test {
namespace {

class output_pacing_test : public node_actor_test {
protected:
  void adjust(worker_options& options) override {
    options.sandbox.output_buffer_bytes = size_t{1} << 20;
    // A reader silent this long is gone. Well above the gap between two
    // reads of this test on a loaded host (at 1 s a busy CI host let a
    // reader be taken for gone), well below proc_wait's 20 s.
    options.sandbox.reader_idle_ms = 4000;
    options.sandbox.first_reader_wait_ms = 1000;
  }
};

constexpr uint64_t pacing_bytes = uint64_t{64} << 20;

TEST_F(output_pacing_test, a_reader_taking_small_reads_gets_every_byte_of_a_fast_writer_in_order) {
  must_create("nd-pace");
  // Random bytes (no pattern could hide a skipped or repeated stretch), kept in
  // a file to compare with, then written out as fast as cat can.
  auto proc = must_exec("nd-pace", shell("mkdir -p /data && head -c " + std::to_string(pacing_bytes)
                                         + " /dev/urandom > /data/pace.bin && cat /data/pace.bin"));
  std::string got;
  got.reserve(pacing_bytes);
  uint64_t offset = 0;
  output_batch last;
  for (int round = 0; round < 100'000 && !last.exited; ++round) {
    auto batch = output("nd-pace", output_request{proc, offset, true, true, 16 * 1024, 5000});
    ASSERT_TRUE(batch) << "at offset " << offset << ": " << batch.error().message;
    for (const auto& segment : batch->segments) {
      ASSERT_EQ(segment.fd, 1);
      got += segment.bytes;
      ASSERT_EQ(segment.end_offset, got.size());
    }
    offset = batch->next_offset;
    last = *batch;
  }
  ASSERT_TRUE(last.exited);
  EXPECT_EQ(last.exit_code, 0);
  EXPECT_EQ(last.signal, 0);
  ASSERT_EQ(got.size(), pacing_bytes);
  auto written = file("nd-pace", fspec(file_verb::read, "/data/pace.bin"));
  ASSERT_TRUE(written) << written.error().message;
  ASSERT_EQ(written->data.size(), pacing_bytes);
  EXPECT_TRUE(got == written->data) << "the bytes read differ from the bytes written";
}

TEST_F(output_pacing_test, without_a_reader_a_fast_writer_completes_and_old_output_is_gone) {
  must_create("nd-unread");
  const uint64_t size = uint64_t{16} << 20;
  auto proc = must_exec("nd-unread", shell("head -c " + std::to_string(size) + " /dev/zero"));
  auto ended = proc_wait("nd-unread", proc);
  ASSERT_EQ(ended.state, schema::process_state::exited);
  EXPECT_EQ(ended.exit_code, 0);
  auto old = output("nd-unread", output_request{proc, 0, true, true, 0, 0});
  ASSERT_FALSE(old);
  EXPECT_EQ(old.code(), errc::gone);
  auto tail = output("nd-unread", output_request{proc, size - (1 << 20), true, true, 0, 0});
  ASSERT_TRUE(tail) << tail.error().message;
  EXPECT_EQ(tail->start_offset, size - (1 << 20));
}

TEST_F(output_pacing_test, a_reader_that_goes_away_stops_holding_the_writer_back) {
  must_create("nd-away");
  const uint64_t size = uint64_t{16} << 20;
  auto proc = must_exec("nd-away", shell("head -c " + std::to_string(size) + " /dev/zero"));
  auto first = output("nd-away", output_request{proc, 0, true, true, 4096, 5000});
  ASSERT_TRUE(first) << first.error().message;
  // While the reader is active, what it has not read is still there.
  auto again = output("nd-away", output_request{proc, first->next_offset, true, true, 4096, 0});
  ASSERT_TRUE(again) << again.error().message;
  // Then it stops reading: the writer is released and ends.
  auto ended = proc_wait("nd-away", proc);
  ASSERT_EQ(ended.state, schema::process_state::exited);
  EXPECT_EQ(ended.exit_code, 0);
  EXPECT_EQ(output("nd-away", output_request{proc, again->next_offset, true, true, 0, 0}).code(),
            errc::gone);
}

} // namespace
} // namespace airlock::worker::test
