// The cluster messages through CAF's own serialization, as a remote node
// sends and receives them: Cap'n Proto bytes inside, every type registered
// by name so the receiving side can decode it.
#include <caf/all.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>
#include <gtest/gtest.h>

#include "actors/cluster_protocol.hpp"
#include "actors/errors.hpp"
#include "actors/system_config.hpp"
#include "tests/support/caf_round_trip.hpp"

namespace airlock::actors {
namespace {

class cluster_messages : public ::testing::Test {
protected:
  template <class T>
  T round_trip(const T& value) {
    return airlock::test::caf_round_trip(system, value);
  }

  system_config config;
  caf::actor_system system{config};
};

TEST_F(cluster_messages, data_plane_values_survive_caf_serialization) {
  exec_spec spec;
  spec.argv = {"sh", "-c", "echo hi"};
  spec.env = {{"A", "1"}};
  spec.pty = true;
  spec.rows = 40;
  EXPECT_EQ(round_trip(spec), spec);
  output_batch batch;
  batch.segments = {{2, 3, std::string("\0\1\2", 3)}};
  batch.next_offset = 3;
  batch.exited = true;
  batch.signal = 9;
  EXPECT_EQ(round_trip(batch), batch);
  file_result files;
  files.entries = {{"a", "file", 1, 0644, 2, 0, 0, "root", "root", ""}};
  files.info = {"b", "dir", 0, 0755, 3, 7, 8, "7", "8", ""};
  EXPECT_EQ(round_trip(files), files);
  std::vector<node_sandbox> list{{"sb_1", schema::sandbox_state::running},
                                 {"sb_2", schema::sandbox_state::paused}};
  EXPECT_EQ(round_trip(list), list);
}

TEST_F(cluster_messages, scheduler_values_survive_caf_serialization) {
  worker_view view;
  view.registration.id = "wk_1";
  view.registration.capacity = {1, 2, 3, 4};
  view.state = "ready";
  view.sandbox_ids = {"sb_1"};
  std::vector<worker_view> views{view, view};
  EXPECT_EQ(round_trip(views), views);
  registration_ack ack{"wk_1", std::string(32, '\0'), 250, "chain"};
  EXPECT_EQ(round_trip(ack), ack);
  placement_request request{"sb_1", "base", {10, 20, 30, 1}, {1, 2, 3, 1}, "wk_1", "microvm"};
  EXPECT_EQ(round_trip(request), request);
}

TEST_F(cluster_messages, a_payload_is_its_capnp_bytes_and_garbage_fails_to_decode) {
  process_view view{"proc_1", schema::process_state::running, 0, 0, 5, 0, ""};
  std::vector<char> buffer;
  caf::binary_serializer sink{system, buffer};
  ASSERT_FALSE(sink(view));
  auto capnp = schema::encode(view);
  EXPECT_NE(std::string(buffer.begin(), buffer.end()).find(capnp), std::string::npos);

  std::vector<char> junk;
  caf::binary_serializer junk_sink{system, junk};
  ASSERT_FALSE(junk_sink(std::string("not capnp at all")));
  process_view copy;
  caf::binary_deserializer source{system, junk};
  auto err = source(copy);
  ASSERT_TRUE(err);
  EXPECT_EQ(to_status(err).code, errc::corrupt_record);
}

TEST_F(cluster_messages, every_cluster_type_is_registered_by_name) {
  for (const char* name :
       {"airlock::schema::sandbox_record", "airlock::schema::worker_registration",
        "airlock::schema::worker_heartbeat", "airlock::schema::node_sandbox",
        "std::vector<airlock::schema::node_sandbox>", "airlock::schema::exec_spec",
        "airlock::schema::process_view", "std::vector<airlock::schema::process_view>",
        "airlock::schema::output_request", "airlock::schema::output_batch",
        "airlock::schema::file_spec", "airlock::schema::file_result",
        "airlock::schema::placement_request", "airlock::schema::registration_ack",
        "airlock::schema::worker_view", "std::vector<airlock::schema::worker_view>",
        "airlock::actors::placement", "airlock::actors::node_actor",
        "airlock::actors::scheduler_actor"})
    EXPECT_NE(system.types().make_value(std::string(name)), nullptr) << name;
}

} // namespace
} // namespace airlock::actors
