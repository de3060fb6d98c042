#include <capnp/message.h>
#include <capnp/serialize.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "schema/auth.hpp"
#include "schema/operation.capnp.h"
#include "schema/operation.hpp"
#include "schema/sandbox.hpp"
#include "schema/schema_lock.hpp"
#include "schema/worker.hpp"

namespace airlock::schema {
namespace {

operation_record sample_operation() {
  operation_record r;
  r.id = "op_0000000000010123456789abcdef";
  r.kind = "sandbox.create";
  r.target_id = "sb_1";
  r.tenant_id = "t1";
  r.state = operation_state::failed;
  r.error = error_info{"no_capacity", "no worker has room; add a worker or retry"};
  r.result_json = "";
  r.created_at_ms = 1700000000000;
  r.updated_at_ms = 1700000000500;
  r.idempotency_key = "key-1";
  r.params_json = R"({"template":"base"})";
  r.step = 3;
  r.step_started = true;
  r.step_data = std::string("\0\x01\xff binary", 10);
  r.cancel_requested = true;
  r.deadline_ms = 1700000900000;
  r.attempts = 2;
  r.sequence = 42;
  return r;
}

std::string with_version(uint16_t version) {
  capnp::MallocMessageBuilder message;
  auto root = message.initRoot<capnp_schema::OperationRecord>();
  root.setSchemaVersion(version);
  root.setId("op_x");
  auto words = capnp::messageToFlatArray(message);
  auto bytes = words.asBytes();
  return std::string(reinterpret_cast<const char*>(bytes.begin()), bytes.size());
}

TEST(operation_codec, round_trips_every_field) {
  auto record = sample_operation();
  auto decoded = decode_operation(encode(record));
  ASSERT_TRUE(decoded) << decoded.error().message;
  EXPECT_EQ(*decoded, record);
}

TEST(operation_codec, keeps_absent_error_absent) {
  operation_record record;
  record.id = "op_1";
  auto decoded = decode_operation(encode(record));
  ASSERT_TRUE(decoded);
  EXPECT_FALSE(decoded->error.has_value());
}

TEST(operation_codec, rejects_bytes_of_invalid_length_as_corrupt) {
  EXPECT_EQ(decode_operation("").code(), errc::corrupt_record);
  EXPECT_EQ(decode_operation("abc").code(), errc::corrupt_record);
}

TEST(operation_codec, rejects_garbage_as_corrupt_without_crashing) {
  for (int seed = 0; seed < 200; ++seed) {
    std::string bytes(64, '\0');
    for (size_t i = 0; i < bytes.size(); ++i)
      bytes[i] = static_cast<char>((seed * 131 + i * 17 + (i * i) % 251) & 0xff);
    auto decoded = decode_operation(bytes);
    if (!decoded) {
      EXPECT_TRUE(decoded.code() == errc::corrupt_record
                  || decoded.code() == errc::unsupported_version);
    }
  }
  auto valid = encode(sample_operation());
  auto truncated = valid.substr(0, valid.size() / 2 / 8 * 8);
  EXPECT_EQ(decode_operation(truncated).code(), errc::corrupt_record);
}

TEST(operation_codec, refuses_a_record_from_a_newer_schema_version) {
  auto decoded = decode_operation(with_version(operation_schema_version + 1));
  ASSERT_FALSE(decoded);
  EXPECT_EQ(decoded.code(), errc::unsupported_version);
  EXPECT_NE(decoded.error().message.find("upgrade"), std::string::npos);
}

TEST(operation_codec, refuses_a_record_without_a_schema_version) {
  EXPECT_EQ(decode_operation(with_version(0)).code(), errc::corrupt_record);
}

TEST(operation_codec, refuses_an_unknown_state_enumerant) {
  capnp::MallocMessageBuilder message;
  auto root = message.initRoot<capnp_schema::OperationRecord>();
  root.setSchemaVersion(operation_schema_version);
  root.setState(static_cast<capnp_schema::OperationState>(77));
  auto words = capnp::messageToFlatArray(message);
  auto bytes = words.asBytes();
  auto decoded =
    decode_operation(std::string(reinterpret_cast<const char*>(bytes.begin()), bytes.size()));
  EXPECT_EQ(decoded.code(), errc::unsupported_version);
}

TEST(operation_state_names, parse_what_to_string_prints) {
  for (auto state : {operation_state::pending, operation_state::running, operation_state::succeeded,
                     operation_state::failed, operation_state::cancelled})
    EXPECT_EQ(parse_operation_state(to_string(state)), state);
  EXPECT_FALSE(parse_operation_state("done").has_value());
  EXPECT_FALSE(is_terminal(operation_state::running));
  EXPECT_TRUE(is_terminal(operation_state::cancelled));
}

TEST(sandbox_codec, round_trips_spec_and_state) {
  sandbox_record r;
  r.id = "sb_1";
  r.tenant_id = "t";
  r.state = sandbox_state::paused;
  r.spec.template_name = "base";
  r.spec.cpu_millis = 500;
  r.spec.cpu_request_millis = 5;
  r.spec.memory_request_mb = 16;
  r.spec.disk_request_mb = 8;
  r.spec.env = {{"A", "1"}, {"B", "two"}};
  r.spec.metadata = {{"owner", "ci"}};
  r.spec.egress.profile = egress_profile::allowlist;
  r.spec.egress.allow = {"api.example.com", "*.pypi.org:443"};
  r.spec.from_checkpoint = "ckpt_1";
  r.worker_id = "wk_1";
  r.data_url = "http://127.0.0.1:7071";
  r.error_reason = error_info{"oom", "out of memory"};
  r.created_at_ms = 1;
  r.updated_at_ms = 2;
  r.last_active_at_ms = 3;
  r.last_operation_id = "op_1";
  auto decoded = decode_sandbox(encode(r));
  ASSERT_TRUE(decoded) << decoded.error().message;
  EXPECT_EQ(*decoded, r);
  EXPECT_EQ(parse_sandbox_state("suspended"), sandbox_state::suspended);
  EXPECT_EQ(parse_egress_profile("open"), egress_profile::open);
}

TEST(snapshot_codec, round_trips_every_field_and_refuses_garbage) {
  snapshot_record r;
  r.id = "ckpt_1";
  r.kind = snapshot_kind::suspend;
  r.sandbox_id = "sb_1";
  r.tenant_id = "t";
  r.template_name = "base";
  r.template_version = "3";
  r.runtime = "namespace";
  r.worker_id = "wk_1";
  r.memory_persisted = true;
  r.size_bytes = uint64_t{5} << 32;
  r.label = "before the migration";
  r.automatic = true;
  r.created_at_ms = 42;
  r.complete = true;
  auto decoded = decode_snapshot(encode(r));
  ASSERT_TRUE(decoded) << decoded.error().message;
  EXPECT_EQ(*decoded, r);
  EXPECT_EQ(to_string(snapshot_kind::checkpoint), "checkpoint");
  EXPECT_FALSE(decode_snapshot("not a snapshot"));
}

TEST(worker_codec, round_trips_registration_and_heartbeat) {
  worker_registration reg{"wk_1",
                          "host-a",
                          "10.0.0.1:7100",
                          "http://10.0.0.1:7071",
                          resources{2000, 24000, 100000, 200},
                          {"namespace", "microvm"},
                          "0.1.0",
                          123,
                          "-----BEGIN PUBLIC KEY-----\n...",
                          resources{2, 16, 8, 0},
                          3200,
                          "-----BEGIN CERTIFICATE-----\n...",
                          "3045abcd",
                          std::string(64, '5')};
  auto decoded = decode_worker_registration(encode(reg));
  ASSERT_TRUE(decoded);
  EXPECT_EQ(*decoded, reg);
  worker_heartbeat beat{"wk_1",
                        7,
                        456,
                        resources{500, 1024, 2048, 3},
                        {"sb_1", "sb_2"},
                        1500,
                        resources{2000, 1024, 4096, 3},
                        resources{40, 3, 700, 3},
                        true,
                        "memory pressure full avg10 is 12%"};
  auto beat_decoded = decode_worker_heartbeat(encode(beat));
  ASSERT_TRUE(beat_decoded);
  EXPECT_EQ(*beat_decoded, beat);
}

TEST(api_key_codec, round_trips_a_hashed_key) {
  api_key_record key{"0123456789abcdef",  "admin", std::string(32, '\x7f'),
                     api_key_role::admin, 99,      false};
  auto decoded = decode_api_key(encode(key));
  ASSERT_TRUE(decoded);
  EXPECT_EQ(*decoded, key);
}

std::string committed_lock() {
  std::ifstream in(AIRLOCK_SCHEMA_LOCK_PATH);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(schema_lock, no_committed_field_was_renumbered_retyped_or_removed) {
  auto committed = parse_schema_lock(committed_lock());
  ASSERT_FALSE(committed.empty()) << "schema/schema.lock is missing or empty";
  auto compiled = parse_schema_lock(describe_compiled_schema());
  for (const auto& [member, line] : committed) {
    auto now = compiled.find(member);
    ASSERT_NE(now, compiled.end())
      << member << " was removed; ordinals only grow: deprecate it instead";
    EXPECT_EQ(now->second, line) << member << " changed ordinal or type; add a new field instead";
  }
}

TEST(schema_lock, every_compiled_field_is_in_the_committed_lock) {
  auto committed = parse_schema_lock(committed_lock());
  for (const auto& [member, line] : parse_schema_lock(describe_compiled_schema()))
    EXPECT_TRUE(committed.count(member))
      << line << " is new: run build/tests/schema/schema_lock_dump > schema/schema.lock";
}

TEST(schema_lock, detects_a_renumbered_field_in_a_description) {
  // The check above compares lines; prove a renumbering changes the line.
  auto compiled = parse_schema_lock(describe_compiled_schema());
  auto line = compiled.at("OperationRecord.kind");
  EXPECT_NE(line.find("@2 :text"), std::string::npos) << line;
}

} // namespace
} // namespace airlock::schema
