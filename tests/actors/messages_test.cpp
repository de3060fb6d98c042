#include <caf/all.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>
#include <gtest/gtest.h>

#include "actors/clock.hpp"
#include "actors/errors.hpp"
#include "actors/messages.hpp"
#include "actors/system_config.hpp"

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

} // namespace
} // namespace airlock::actors
