// The worker's messages are values: CAF serializes them and reads them back,
// guest messages (a std::variant of the guest protocol's values) included.

#include <caf/actor_system.hpp>
#include <gtest/gtest.h>

#include <typeindex>
#include <variant>
#include <vector>

#include "actors/system_config.hpp"
#include "tests/support/caf_round_trip.hpp"
#include "worker/message_types.hpp"
#include "worker/sandbox_actor.hpp"
#include "worker/worker_actor.hpp"

namespace airlock::worker {
namespace {

caf::actor_system_config& announced(caf::actor_system_config& config) {
  add_worker_message_types(config);
  return config;
}

class worker_messages : public ::testing::Test {
protected:
  template <class T>
  T round_trip(const T& value) {
    return airlock::test::caf_round_trip(system, value);
  }

  actors::system_config config;
  caf::actor_system system{announced(config)};
};

TEST_F(worker_messages, guest_events_keep_their_alternative) {
  guest_event output{guest::output_chunk{3, 2, 9, 4096, std::string("a\0b", 3)}};
  auto copy = round_trip(output);
  ASSERT_TRUE(std::holds_alternative<guest::output_chunk>(copy.message));
  const auto& chunk = std::get<guest::output_chunk>(copy.message);
  EXPECT_EQ(chunk.stream_id, 3u);
  EXPECT_EQ(chunk.fd, 2);
  EXPECT_EQ(chunk.offset, 4096u);
  EXPECT_EQ(chunk.bytes, std::string("a\0b", 3));

  guest::file_list list;
  list.request_id = 5;
  list.entries = {
    guest::file_info{"x", guest::file_type::directory, 1, 0755, 0, 0, 9, "root", "root", ""}};
  auto listed = round_trip(guest_event{list});
  ASSERT_TRUE(std::holds_alternative<guest::file_list>(listed.message));
  ASSERT_EQ(std::get<guest::file_list>(listed.message).entries.size(), 1u);
  EXPECT_EQ(std::get<guest::file_list>(listed.message).entries[0].type,
            guest::file_type::directory);
}

TEST_F(worker_messages, requests_and_replies_round_trip) {
  exec_spec spec;
  spec.cmd = "echo hi";
  spec.env = {{"HOME", "/root"}};
  spec.run_as = {true, 1000, 1000, "/home/u"};
  spec.report_start_failure = true;
  spec.timeout_s = 3;
  EXPECT_EQ(round_trip(spec), spec);

  process_view row;
  row.process_id = "proc_1";
  row.state = process_state::failed;
  row.exit_code = 127;
  row.pid = 42;
  row.stdout_bytes = 7;
  row.pty = true;
  row.error = "not found";
  EXPECT_EQ(round_trip(row), row);

  job_result job;
  job.outcome = make_status(errc::timeout, "the guest did not answer");
  job.stream = 4;
  job.file.entries = {
    guest::file_info{"f", guest::file_type::regular, 10, 0644, 1, 2, 3, "1", "2", ""}};
  job.stats.memory_bytes = 99;
  auto job_copy = round_trip(job);
  EXPECT_EQ(job_copy.outcome.code, errc::timeout);
  EXPECT_EQ(job_copy.outcome.message, "the guest did not answer");
  EXPECT_EQ(job_copy.stream, 4u);
  ASSERT_EQ(job_copy.file.entries.size(), 1u);
  EXPECT_EQ(job_copy.file.entries[0].size, 10u);
  EXPECT_EQ(job_copy.stats.memory_bytes, 99u);

  create_sandbox_request create;
  create.id = "sb_1";
  create.limits.memory_mb = 256;
  create.egress.policy.allow = {"example.com"};
  auto create_copy = round_trip(create);
  EXPECT_EQ(create_copy.id, "sb_1");
  EXPECT_EQ(create_copy.limits.memory_mb, 256u);
  EXPECT_EQ(create_copy.egress.policy.allow, create.egress.policy.allow);
}

TEST_F(worker_messages, are_announced_by_name) {
  EXPECT_EQ(config.type_names_by_rtti.count(std::type_index(typeid(guest_event))), 1u);
  EXPECT_EQ(config.type_names_by_rtti.count(std::type_index(typeid(create_sandbox_request))), 1u);
  EXPECT_EQ(config.type_names_by_rtti.count(std::type_index(typeid(exec_spec))), 1u);
}

} // namespace
} // namespace airlock::worker
