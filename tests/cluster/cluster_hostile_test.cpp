// From the attacker's side: a process that reaches the control plane's
// cluster port and speaks CAF, trying to take over a live worker's id.
// (What the cluster link does not refuse yet is listed in docs/cluster.md:
// such a peer may still join under an id of its own.)

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <chrono>
#include <memory>
#include <optional>

#include "actors/errors.hpp"
#include "actors/system_config.hpp"
#include "tests/cluster/cluster_fixture.hpp"
#include "tests/scheduler/stub_node.hpp"

namespace airlock::test::cluster {
namespace {

TEST_F(cluster_e2e, a_rogue_peer_cannot_take_a_live_worker_s_id_its_node_or_its_credentials) {
  start_control();
  start_worker(0);
  ASSERT_TRUE(eventually([&] { return worker_in_state("clue2e-0", "ready"); }, rejoin_bound));
  const std::string id = create_running();
  ASSERT_FALSE(id.empty());
  const std::string worker_id = workers()["clue2e-0"].value("id", "");
  ASSERT_FALSE(worker_id.empty());

  // The rogue: an actor system of its own with CAF's transport, a node actor
  // that would answer creates, and a registration under the live worker's id.
  actors::actor_system_options options;
  options.scheduler_threads = 1;
  actors::system_config config(options);
  actors::use_middleman(config);
  caf::actor_system system(config);
  auto scheduler =
    system.middleman().remote_actor<actors::scheduler_actor>("127.0.0.1", control_->cluster_port);
  ASSERT_TRUE(scheduler) << system.render(scheduler.error());
  auto rogue_node = testing::spawn_stub_node(system, std::make_shared<testing::stub_node_script>());
  schema::worker_registration claim;
  claim.id = worker_id;
  claim.name = "rogue";
  claim.cluster_address = "127.0.0.1:0";
  claim.data_url = "http://127.0.0.1:9";
  claim.capacity = {64'000, 262'144, 1'000'000, 1024};
  claim.runtimes = {"namespace"};
  std::optional<status> answer;
  {
    caf::scoped_actor self(system);
    self
      ->request(*scheduler, std::chrono::seconds(10), actors::sc_register_atom::value, claim,
                rogue_node)
      .receive([&answer](actors::registration_ack&) { answer = status::ok(); },
               [&answer](caf::error& error) { answer = to_status(error); });
  }
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->code, errc::already_exists) << answer->message;

  // Nor does it learn the fleet, get the worker's node (to call it) or read
  // the sandbox's credentials: it is not the worker the sandbox is on.
  auto refusal = [&](auto reply, auto... xs) {
    using reply_type = decltype(reply);
    std::optional<status> got;
    caf::scoped_actor self(system);
    self->request(*scheduler, std::chrono::seconds(10), xs...)
      .receive([&got](reply_type&) { got = status::ok(); },
               [&got](caf::error& error) { got = to_status(error); });
    return got ? got->code : errc::timeout;
  };
  EXPECT_EQ(refusal(std::vector<actors::worker_view>{}, actors::sc_workers_atom::value),
            errc::permission_denied);
  EXPECT_EQ(refusal(actors::placement{}, actors::sc_node_atom::value, worker_id),
            errc::permission_denied);
  EXPECT_EQ(refusal(std::vector<schema::credential_grant>{}, actors::sc_creds_atom::value, id),
            errc::permission_denied);

  // The real worker keeps its id, its node and its sandbox.
  EXPECT_TRUE(worker_in_state("clue2e-0", "ready"));
  EXPECT_EQ(workers().count("rogue"), 0u);
  auto started = exec(control_->url(), id, key_, "echo still served by its worker");
  EXPECT_TRUE(started.contains("process_id")) << started.dump();

  auto figures = call("GET", control_->url() + "/metrics", "");
  ASSERT_EQ(figures.status, 200);
  EXPECT_NE(figures.raw.find("airlock_cluster_registrations_refused_total{reason=\"id_in_use\"} 1"),
            std::string::npos)
    << figures.raw;

  caf::anon_send_exit(rogue_node, caf::exit_reason::user_shutdown);
}

} // namespace
} // namespace airlock::test::cluster
