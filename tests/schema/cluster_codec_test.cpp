// Round trips of the cluster payloads (schema/cluster.hpp): every field
// survives, and decoders refuse what they cannot trust.
#include <capnp/message.h>
#include <capnp/serialize.h>
#include <gtest/gtest.h>

#include "schema/cluster.capnp.h"
#include "schema/cluster.hpp"

namespace airlock::schema {
namespace {

std::string binary(std::string_view text) { return std::string(text); }

exec_spec sample_exec() {
  exec_spec x;
  x.argv = {"python3", "-c", "print(1)"};
  x.cmd = "";
  x.env = {{"PATH", "/usr/bin"}, {"EMPTY", ""}};
  x.cwd = "/work";
  x.user = "1000";
  x.pty = true;
  x.rows = 50;
  x.cols = 132;
  x.stdin_open = true;
  x.timeout_s = 30;
  x.run_as = {true, 1000, 1000, "/home/user"};
  x.report_start_failure = true;
  x.tag = "server";
  x.request_env = {{"EMPTY", ""}};
  return x;
}

output_batch sample_batch() {
  output_batch x;
  x.segments = {{1, 6, "hello\n"}, {2, 10, binary(std::string_view("\0\xff\x01!", 4))}};
  x.next_offset = 10;
  x.start_offset = 2;
  x.exited = true;
  x.exit_code = 3;
  x.signal = 9;
  return x;
}

file_result sample_file_result() {
  file_result x;
  x.data = binary(std::string_view("\0bytes\0", 7));
  x.written = 77;
  x.entries = {{"a.txt", "file", 12, 0644, 1700000000001, 0, 0, "root", "root", ""},
               {"sub", "dir", 0, 0755, 5, 7, 8, "7", "8", ""}};
  x.truncated = true;
  x.info = {"b", "symlink", 3, 0777, -1, 1, 2, "a", "b", "/c"};
  x.session = 9;
  return x;
}

worker_view sample_worker_view() {
  worker_view x;
  x.registration = {"wk_1",
                    "host-a",
                    "10.0.0.1:7100",
                    "http://10.0.0.1:7071",
                    {4000, 8192, 100000, 64},
                    {"namespace"},
                    "0.1.0",
                    17,
                    "",
                    {2, 16, 8, 0},
                    3200,
                    "",
                    "",
                    ""};
  x.state = "lost";
  x.allocated = {1000, 2048, 4096, 2};
  x.last_heartbeat_at_ms = 1700000000999;
  x.reserved = {500, 512, 1024, 1};
  x.sandbox_ids = {"sb_1", "sb_2"};
  x.limited = {2000, 1024, 4096, 2};
  x.used = {37, 3, 900, 2};
  x.memory_pressure = true;
  x.pressure_reason = "MemAvailable is 100 MiB (minimum 512 MiB)";
  return x;
}

template <class T, class Decode>
void expect_round_trip(const T& value, Decode decode) {
  auto decoded = decode(encode(value));
  ASSERT_TRUE(decoded) << decoded.error().message;
  EXPECT_EQ(*decoded, value);
}

TEST(cluster_codec, round_trips_every_node_and_data_plane_message) {
  expect_round_trip(node_sandbox{"sb_1", sandbox_state::paused}, decode_node_sandbox);
  expect_round_trip(sample_exec(), decode_exec_spec);
  process_view failed;
  failed.process_id = "proc_1";
  failed.state = process_state::failed;
  failed.exit_code = 127;
  failed.signal = 15;
  failed.started_at_ms = 1700000000000;
  failed.ended_at_ms = 1700000000500;
  failed.error = "no such file: python4";
  expect_round_trip(failed, decode_process_view);
  process_view asked;
  asked.process_id = "proc_2";
  asked.state = process_state::running;
  asked.started_at_ms = 1700000000000;
  asked.pid = 42;
  asked.stdout_bytes = 3;
  asked.stderr_bytes = 4;
  asked.pty = true;
  asked.argv = {"/bin/bash", "-l", "-c", "sleep 1"};
  asked.cwd = "/home/user";
  asked.env = {{"A", "1"}, {"EMPTY", ""}};
  asked.tag = "sleeper";
  expect_round_trip(asked, decode_process_view);
  asked.argv.clear();
  asked.cmd = "sleep 1";
  expect_round_trip(asked, decode_process_view);
  expect_round_trip(output_request{"proc_1", 4096, false, true, 65536, 250}, decode_output_request);
  expect_round_trip(output_segment{2, 99, "err"}, decode_output_segment);
  expect_round_trip(sample_batch(), decode_output_batch);
  expect_round_trip(
    file_spec{file_verb::rename, "/a", "/b", std::string("\0x", 2), 5, 6, 0600, true},
    decode_file_spec);
  // A part of a write session: the verb and the session id cross too.
  expect_round_trip(file_spec{file_verb::write_part, "", "", "part", 1048576, 0, 0644, false, 42},
                    decode_file_spec);
  expect_round_trip(file_entry{"x", "other", 1, 2, 3, 4, 5, "6", "7", ""}, decode_file_entry);
  expect_round_trip(
    file_entry{"l", "symlink", 4, 0777, 5, 1000, 1001, "user", "1001", "/home/user"},
    decode_file_entry);
  expect_round_trip(sample_file_result(), decode_file_result);
}

TEST(cluster_codec, round_trips_every_scheduler_message) {
  expect_round_trip(
    placement_request{"sb_9", "base", {250, 256, 512, 1}, {10, 16, 8, 1}, "wk_3", "microvm"},
    decode_placement_request);
  expect_round_trip(registration_ack{"wk_1", std::string(32, '\x01') + std::string(1, '\0'), 750,
                                     "-----BEGIN CERTIFICATE-----\n..."},
                    decode_registration_ack);
  expect_round_trip(sample_worker_view(), decode_worker_view);
}

TEST(cluster_codec, keeps_defaults_and_empty_lists_as_they_were) {
  expect_round_trip(exec_spec{}, decode_exec_spec);
  expect_round_trip(output_batch{}, decode_output_batch);
  expect_round_trip(file_result{}, decode_file_result);
  expect_round_trip(worker_view{}, decode_worker_view);
}

template <class Root>
std::string with_version(uint16_t version) {
  capnp::MallocMessageBuilder message;
  message.initRoot<Root>().setSchemaVersion(version);
  auto words = capnp::messageToFlatArray(message);
  auto bytes = words.asBytes();
  return std::string(reinterpret_cast<const char*>(bytes.begin()), bytes.size());
}

TEST(cluster_codec, refuses_a_message_from_a_newer_schema_version) {
  auto decoded = decode_output_batch(
    with_version<capnp_schema::OutputBatch>(static_cast<uint16_t>(cluster_schema_version + 1)));
  ASSERT_FALSE(decoded);
  EXPECT_EQ(decoded.code(), errc::unsupported_version);
  auto ack = decode_registration_ack(with_version<capnp_schema::RegistrationAck>(0));
  ASSERT_FALSE(ack);
  EXPECT_EQ(ack.code(), errc::corrupt_record);
}

TEST(cluster_codec, rejects_garbage_and_truncated_bytes_as_corrupt) {
  EXPECT_EQ(decode_exec_spec("abc").code(), errc::corrupt_record);
  auto bytes = encode(sample_exec());
  auto truncated = bytes.substr(0, bytes.size() - 8);
  EXPECT_EQ(decode_exec_spec(truncated).code(), errc::corrupt_record);
  std::string garbage(64, '\xff');
  EXPECT_EQ(decode_file_result(garbage).code(), errc::corrupt_record);
}

TEST(cluster_codec, refuses_an_unknown_file_verb_or_sandbox_state) {
  capnp::MallocMessageBuilder message;
  auto root = message.initRoot<capnp_schema::FileSpec>();
  root.setSchemaVersion(cluster_schema_version);
  root.setVerb(static_cast<capnp_schema::FileVerb>(200));
  auto words = capnp::messageToFlatArray(message);
  auto raw = words.asBytes();
  auto decoded =
    decode_file_spec(std::string_view(reinterpret_cast<const char*>(raw.begin()), raw.size()));
  ASSERT_FALSE(decoded);
  EXPECT_EQ(decoded.code(), errc::unsupported_version);

  capnp::MallocMessageBuilder node;
  auto sandbox = node.initRoot<capnp_schema::NodeSandbox>();
  sandbox.setSchemaVersion(cluster_schema_version);
  sandbox.setState(static_cast<capnp_schema::SandboxState>(99));
  auto node_words = capnp::messageToFlatArray(node);
  auto node_raw = node_words.asBytes();
  EXPECT_EQ(decode_node_sandbox(
              std::string_view(reinterpret_cast<const char*>(node_raw.begin()), node_raw.size()))
              .code(),
            errc::unsupported_version);
}

TEST(cluster_codec, a_worker_view_with_a_corrupt_registration_does_not_decode) {
  capnp::MallocMessageBuilder message;
  auto root = message.initRoot<capnp_schema::WorkerView>();
  root.setSchemaVersion(cluster_schema_version);
  std::string junk = "not capnp";
  root.setRegistration(
    capnp::Data::Reader(reinterpret_cast<const kj::byte*>(junk.data()), junk.size()));
  auto words = capnp::messageToFlatArray(message);
  auto raw = words.asBytes();
  auto decoded =
    decode_worker_view(std::string_view(reinterpret_cast<const char*>(raw.begin()), raw.size()));
  ASSERT_FALSE(decoded);
  EXPECT_EQ(decoded.code(), errc::corrupt_record);
}

} // namespace
} // namespace airlock::schema
