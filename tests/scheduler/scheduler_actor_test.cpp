// The scheduler actor on CAF's deterministic test scheduler: time moves only
// when a test advances it, so heartbeat timeouts are exact.
#include <caf/all.hpp>
#include <caf/scheduler/test_coordinator.hpp>
#include <gtest/gtest.h>

#include <memory>

#include "actors/errors.hpp"
#include "actors/system_config.hpp"
#include "scheduler/scheduler_actor.hpp"
#include "tests/scheduler/stub_node.hpp"

namespace airlock::actors {
namespace {

using scheduler::scheduler_deps;
using scheduler::scheduler_options;
using scheduler::spawn_scheduler;

caf::actor_system_config& prepared(system_config& config) {
  use_test_scheduler(config);
  return config;
}

schema::worker_registration registration(std::string id, uint32_t cpu_millis = 1000,
                                         uint32_t memory_mb = 1024) {
  schema::worker_registration r;
  r.id = std::move(id);
  r.name = "host-" + r.id;
  r.cluster_address = "10.0.0.1:7100";
  r.data_url = "http://" + r.id + ":7071";
  r.capacity = {cpu_millis, memory_mb, 100'000, 10};
  r.runtimes = {"namespace"};
  return r;
}

placement_request ask_for(std::string sandbox_id, uint32_t cpu_millis, uint32_t memory_mb = 100) {
  return placement_request{std::move(sandbox_id),           "base", {cpu_millis, memory_mb, 100, 1},
                           {cpu_millis, memory_mb, 100, 1}, {},     {}};
}

class scheduler_test : public ::testing::Test {
protected:
  scheduler_test()
      : system(prepared(config)),
        sched(dynamic_cast<caf::scheduler::test_coordinator&>(system.scheduler())) {
    options.heartbeat_interval_ms = 100;
    options.heartbeat_timeout_ms = 1'000;
    options.check_interval_ms = 100;
    options.placement.sample_k = 0;
    scheduler_deps deps;
    deps.token_public_key = std::string(32, '\x2a');
    deps.clock = &clock;
    deps.entropy = &entropy;
    deps.on_refused = [this](std::string_view reason, std::string_view worker_id,
                             const std::string& message) {
      refusals.push_back(std::string(reason) + " " + std::string(worker_id) + ": " + message);
    };
    scheduler = spawn_scheduler(system, options, std::move(deps));
    sched.run();
  }

  ~scheduler_test() override {
    caf::anon_send_exit(scheduler, caf::exit_reason::user_shutdown);
    for (auto& node : nodes)
      caf::anon_send_exit(node, caf::exit_reason::user_shutdown);
    sched.run();
    // Pending timers would keep the test scheduler alive.
    while (sched.trigger_timeouts() > 0)
      sched.run();
  }

  /// Sends a request, runs the system and returns the reply or the error.
  template <class T, class... Ts>
  caf::expected<T> ask(Ts&&... xs) {
    caf::scoped_actor asker{system};
    auto handle = asker->request(scheduler, caf::infinite, std::forward<Ts>(xs)...);
    sched.run();
    if (asker->mailbox().empty())
      return caf::make_error(caf::sec::request_timeout);
    caf::expected<T> result{caf::make_error(caf::sec::unexpected_response)};
    handle.receive([&result](T& value) { result = std::move(value); },
                   [&result](caf::error& err) { result = std::move(err); });
    return result;
  }

  node_actor new_node() {
    nodes.push_back(spawn_stub_node(system, script));
    return nodes.back();
  }

  caf::expected<registration_ack> join(const std::string& id, uint32_t cpu_millis = 1000) {
    return ask<registration_ack>(sc_register_atom::value, registration(id, cpu_millis), new_node());
  }

  caf::expected<bool> beat(const std::string& id, uint64_t sequence,
                           std::vector<std::string> sandbox_ids = {},
                           schema::resources allocated = {}) {
    schema::worker_heartbeat h;
    h.worker_id = id;
    h.sequence = sequence;
    h.allocated = allocated;
    h.sandbox_ids = std::move(sandbox_ids);
    return ask<bool>(sc_beat_atom::value, h);
  }

  caf::expected<placement> place(placement_request request) {
    return ask<placement>(sc_place_atom::value, std::move(request));
  }

  std::vector<worker_view> workers() {
    auto views = ask<std::vector<worker_view>>(sc_workers_atom::value);
    EXPECT_TRUE(views);
    return views ? *views : std::vector<worker_view>{};
  }

  /// Moves the actor clock in small steps so the periodic check fires.
  void advance_ms(int64_t ms) {
    for (int64_t i = 0; i < ms; i += 10) {
      clock.advance_ms(10);
      sched.advance_time(std::chrono::milliseconds(10));
      sched.run();
    }
  }

  static errc code_of(const caf::error& error) { return to_status(error).code; }

  manual_wall_clock clock;
  seeded_entropy entropy{11};
  system_config config;
  caf::actor_system system;
  caf::scheduler::test_coordinator& sched;
  scheduler_options options;
  scheduler_actor scheduler;
  std::shared_ptr<testing::stub_node_script> script = std::make_shared<testing::stub_node_script>();
  std::vector<node_actor> nodes;
  std::vector<std::string> refusals; ///< what on_refused was told, in order
};

TEST_F(scheduler_test, acknowledges_a_registration_with_the_token_key_and_beat_interval) {
  auto ack = join("wk_a");
  ASSERT_TRUE(ack) << system.render(ack.error());
  EXPECT_EQ(ack->worker_id, "wk_a");
  EXPECT_EQ(ack->token_public_key, std::string(32, '\x2a'));
  EXPECT_EQ(ack->heartbeat_interval_ms, 100u);
  auto fleet = workers();
  ASSERT_EQ(fleet.size(), 1u);
  EXPECT_EQ(fleet[0].state, "ready");
  EXPECT_EQ(fleet[0].registration, registration("wk_a"));
}

TEST_F(scheduler_test, refuses_a_registration_without_an_id) {
  auto ack = ask<registration_ack>(sc_register_atom::value, registration(""), new_node());
  ASSERT_FALSE(ack);
  EXPECT_EQ(code_of(ack.error()), errc::invalid_argument);
  ASSERT_EQ(refusals.size(), 1u);
  EXPECT_EQ(refusals[0].rfind("invalid : ", 0), 0u) << refusals[0];
}

TEST_F(scheduler_test, is_unavailable_when_no_worker_is_registered) {
  auto placed = place(ask_for("sb_1", 100));
  ASSERT_FALSE(placed);
  EXPECT_EQ(code_of(placed.error()), errc::unavailable);
}

TEST_F(scheduler_test, reserves_what_it_places_and_says_what_is_free_when_nothing_fits) {
  ASSERT_TRUE(join("wk_a"));
  auto first = place(ask_for("sb_1", 600));
  ASSERT_TRUE(first) << system.render(first.error());
  EXPECT_EQ(first->worker_id, "wk_a");
  EXPECT_EQ(first->data_url, "http://wk_a:7071");
  EXPECT_EQ(first->node, nodes[0]);
  auto second = place(ask_for("sb_2", 600));
  ASSERT_FALSE(second);
  auto failure = to_status(second.error());
  EXPECT_EQ(failure.code, errc::resource_exhausted);
  EXPECT_NE(failure.message.find("600 mCPU"), std::string::npos) << failure.message;
  EXPECT_NE(failure.message.find("most any worker has free is 400 mCPU"), std::string::npos)
    << failure.message;
  auto fleet = workers();
  ASSERT_EQ(fleet.size(), 1u);
  EXPECT_EQ(fleet[0].reserved.cpu_millis, 600u);
  EXPECT_EQ(fleet[0].reserved.sandboxes, 1u);
}

TEST_F(scheduler_test, a_release_frees_the_reservation_and_is_idempotent) {
  ASSERT_TRUE(join("wk_a"));
  ASSERT_TRUE(place(ask_for("sb_1", 600)));
  EXPECT_TRUE(ask<bool>(sc_release_atom::value, std::string("wk_a"), std::string("sb_1")));
  EXPECT_TRUE(ask<bool>(sc_release_atom::value, std::string("wk_a"), std::string("sb_1")));
  EXPECT_EQ(workers()[0].reserved, schema::resources{});
  EXPECT_TRUE(place(ask_for("sb_2", 600)));
}

TEST_F(scheduler_test, placing_the_same_sandbox_twice_returns_the_first_placement) {
  ASSERT_TRUE(join("wk_a"));
  ASSERT_TRUE(join("wk_b"));
  auto first = place(ask_for("sb_1", 400));
  ASSERT_TRUE(first);
  for (int i = 0; i < 5; ++i) {
    auto again = place(ask_for("sb_1", 400));
    ASSERT_TRUE(again);
    EXPECT_EQ(again->worker_id, first->worker_id);
  }
  uint32_t reserved = 0;
  for (const auto& view : workers())
    reserved += view.reserved.cpu_millis;
  EXPECT_EQ(reserved, 400u) << "a repeated place must not reserve again";
}

TEST_F(scheduler_test, places_on_the_worker_with_the_most_room_left) {
  ASSERT_TRUE(join("wk_small", 1000));
  ASSERT_TRUE(join("wk_big", 4000));
  auto placed = place(ask_for("sb_1", 500));
  ASSERT_TRUE(placed);
  EXPECT_EQ(placed->worker_id, "wk_big");
}

TEST_F(scheduler_test, a_sandbox_in_a_heartbeat_counts_once_not_as_reservation_and_allocation) {
  ASSERT_TRUE(join("wk_a"));
  ASSERT_TRUE(place(ask_for("sb_1", 600)));
  // The worker now runs it and reports its usage as allocated.
  ASSERT_TRUE(beat("wk_a", 1, {"sb_1"}, {600, 100, 100, 1}));
  auto view = workers()[0];
  EXPECT_EQ(view.reserved, schema::resources{});
  EXPECT_EQ(view.allocated.cpu_millis, 600u);
  EXPECT_EQ(view.sandbox_ids, std::vector<std::string>{"sb_1"});
  EXPECT_EQ(view.last_heartbeat_at_ms, clock.now_ms());
  auto fits = place(ask_for("sb_2", 400));
  ASSERT_TRUE(fits) << system.render(fits.error());
  EXPECT_FALSE(place(ask_for("sb_3", 100))) << "1000 mCPU are all taken";
}

TEST_F(scheduler_test, a_release_frees_what_the_last_heartbeat_counted_before_the_next_one) {
  ASSERT_TRUE(join("wk_a"));
  ASSERT_TRUE(place(ask_for("sb_1", 600)));
  ASSERT_TRUE(beat("wk_a", 1, {"sb_1"}, {600, 100, 100, 1}));
  EXPECT_FALSE(place(ask_for("sb_2", 600))) << "600 of 1000 mCPU are taken";
  // Deleted: its 600 mCPU are free at once, not only after the next beat.
  ASSERT_TRUE(ask<bool>(sc_release_atom::value, std::string("wk_a"), std::string("sb_1")));
  EXPECT_EQ(workers()[0].allocated.cpu_millis, 0u);
  auto fits = place(ask_for("sb_2", 600));
  ASSERT_TRUE(fits) << system.render(fits.error());
  // The next beat (without sb_1, with sb_2) is the truth again.
  ASSERT_TRUE(beat("wk_a", 2, {"sb_2"}, {600, 100, 100, 1}));
  EXPECT_EQ(workers()[0].allocated.cpu_millis, 600u);
  EXPECT_EQ(workers()[0].reserved, schema::resources{});
}

TEST_F(scheduler_test, heartbeats_rebuild_what_runs_where_after_a_control_plane_restart) {
  // A fresh scheduler (the control plane restarted): the worker registers
  // again and its first beat reports what it runs and what that requested.
  ASSERT_TRUE(join("wk_a"));
  schema::worker_heartbeat h;
  h.worker_id = "wk_a";
  h.sequence = 1;
  h.allocated = {900, 300, 100, 3};
  h.limited = {3000, 1536, 6144, 3};
  h.used = {12, 5, 40, 3};
  h.sandbox_ids = {"sb_1", "sb_2", "sb_3"};
  ASSERT_TRUE(ask<bool>(sc_beat_atom::value, h));
  auto view = workers()[0];
  EXPECT_EQ(view.limited, h.limited);
  EXPECT_EQ(view.used, h.used);
  EXPECT_FALSE(place(ask_for("sb_4", 200))) << "the 900 mCPU the sandboxes requested are counted";
  auto again = place(ask_for("sb_2", 100));
  ASSERT_TRUE(again) << "a sandbox the worker runs is known as placed there";
  EXPECT_EQ(again->worker_id, "wk_a");
  EXPECT_EQ(workers()[0].reserved, schema::resources{}) << "and reserves nothing twice";
}

TEST_F(scheduler_test, a_worker_under_memory_pressure_gets_nothing_until_it_recovers) {
  ASSERT_TRUE(join("wk_a"));
  schema::worker_heartbeat h;
  h.worker_id = "wk_a";
  h.sequence = 1;
  h.memory_pressure = true;
  h.pressure_reason = "MemAvailable is 100 MiB (minimum 512 MiB)";
  ASSERT_TRUE(ask<bool>(sc_beat_atom::value, h));
  EXPECT_TRUE(workers()[0].memory_pressure);
  EXPECT_EQ(workers()[0].pressure_reason, h.pressure_reason);
  auto refused = place(ask_for("sb_1", 100));
  ASSERT_FALSE(refused);
  EXPECT_EQ(code_of(refused.error()), errc::resource_exhausted);
  EXPECT_NE(to_status(refused.error()).message.find("memory pressure"), std::string::npos);
  h.sequence = 2;
  h.memory_pressure = false;
  h.pressure_reason.clear();
  ASSERT_TRUE(ask<bool>(sc_beat_atom::value, h));
  EXPECT_TRUE(place(ask_for("sb_1", 100)));
}

TEST_F(scheduler_test, a_placement_says_what_it_reserved_with_the_workers_defaults_filled_in) {
  auto r = registration("wk_a");
  r.default_request = {7, 32, 4, 0};
  ASSERT_TRUE(ask<registration_ack>(sc_register_atom::value, r, new_node()));
  auto request = ask_for("sb_1", 500, 256);
  request.requests = {0, 64, 0, 1};
  auto placed = place(request);
  ASSERT_TRUE(placed);
  EXPECT_EQ(placed->reserved.cpu_millis, 7u);
  EXPECT_EQ(placed->reserved.memory_mb, 64u);
  EXPECT_EQ(placed->reserved.disk_mb, 4u);
  EXPECT_EQ(workers()[0].reserved.cpu_millis, 7u) << "the request, not the 500 mCPU limit";
}

TEST_F(scheduler_test, a_heartbeat_from_an_unknown_worker_is_not_found) {
  auto result = beat("wk_nobody", 1);
  ASSERT_FALSE(result);
  EXPECT_EQ(code_of(result.error()), errc::not_found);
}

TEST_F(scheduler_test, marks_a_silent_worker_lost_after_the_heartbeat_timeout) {
  ASSERT_TRUE(join("wk_a"));
  for (int i = 1; i <= 5; ++i) {
    advance_ms(500);
    ASSERT_TRUE(beat("wk_a", static_cast<uint64_t>(i)));
  }
  EXPECT_EQ(workers()[0].state, "ready") << "beats every 500 ms keep it ready";
  advance_ms(900);
  EXPECT_EQ(workers()[0].state, "ready");
  advance_ms(300);
  EXPECT_EQ(workers()[0].state, "lost");
  auto placed = place(ask_for("sb_1", 100));
  ASSERT_FALSE(placed);
  EXPECT_EQ(code_of(placed.error()), errc::unavailable);
  auto node = ask<placement>(sc_node_atom::value, std::string("wk_a"));
  ASSERT_FALSE(node);
  EXPECT_EQ(code_of(node.error()), errc::unavailable);
  // Still connected: its next beat brings it back.
  ASSERT_TRUE(beat("wk_a", 6));
  EXPECT_EQ(workers()[0].state, "ready");
}

TEST_F(scheduler_test, a_down_node_marks_its_worker_lost_until_it_registers_again) {
  ASSERT_TRUE(join("wk_a"));
  ASSERT_TRUE(place(ask_for("sb_1", 600)));
  caf::anon_send_exit(nodes[0], caf::exit_reason::user_shutdown);
  sched.run();
  EXPECT_EQ(workers()[0].state, "lost");
  auto refused = beat("wk_a", 1);
  ASSERT_FALSE(refused);
  EXPECT_EQ(code_of(refused.error()), errc::not_found) << "a beat cannot revive a dead node";
  auto again = place(ask_for("sb_1", 600));
  ASSERT_FALSE(again);
  EXPECT_EQ(code_of(again.error()), errc::unavailable);
}

TEST_F(scheduler_test, a_rejoining_worker_gets_its_new_node_and_keeps_its_reservations) {
  ASSERT_TRUE(join("wk_a"));
  ASSERT_TRUE(place(ask_for("sb_1", 600)));
  caf::anon_send_exit(nodes[0], caf::exit_reason::user_shutdown);
  sched.run();
  ASSERT_EQ(workers()[0].state, "lost");
  auto ack = join("wk_a");
  ASSERT_TRUE(ack);
  auto fleet = workers();
  ASSERT_EQ(fleet.size(), 1u);
  EXPECT_EQ(fleet[0].state, "ready");
  EXPECT_EQ(fleet[0].reserved.cpu_millis, 600u);
  auto where = ask<placement>(sc_node_atom::value, std::string("wk_a"));
  ASSERT_TRUE(where);
  EXPECT_EQ(where->node, nodes[1]);
  auto first = place(ask_for("sb_1", 600));
  ASSERT_TRUE(first);
  EXPECT_EQ(first->node, nodes[1]);
  ASSERT_TRUE(beat("wk_a", 1));
}

// Not a silent takeover: a second node cannot register the id of a worker
// whose node is still connected, and the refused node changes nothing.
TEST_F(scheduler_test, a_second_live_registration_of_an_id_is_refused) {
  ASSERT_TRUE(join("wk_a"));
  auto impostor = join("wk_a");
  ASSERT_FALSE(impostor);
  EXPECT_EQ(code_of(impostor.error()), errc::already_exists);
  ASSERT_EQ(refusals.size(), 1u) << "every refusal is reported (logged and counted)";
  EXPECT_EQ(refusals[0].rfind("id_in_use wk_a: ", 0), 0u) << refusals[0];
  auto where = ask<placement>(sc_node_atom::value, std::string("wk_a"));
  ASSERT_TRUE(where);
  EXPECT_EQ(where->node, nodes[0]) << "the live worker keeps its node";
  caf::anon_send_exit(nodes[1], caf::exit_reason::user_shutdown);
  sched.run();
  EXPECT_EQ(workers()[0].state, "ready");
  // The same node again is a repeat, answered as the first time.
  EXPECT_TRUE(ask<registration_ack>(sc_register_atom::value, registration("wk_a"), nodes[0]));
}

TEST_F(scheduler_test, registering_a_dead_node_again_leaves_the_worker_lost) {
  ASSERT_TRUE(join("wk_a"));
  caf::anon_send_exit(nodes[0], caf::exit_reason::user_shutdown);
  sched.run();
  ASSERT_TRUE(ask<registration_ack>(sc_register_atom::value, registration("wk_a"), nodes[0]));
  sched.run();
  EXPECT_EQ(workers()[0].state, "lost");
}

TEST_F(scheduler_test, names_an_unknown_worker_not_found) {
  auto where = ask<placement>(sc_node_atom::value, std::string("wk_x"));
  ASSERT_FALSE(where);
  EXPECT_EQ(code_of(where.error()), errc::not_found);
}

TEST_F(scheduler_test, lists_workers_in_id_order) {
  ASSERT_TRUE(join("wk_c"));
  ASSERT_TRUE(join("wk_a"));
  ASSERT_TRUE(join("wk_b"));
  auto fleet = workers();
  ASSERT_EQ(fleet.size(), 3u);
  EXPECT_EQ(fleet[0].registration.id, "wk_a");
  EXPECT_EQ(fleet[2].registration.id, "wk_c");
}

/// A control plane that checks identities: every registration proves its
/// certificate, even one that seems to come from this process (a peer can
/// name this process's node as the source of a routed message).
class checked_scheduler_test : public ::testing::Test {
protected:
  checked_scheduler_test()
      : system(prepared(config)),
        sched(dynamic_cast<caf::scheduler::test_coordinator&>(system.scheduler())) {
    scheduler_deps deps;
    deps.token_public_key = std::string(32, '\x2a');
    deps.clock = &clock;
    deps.entropy = &entropy;
    // The certificate's text is the member it names; "forged" proves nothing.
    deps.verify_member = [](const std::string& certificate, const std::string& proof,
                            const std::string&) -> result<std::string> {
      if (proof == "forged")
        return make_status(errc::permission_denied, "the proof is not the key's signature");
      return certificate;
    };
    scheduler = spawn_scheduler(system, options, std::move(deps));
    sched.run();
  }

  ~checked_scheduler_test() override {
    caf::anon_send_exit(scheduler, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(node, caf::exit_reason::user_shutdown);
    sched.run();
    while (sched.trigger_timeouts() > 0)
      sched.run();
  }

  caf::expected<registration_ack> register_as(schema::worker_registration r) {
    caf::scoped_actor asker{system};
    auto handle =
      asker->request(scheduler, caf::infinite, sc_register_atom::value, std::move(r), node);
    sched.run();
    caf::expected<registration_ack> out{caf::make_error(caf::sec::request_timeout)};
    if (!asker->mailbox().empty())
      handle.receive([&out](registration_ack& ack) { out = std::move(ack); },
                     [&out](caf::error& err) { out = std::move(err); });
    return out;
  }

  manual_wall_clock clock;
  seeded_entropy entropy{12};
  system_config config;
  caf::actor_system system;
  caf::scheduler::test_coordinator& sched;
  scheduler_options options;
  std::shared_ptr<testing::stub_node_script> script = std::make_shared<testing::stub_node_script>();
  node_actor node = spawn_stub_node(system, script);
  scheduler_actor scheduler;
};

TEST_F(checked_scheduler_test, a_registration_from_this_process_still_proves_its_certificate) {
  auto r = registration("wk_local");
  r.certificate = "wk_local";
  r.proof = "forged";
  r.session_secret = std::string(64, 'c');
  auto forged = register_as(r);
  ASSERT_FALSE(forged);
  EXPECT_EQ(to_status(forged.error()).code, errc::permission_denied);
  // The same with a proof, but no session secret: refused too.
  r.proof = "signed";
  r.session_secret.clear();
  auto ungated = register_as(r);
  ASSERT_FALSE(ungated);
  EXPECT_EQ(to_status(ungated.error()).code, errc::invalid_argument);
  r.session_secret = std::string(64, 'c');
  EXPECT_TRUE(register_as(r));
}

} // namespace
} // namespace airlock::actors
