#include <gtest/gtest.h>

#include "guest/frame.hpp"
#include "guest/protocol.hpp"

namespace airlock::guest {
namespace {

/// Strips the 4-byte prefix of a single appended frame.
std::string only_payload(const std::string& framed) {
  frame_reader reader;
  EXPECT_TRUE(reader.feed(framed).is_ok());
  auto payload = reader.next();
  EXPECT_TRUE(payload.has_value());
  EXPECT_FALSE(reader.next().has_value());
  return payload.value_or("");
}

TEST(protocol, start_request_survives_a_round_trip) {
  start_request start;
  start.stream_id = 7;
  start.process.argv = {"ls", "-l", std::string("a\0b", 3)};
  start.process.env = {{"PATH", "/bin"}, {"EMPTY", ""}};
  start.process.cwd = "/work";
  start.process.run_as = {true, 65534, 100, "/nonexistent"};
  start.process.pty = true;
  start.process.rows = 40;
  start.process.cols = 120;
  start.process.stdin_open = true;
  start.process.user = "nobody";
  start.process.timeout_s = 9;
  start.window_bytes = 1 << 20;
  std::string framed;
  append_frame(framed, host_message{start});
  auto decoded = decode_host_message(only_payload(framed));
  ASSERT_TRUE(decoded) << decoded.error().message;
  auto& back = std::get<start_request>(*decoded).process;
  EXPECT_EQ(std::get<start_request>(*decoded).stream_id, 7u);
  EXPECT_EQ(back.argv, start.process.argv);
  EXPECT_EQ(back.env, start.process.env);
  EXPECT_EQ(back.cwd, "/work");
  EXPECT_TRUE(back.run_as.set_user);
  EXPECT_EQ(back.run_as.uid, 65534u);
  EXPECT_EQ(back.run_as.gid, 100u);
  EXPECT_TRUE(back.pty);
  EXPECT_EQ(back.rows, 40);
  EXPECT_EQ(back.cols, 120);
  EXPECT_TRUE(back.stdin_open);
  EXPECT_EQ(std::get<start_request>(*decoded).window_bytes, 1u << 20);
  // The worker's own fields stay with the worker.
  EXPECT_EQ(back.user, "");
  EXPECT_EQ(back.timeout_s, 0u);
  EXPECT_EQ(back.run_as.home, "");
}

TEST(protocol, output_frames_from_the_fast_path_decode_like_any_other) {
  std::string bytes(100'000, 'q');
  std::string framed;
  append_output_frame(framed, 3, 2, 9, 4096, bytes);
  auto decoded = decode_guest_message(only_payload(framed));
  ASSERT_TRUE(decoded);
  auto& out = std::get<output_chunk>(*decoded);
  EXPECT_EQ(out.stream_id, 3u);
  EXPECT_EQ(out.fd, 2);
  EXPECT_EQ(out.sequence, 9u);
  EXPECT_EQ(out.offset, 4096u);
  EXPECT_EQ(out.bytes, bytes);
}

TEST(protocol, errors_carry_their_code_by_name) {
  auto payload =
    encode_payload(guest_message{error_reply{0, 5, errc::not_found, "no such file", true}});
  auto decoded = decode_guest_message(payload);
  ASSERT_TRUE(decoded);
  auto& e = std::get<error_reply>(*decoded);
  EXPECT_EQ(e.request_id, 5u);
  EXPECT_EQ(e.code, errc::not_found);
  EXPECT_EQ(e.message, "no such file");
  EXPECT_TRUE(e.ended);
  EXPECT_EQ(errc_from_string("resource_exhausted"), errc::resource_exhausted);
  EXPECT_EQ(errc_from_string("something_new"), errc::internal);
}

TEST(protocol, refresh_and_its_answer_round_trip) {
  std::string entropy(64, '\0');
  for (size_t i = 0; i < entropy.size(); ++i)
    entropy[i] = static_cast<char>(i * 37);
  auto request = decode_host_message(encode_payload(host_message{
    refresh_request{4, entropy, 1'780'000'000'123'456'789, "clone-2", "10.0.0.6/30,10.0.0.5"}}));
  ASSERT_TRUE(request);
  auto& r = std::get<refresh_request>(*request);
  EXPECT_EQ(r.request_id, 4u);
  EXPECT_EQ(r.entropy, entropy);
  EXPECT_EQ(r.realtime_ns, 1'780'000'000'123'456'789);
  EXPECT_EQ(r.hostname, "clone-2");
  EXPECT_EQ(r.network, "10.0.0.6/30,10.0.0.5");
  auto answer = decode_guest_message(encode_payload(guest_message{refreshed{4, -2'500'000, 9}}));
  ASSERT_TRUE(answer);
  EXPECT_EQ(std::get<refreshed>(*answer).request_id, 4u);
  EXPECT_EQ(std::get<refreshed>(*answer).clock_step_ns, -2'500'000);
  EXPECT_EQ(std::get<refreshed>(*answer).stream_id_max, 9u);
}

TEST(protocol, watch_messages_round_trip) {
  auto start = decode_host_message(encode_payload(host_message{watch_start{7, "/data", true}}));
  ASSERT_TRUE(start);
  EXPECT_EQ(std::get<watch_start>(*start).watch_id, 7u);
  EXPECT_EQ(std::get<watch_start>(*start).path, "/data");
  EXPECT_TRUE(std::get<watch_start>(*start).recursive);
  auto stop = decode_host_message(encode_payload(host_message{watch_stop{7}}));
  ASSERT_TRUE(stop);
  EXPECT_EQ(std::get<watch_stop>(*stop).watch_id, 7u);
  watch_events batch{7, {{"sub/f.txt", watch_kind::create}, {"g", watch_kind::chmod}}};
  auto events = decode_guest_message(encode_payload(guest_message{batch}));
  ASSERT_TRUE(events);
  EXPECT_EQ(std::get<watch_events>(*events).watch_id, 7u);
  EXPECT_EQ(std::get<watch_events>(*events).events, batch.events);
  auto ended = decode_guest_message(
    encode_payload(guest_message{error_reply{0, 0, errc::not_found, "removed", true, 7}}));
  ASSERT_TRUE(ended);
  EXPECT_EQ(std::get<error_reply>(*ended).watch_id, 7u);
  EXPECT_EQ(to_string(watch_kind::rename), "rename");
}

TEST(protocol, file_listing_and_stats_round_trip) {
  file_list list{4,
                 {file_info{"a", file_type::directory, 0, 0755, 1, 2, 3, "1", "2", ""},
                  file_info{"b", file_type::symlink, 9, 0777, 0, 0, -1, "root", "4", "/a"}},
                 true};
  auto decoded = decode_guest_message(encode_payload(guest_message{list}));
  ASSERT_TRUE(decoded);
  auto& back = std::get<file_list>(*decoded);
  ASSERT_EQ(back.entries.size(), 2u);
  EXPECT_EQ(back.entries[1].type, file_type::symlink);
  EXPECT_EQ(back.entries[0].mode, 0755u);
  EXPECT_EQ(back.entries[1].mtime_ns, -1);
  EXPECT_EQ(back.entries[1].owner, "root");
  EXPECT_EQ(back.entries[1].group, "4");
  EXPECT_EQ(back.entries[1].symlink_target, "/a");
  EXPECT_EQ(back.entries[0].symlink_target, "");
  EXPECT_TRUE(back.truncated);
  stats_reply stats;
  stats.orphans_reaped = 3;
  stats.stream_buffered_bytes_max = 12345;
  auto s = decode_guest_message(encode_payload(guest_message{stats}));
  ASSERT_TRUE(s);
  EXPECT_EQ(std::get<stats_reply>(*s).orphans_reaped, 3u);
  EXPECT_EQ(std::get<stats_reply>(*s).stream_buffered_bytes_max, 12345u);
}

TEST(protocol, garbage_is_a_corrupt_record_not_a_crash) {
  EXPECT_EQ(decode_host_message("").code(), errc::corrupt_record);
  EXPECT_EQ(decode_host_message("abc").code(), errc::corrupt_record);
  EXPECT_EQ(decode_host_message(std::string(64, '\xff')).code(), errc::corrupt_record);
  auto valid = encode_payload(host_message{ping_request{1}});
  EXPECT_EQ(decode_host_message(valid.substr(0, valid.size() - 8)).code(), errc::corrupt_record);
}

TEST(protocol, a_message_without_a_version_is_refused) {
  auto payload = encode_payload(host_message{ping_request{1}});
  // The envelope's data section starts after the segment table (8 bytes) and
  // the root pointer (8 bytes); schemaVersion is its first 16 bits.
  payload[16] = 0;
  payload[17] = 0;
  EXPECT_EQ(decode_host_message(payload).code(), errc::corrupt_record);
}

} // namespace
} // namespace airlock::guest
