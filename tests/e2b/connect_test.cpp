// Unit tests of the Connect protocol pieces and envd's messages: what the e2b
// SDK sends (JSON bodies copied in shape from its requests) decodes, and what
// the server writes is what the SDK reads.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "e2b/connect.hpp"
#include "e2b/envd/filesystem/filesystem.pb.h"
#include "e2b/envd/process/process.pb.h"
#include "e2b/envd_methods.hpp"

namespace airlock::e2b {
namespace {

using nlohmann::json;

TEST(connect_content_type, names_the_codec_and_whether_the_body_streams) {
  auto unary = parse_content_type("application/json");
  ASSERT_TRUE(unary);
  EXPECT_EQ(unary->codec, connect_codec::json);
  EXPECT_FALSE(unary->streaming);
  auto stream = parse_content_type("Application/Connect+Proto; charset=utf-8");
  ASSERT_TRUE(stream);
  EXPECT_EQ(stream->codec, connect_codec::proto);
  EXPECT_TRUE(stream->streaming);
  EXPECT_EQ(content_type_of(*stream), "application/connect+proto");
  EXPECT_EQ(content_type_of({connect_codec::json, false}), "application/json");
  auto other = parse_content_type("text/plain");
  ASSERT_FALSE(other);
  EXPECT_EQ(other.code(), errc::invalid_argument);
  EXPECT_NE(other.error().message.find("application/connect+json"), std::string::npos);
}

TEST(connect_envelope, writes_the_flag_and_a_big_endian_length) {
  auto bytes = envelope(0, std::string(258, 'x'));
  ASSERT_EQ(bytes.size(), 5u + 258u);
  EXPECT_EQ(bytes[0], 0);
  EXPECT_EQ(bytes[1], 0);
  EXPECT_EQ(bytes[2], 0);
  EXPECT_EQ(bytes[3], 1);
  EXPECT_EQ(bytes[4], 2);
}

TEST(connect_envelope, reader_returns_whole_envelopes_however_the_bytes_arrive) {
  auto stream = envelope(0, "first") + envelope(0, "") + end_of_stream(std::nullopt);
  envelope_reader reader(1024);
  std::vector<envelope_frame> frames;
  for (char byte : stream) {
    reader.feed(std::string_view(&byte, 1));
    for (;;) {
      auto frame = reader.next();
      ASSERT_TRUE(frame);
      if (!*frame)
        break;
      frames.push_back(std::move(**frame));
    }
  }
  ASSERT_EQ(frames.size(), 3u);
  EXPECT_EQ(frames[0].payload, "first");
  EXPECT_EQ(frames[1].payload, "");
  EXPECT_EQ(frames[2].flags, envelope_end_of_stream);
  EXPECT_EQ(json::parse(frames[2].payload), json::object());
  EXPECT_FALSE(reader.partial());
}

TEST(connect_envelope, reader_refuses_a_length_over_the_limit_before_its_bytes_come) {
  envelope_reader reader(16);
  reader.feed(envelope(0, std::string(17, 'x')).substr(0, 5));
  auto frame = reader.next();
  ASSERT_FALSE(frame);
  EXPECT_EQ(frame.code(), errc::too_large);
}

TEST(connect_envelope, reader_holds_a_partial_envelope) {
  envelope_reader reader(64);
  reader.feed(envelope(0, "truncated").substr(0, 8));
  auto frame = reader.next();
  ASSERT_TRUE(frame);
  EXPECT_FALSE(*frame);
  EXPECT_TRUE(reader.partial());
}

TEST(connect_end_of_stream, carries_the_error_as_json) {
  auto bytes = end_of_stream(connect_error{connect_code::not_found, "no process 7"});
  envelope_reader reader(1024);
  reader.feed(bytes);
  auto frame = reader.next();
  ASSERT_TRUE(frame && *frame);
  EXPECT_EQ((*frame)->flags, envelope_end_of_stream);
  auto body = json::parse((*frame)->payload);
  EXPECT_EQ(body["error"]["code"], "not_found");
  EXPECT_EQ(body["error"]["message"], "no process 7");
}

TEST(connect_errors, map_airlock_failures_to_connect_codes_and_statuses) {
  EXPECT_EQ(connect_code_of(errc::not_found), connect_code::not_found);
  EXPECT_EQ(connect_code_of(errc::already_exists), connect_code::already_exists);
  EXPECT_EQ(connect_code_of(errc::too_large), connect_code::resource_exhausted);
  EXPECT_EQ(connect_code_of(errc::io_error), connect_code::internal);
  EXPECT_EQ(http_status_of(connect_code::not_found), 404u);
  EXPECT_EQ(http_status_of(connect_code::unauthenticated), 401u);
  EXPECT_EQ(http_status_of(connect_code::unimplemented), 501u);
  EXPECT_EQ(to_string(connect_code::deadline_exceeded), "deadline_exceeded");
  auto body = json::parse(
    unary_error_body(to_connect_error(make_status(errc::invalid_argument, "path is empty"))));
  EXPECT_EQ(body, (json{{"code", "invalid_argument"}, {"message", "path is empty"}}));
}

TEST(connect_timeout, takes_at_most_ten_digits) {
  auto ms = parse_timeout_ms("60000");
  ASSERT_TRUE(ms);
  EXPECT_EQ(*ms, 60000u);
  EXPECT_TRUE(parse_timeout_ms("9999999999"));
  for (auto bad : {"", "12345678901", "-1", "1a", " 5"})
    EXPECT_FALSE(parse_timeout_ms(bad)) << bad;
}

TEST(envd_messages, decode_a_start_request_as_the_sdk_sends_it) {
  // The shape of commands.run("echo hi", {envs}) with a field a newer SDK might add.
  std::string body = R"({"process":{"cmd":"/bin/bash","args":["-l","-c","echo hi"],)"
                     R"("envs":{"A":"1"},"cwd":"/home/user"},"stdin":false,"newField":1})";
  process::StartRequest request;
  ASSERT_TRUE(decode_message(connect_codec::json, body, request));
  EXPECT_EQ(request.process().cmd(), "/bin/bash");
  ASSERT_EQ(request.process().args_size(), 3);
  EXPECT_EQ(request.process().args(2), "echo hi");
  EXPECT_EQ(request.process().envs().at("A"), "1");
  EXPECT_TRUE(request.process().has_cwd());
  EXPECT_TRUE(request.has_stdin());
  EXPECT_FALSE(request.stdin());
  EXPECT_FALSE(request.has_pty());
}

TEST(envd_messages, decode_signals_by_name_and_input_as_base64) {
  process::SendSignalRequest signal;
  ASSERT_TRUE(decode_message(connect_codec::json,
                             R"({"process":{"pid":42},"signal":"SIGNAL_SIGKILL"})", signal));
  EXPECT_EQ(signal.process().pid(), 42u);
  EXPECT_EQ(signal.signal(), process::SIGNAL_SIGKILL);
  process::SendInputRequest input;
  ASSERT_TRUE(decode_message(connect_codec::json,
                             R"({"process":{"pid":42},"input":{"stdin":"aGkK"}})", input));
  EXPECT_EQ(input.input().stdin(), "hi\n");
}

TEST(envd_messages, refuse_a_body_that_is_not_the_message) {
  process::StartRequest request;
  auto bad = decode_message(connect_codec::json, "{\"process\":", request);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.code, errc::invalid_argument);
  EXPECT_NE(bad.message.find("process.StartRequest"), std::string::npos);
  auto wrong_type = decode_message(connect_codec::json, R"({"process":[1,2]})", request);
  EXPECT_FALSE(wrong_type);
  EXPECT_FALSE(decode_message(connect_codec::proto, "\xff\xff\xff", request));
}

TEST(envd_messages, encode_events_as_the_sdk_reads_them) {
  process::StartResponse started;
  started.mutable_event()->mutable_start()->set_pid(42);
  auto start_json = encode_message(connect_codec::json, started);
  ASSERT_TRUE(start_json);
  EXPECT_EQ(json::parse(*start_json), json::parse(R"({"event":{"start":{"pid":42}}})"));

  process::StartResponse output;
  output.mutable_event()->mutable_data()->set_stdout("hi\n");
  EXPECT_EQ(json::parse(*encode_message(connect_codec::json, output)),
            json::parse(R"({"event":{"data":{"stdout":"aGkK"}}})"));

  process::StartResponse ended;
  auto* end = ended.mutable_event()->mutable_end();
  end->set_exit_code(3);
  end->set_exited(true);
  end->set_status("exit status 3");
  EXPECT_EQ(
    json::parse(*encode_message(connect_codec::json, ended)),
    json::parse(R"({"event":{"end":{"exitCode":3,"exited":true,"status":"exit status 3"}}})"));

  filesystem::EntryInfo entry;
  entry.set_name("a.txt");
  entry.set_type(filesystem::FILE_TYPE_FILE);
  entry.set_size(4);
  entry.set_mode(0644);
  auto entry_json = json::parse(*encode_message(connect_codec::json, entry));
  EXPECT_EQ(entry_json["type"], "FILE_TYPE_FILE");
  EXPECT_EQ(entry_json["size"], "4"); // int64 as a string, which the SDK accepts
  EXPECT_EQ(entry_json["mode"], 420);
}

TEST(envd_messages, round_trip_in_the_binary_codec) {
  filesystem::ListDirResponse listing;
  auto* entry = listing.add_entries();
  entry->set_path("/home/user/a");
  entry->set_type(filesystem::FILE_TYPE_DIRECTORY);
  (*entry->mutable_metadata())["k"] = "v";
  auto bytes = encode_message(connect_codec::proto, listing);
  ASSERT_TRUE(bytes);
  filesystem::ListDirResponse back;
  ASSERT_TRUE(decode_message(connect_codec::proto, *bytes, back));
  ASSERT_EQ(back.entries_size(), 1);
  EXPECT_EQ(back.entries(0).path(), "/home/user/a");
  EXPECT_EQ(back.entries(0).metadata().at("k"), "v");
}

TEST(envd_methods, are_found_by_path_with_their_kind_and_messages) {
  auto start = find_envd_method("/process.Process/Start");
  ASSERT_TRUE(start);
  EXPECT_EQ(start->kind, rpc_kind::server_stream);
  EXPECT_EQ(start->new_request()->GetDescriptor()->full_name(), "process.StartRequest");
  EXPECT_EQ(start->new_response()->GetDescriptor()->full_name(), "process.StartResponse");
  auto stat = find_envd_method("/filesystem.Filesystem/Stat");
  ASSERT_TRUE(stat);
  EXPECT_EQ(stat->kind, rpc_kind::unary);
  EXPECT_EQ(find_envd_method("/process.Process/StreamInput")->kind, rpc_kind::client_stream);
  EXPECT_EQ(find_envd_method("/filesystem.Filesystem/WatchDir")->kind, rpc_kind::server_stream);
  for (auto path : {"", "/", "/process.Process", "/process.Process/Nope", "/nope.Nope/Start",
                    "process.Process/Start"})
    EXPECT_FALSE(find_envd_method(path)) << path;
  // Process: List Connect Start Update StreamInput SendInput SendSignal CloseStdin;
  // Filesystem: Stat MakeDir Move ListDir Remove WatchDir and three watcher calls.
  EXPECT_EQ(envd_methods().size(), 17u);
}

} // namespace
} // namespace airlock::e2b
