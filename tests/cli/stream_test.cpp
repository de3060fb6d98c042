// The pieces exec's output goes through: the SSE parser and base64.

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cli/base64.hpp"
#include "cli/sse.hpp"

namespace airlock::cli {
namespace {

/// Feeds `chunks` in order and collects the events.
std::vector<sse_event> parse_chunks(const std::vector<std::string>& chunks,
                                    sse_parser_options options = {}) {
  sse_parser parser(options);
  std::vector<sse_event> events;
  for (const auto& chunk : chunks) {
    auto fed = parser.feed(chunk, [&events](const sse_event& e) { events.push_back(e); });
    EXPECT_TRUE(fed.is_ok()) << fed.message;
  }
  return events;
}

const std::string stream = ": heartbeat\n"
                           "event: stdout\n"
                           "id: 6\n"
                           "data: {\"data\":\"hello \"}\n"
                           "\n"
                           "event: stderr\r\n"
                           "data: line one\r\n"
                           "data: line two\r\n"
                           "id: 14\r\n"
                           "\r\n"
                           "data: plain\r"
                           "\r";

TEST(cli_sse, parses_events_with_ids_comments_and_multi_line_data) {
  auto events = parse_chunks({stream});
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].event, "stdout");
  EXPECT_EQ(events[0].id, "6");
  EXPECT_EQ(events[0].data, "{\"data\":\"hello \"}");
  EXPECT_EQ(events[1].event, "stderr");
  EXPECT_EQ(events[1].data, "line one\nline two");
  EXPECT_EQ(events[1].id, "14");
  EXPECT_EQ(events[2].event, "message"); // no event: field
  EXPECT_EQ(events[2].data, "plain");
  EXPECT_EQ(events[2].id, "14"); // the last id persists
}

TEST(cli_sse, gives_the_same_events_however_the_bytes_are_split) {
  auto whole = parse_chunks({stream});
  for (size_t size : {1u, 2u, 3u, 7u}) {
    std::vector<std::string> chunks;
    for (size_t at = 0; at < stream.size(); at += size)
      chunks.push_back(stream.substr(at, size));
    auto split = parse_chunks(chunks);
    ASSERT_EQ(split.size(), whole.size()) << size;
    for (size_t i = 0; i < whole.size(); ++i) {
      EXPECT_EQ(split[i].event, whole[i].event);
      EXPECT_EQ(split[i].data, whole[i].data);
      EXPECT_EQ(split[i].id, whole[i].id);
    }
  }
}

TEST(cli_sse, treats_a_crlf_split_between_reads_as_one_line_end) {
  // "\r" ends a chunk and "\n" starts the next: one line end, not a blank line.
  auto events = parse_chunks({"data: a\r", "\ndata: b\r", "\n\r", "\n"});
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].data, "a\nb");
}

TEST(cli_sse, dispatches_nothing_for_an_event_without_data) {
  sse_parser parser;
  int count = 0;
  auto fed =
    parser.feed("event: exit\nid: 9\n\n:comment\n\n", [&count](const sse_event&) { ++count; });
  EXPECT_TRUE(fed.is_ok());
  EXPECT_EQ(count, 0);
  EXPECT_EQ(parser.last_event_id(), "9");
}

TEST(cli_sse, takes_a_field_without_colon_and_a_value_without_space) {
  auto events = parse_chunks({"data\ndata:x\n\n"});
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].data, "\nx");
}

TEST(cli_sse, fails_an_event_larger_than_its_limit) {
  sse_parser parser(sse_parser_options{16});
  auto fed = parser.feed("data: " + std::string(32, 'x'), [](const sse_event&) {});
  EXPECT_EQ(fed.code, errc::too_large);
}

TEST(cli_base64, matches_the_rfc_4648_vectors) {
  const std::pair<std::string, std::string> vectors[] = {{"", ""},
                                                         {"f", "Zg=="},
                                                         {"fo", "Zm8="},
                                                         {"foo", "Zm9v"},
                                                         {"foob", "Zm9vYg=="},
                                                         {"fooba", "Zm9vYmE="},
                                                         {"foobar", "Zm9vYmFy"}};
  for (const auto& [plain, encoded] : vectors) {
    EXPECT_EQ(base64_encode(plain), encoded);
    EXPECT_EQ(base64_decode(encoded), plain);
  }
}

TEST(cli_base64, round_trips_every_byte_value) {
  std::string bytes;
  for (int i = 0; i < 256; ++i)
    bytes += static_cast<char>(i);
  EXPECT_EQ(base64_decode(base64_encode(bytes)), bytes);
  EXPECT_EQ(base64_decode("Zm9vYg"), "foob"); // unpadded is accepted
}

TEST(cli_base64, rejects_what_no_encoder_produces) {
  for (const char* bad : {"Z", "Zm9v!", "Zg=", "Z===", "=Zg=", "Zm 9v", "Zm9v\n", "Zg==Zg=="})
    EXPECT_FALSE(base64_decode(bad).has_value()) << bad;
}

} // namespace
} // namespace airlock::cli
