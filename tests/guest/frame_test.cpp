#include <gtest/gtest.h>

#include "guest/frame.hpp"

namespace airlock::guest {
namespace {

TEST(frame_reader, reassembles_frames_split_across_arbitrary_chunks) {
  std::string stream =
    encode_frame("hello") + encode_frame("") + encode_frame(std::string(1000, 'x'));
  frame_reader reader;
  std::vector<std::string> frames;
  for (size_t i = 0; i < stream.size(); i += 3) {
    ASSERT_TRUE(reader.feed(std::string_view(stream).substr(i, 3)).is_ok());
    while (auto frame = reader.next())
      frames.push_back(*frame);
  }
  ASSERT_EQ(frames.size(), 3u);
  EXPECT_EQ(frames[0], "hello");
  EXPECT_EQ(frames[1], "");
  EXPECT_EQ(frames[2], std::string(1000, 'x'));
  EXPECT_EQ(reader.buffered_bytes(), 0u);
}

TEST(frame_reader, refuses_an_oversized_frame_before_buffering_its_payload) {
  frame_reader reader(16);
  auto frame = encode_frame(std::string(17, 'y'));
  auto fed = reader.feed(frame.substr(0, 4));
  EXPECT_EQ(fed.code, errc::resource_exhausted);
  EXPECT_FALSE(reader.next().has_value());
  EXPECT_EQ(reader.feed("more").code, errc::resource_exhausted) << "a broken stream recovered";
}

TEST(frame_reader, accepts_a_frame_exactly_at_the_limit) {
  frame_reader reader(16);
  ASSERT_TRUE(reader.feed(encode_frame(std::string(16, 'z'))).is_ok());
  EXPECT_EQ(reader.next(), std::string(16, 'z'));
}

} // namespace
} // namespace airlock::guest
