#include <caf/all.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>
#include <gtest/gtest.h>

#include "actors/clock.hpp"
#include "actors/credential_actor.hpp"
#include "actors/errors.hpp"
#include "actors/messages.hpp"
#include "actors/sandbox_registry.hpp"
#include "actors/system_config.hpp"
#include "tests/support/caf_round_trip.hpp"

namespace airlock::actors {
namespace {

class messages : public ::testing::Test {
protected:
  system_config config;
  caf::actor_system system{config};
};

TEST_F(messages, operation_records_cross_the_wire_as_their_capnp_bytes) {
  schema::operation_record record;
  record.id = "op_1";
  record.kind = "sandbox.create";
  record.state = schema::operation_state::failed;
  record.error = schema::error_info{"no_capacity", "add a worker"};
  record.step_data = std::string("\0\1\2", 3);
  record.sequence = 9;
  std::vector<char> buffer;
  caf::binary_serializer sink{system, buffer};
  ASSERT_FALSE(sink(record));
  EXPECT_NE(std::string(buffer.begin(), buffer.end()).find("sandbox.create"), std::string::npos);
  schema::operation_record copy;
  caf::binary_deserializer source{system, buffer};
  ASSERT_FALSE(source(copy));
  EXPECT_EQ(copy, record);
}

TEST_F(messages, a_corrupt_record_on_the_wire_is_an_error_not_a_crash) {
  std::vector<char> buffer;
  caf::binary_serializer sink{system, buffer};
  std::string garbage = "definitely not capnp";
  ASSERT_FALSE(sink(garbage));
  schema::operation_record copy;
  caf::binary_deserializer source{system, buffer};
  auto err = source(copy);
  ASSERT_TRUE(err);
  EXPECT_EQ(to_status(err).code, errc::corrupt_record);
}

TEST_F(messages, step_messages_round_trip_through_caf_serialization) {
  step_outcome outcome = step_outcome::fail("bad", "it broke");
  std::vector<char> buffer;
  caf::binary_serializer sink{system, buffer};
  ASSERT_FALSE(sink(outcome));
  step_outcome copy;
  caf::binary_deserializer source{system, buffer};
  ASSERT_FALSE(source(copy));
  EXPECT_EQ(copy.verdict, step_verdict::fail);
  EXPECT_EQ(copy.error_message, "it broke");
}

TEST_F(messages, airlock_errors_keep_their_code_and_sentence_across_caf) {
  caf::error err = make_error(errc::wrong_state, "sandbox sb_1 is paused; resume it first");
  auto back = to_status(err);
  EXPECT_EQ(back.code, errc::wrong_state);
  EXPECT_EQ(back.message, "sandbox sb_1 is paused; resume it first");
  EXPECT_EQ(system.render(err), "wrong_state: sandbox sb_1 is paused; resume it first");
  EXPECT_EQ(to_status(caf::make_error(caf::sec::request_timeout)).code, errc::timeout);
  EXPECT_EQ(to_status(caf::error{}).code, errc::none);
}

TEST(clock, ids_sort_by_creation_time_and_carry_their_prefix) {
  seeded_entropy entropy{1};
  auto first = make_id("op_", 1'000, entropy);
  auto second = make_id("op_", 1'001, entropy);
  EXPECT_EQ(first.rfind("op_", 0), 0u);
  EXPECT_EQ(first.size(), 3u + 12 + 16);
  EXPECT_LT(first, second);
  seeded_entropy replay{1};
  EXPECT_EQ(make_id("op_", 1'000, replay), first) << "a seed must reproduce ids";
}

using airlock::test::caf_round_trip;

TEST_F(messages, registry_messages_are_values_optional_fields_included) {
  sandbox_patch patch;
  patch.metadata = std::map<std::string, std::string>{{"team", "a"}};
  patch.idle_timeout_s = 60;
  auto copy = caf_round_trip(system, patch);
  EXPECT_EQ(copy.metadata, patch.metadata);
  EXPECT_FALSE(copy.egress.has_value());
  EXPECT_EQ(copy.idle_timeout_s, std::optional<uint32_t>{60});
  sandbox_query query;
  query.state = schema::sandbox_state::paused;
  query.metadata = {{"k", "v"}};
  query.limit = 7;
  auto query_copy = caf_round_trip(system, query);
  EXPECT_EQ(query_copy.state, std::optional{schema::sandbox_state::paused});
  EXPECT_EQ(query_copy.metadata, query.metadata);
  EXPECT_EQ(query_copy.limit, 7u);
  sandbox_page page;
  page.items.resize(1);
  page.items[0].id = "sb_1";
  page.next_cursor = "c";
  auto page_copy = caf_round_trip(system, page);
  ASSERT_EQ(page_copy.items.size(), 1u);
  EXPECT_EQ(page_copy.items[0].id, "sb_1");
  EXPECT_EQ(page_copy.next_cursor, "c");
}

TEST_F(messages, a_credential_request_keeps_its_secret_out_of_print) {
  credential_request request;
  request.tenant_id = "t1";
  request.secret = "hunter2";
  EXPECT_EQ(caf_round_trip(system, request).secret, "hunter2");
  auto printed = caf::deep_to_string(request);
  EXPECT_EQ(printed.find("hunter2"), std::string::npos) << printed;
  EXPECT_NE(printed.find("t1"), std::string::npos) << printed;
}

TEST_F(messages, a_status_travels_with_its_code_and_sentence) {
  auto copy = caf_round_trip(system, make_status(errc::not_found, "no sandbox sb_1"));
  EXPECT_EQ(copy.code, errc::not_found);
  EXPECT_EQ(copy.message, "no sandbox sb_1");
}

} // namespace
} // namespace airlock::actors
