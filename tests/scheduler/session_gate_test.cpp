// A worker's node behind its session gate: the control plane's relay (which
// adds the secret) reaches it, answers come back to the caller; a call with
// another secret, without one, or any other message is refused; the gate
// goes with its node.

#include <gtest/gtest.h>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>

#include <chrono>
#include <memory>
#include <string>

#include "actors/session_gate.hpp"
#include "actors/system_config.hpp"
#include "tests/scheduler/stub_node.hpp"
#include "tests/support/actor_ask.hpp"

namespace airlock::actors {
namespace {

using std::chrono::seconds;

const std::string secret(64, 'a');

class session_gate : public ::testing::Test {
protected:
  session_gate() : system_(config_) {}

  system_config config_;
  caf::actor_system system_;
  std::shared_ptr<testing::stub_node_script> script_ =
    std::make_shared<testing::stub_node_script>();
  node_actor node_ = testing::spawn_stub_node(system_, script_);
  node_actor gate_ = spawn_node_gate(system_, node_, secret);
};

TEST_F(session_gate, the_relay_s_calls_pass_and_their_answers_reach_the_caller) {
  script_->exec_reply.process_id = "p_1";
  auto relay = spawn_session_relay(system_, gate_, secret);
  caf::scoped_actor self(system_);
  exec_spec spec;
  spec.argv = {"true"};
  auto started = test::ask<process_view>(self, relay, seconds(10), dp_exec_atom::value,
                                         std::string("sb_1"), spec);
  ASSERT_TRUE(started) << started.error().message;
  EXPECT_EQ(started->process_id, "p_1");
  ASSERT_EQ(script_->execs().size(), 1u);
  EXPECT_EQ(script_->execs()[0].first, "sb_1");
  // An error of the node comes back as it is.
  auto paused = test::ask<node_sandbox>(self, relay, seconds(10), nd_pause_atom::value,
                                        std::string("sb_unknown"));
  EXPECT_TRUE(paused.has_value() || paused.code() != errc::permission_denied);
  caf::anon_send_exit(relay, caf::exit_reason::user_shutdown);
}

TEST_F(session_gate, another_secret_no_secret_and_plain_calls_are_refused) {
  caf::scoped_actor self(system_);
  exec_spec spec;
  spec.argv = {"id"};
  auto wrong_relay = spawn_session_relay(system_, gate_, std::string(64, 'b'));
  EXPECT_EQ(test::ask<process_view>(self, wrong_relay, seconds(10), dp_exec_atom::value,
                                    std::string("sb_1"), spec)
              .code(),
            errc::permission_denied);
  auto empty_relay = spawn_session_relay(system_, gate_, std::string());
  EXPECT_EQ(test::ask<process_view>(self, empty_relay, seconds(10), dp_exec_atom::value,
                                    std::string("sb_1"), spec)
              .code(),
            errc::permission_denied);
  // The gate addressed directly, as a peer that learned its handle would.
  EXPECT_EQ(test::ask<process_view>(self, gate_, seconds(10), dp_exec_atom::value,
                                    std::string("sb_1"), spec)
              .code(),
            errc::permission_denied);
  EXPECT_TRUE(script_->execs().empty()) << "a refused call reached the node";
  caf::anon_send_exit(wrong_relay, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(empty_relay, caf::exit_reason::user_shutdown);
}

TEST_F(session_gate, the_gate_goes_with_its_node) {
  caf::scoped_actor self(system_);
  self->monitor(gate_);
  caf::anon_send_exit(node_, caf::exit_reason::user_shutdown);
  bool down = false;
  self->receive([&down](caf::down_msg&) { down = true; }, caf::after(seconds(10)) >> [] {});
  EXPECT_TRUE(down);
}

TEST_F(session_gate, the_uplink_passes_its_own_calls_to_the_scheduler_and_refuses_others) {
  const std::string uplink_secret(64, 'd');
  int beats = 0;
  auto scheduler = system_.spawn([&beats]() -> caf::behavior {
    return {[&beats](sc_beat_atom, const schema::worker_heartbeat&) {
      ++beats;
      return true;
    }};
  });
  auto uplink = spawn_scheduler_uplink(system_, uplink_secret);
  caf::scoped_actor self(system_);
  auto beat = caf::make_message(sc_beat_atom::value, schema::worker_heartbeat{});
  auto passed = test::ask<bool>(self, uplink, seconds(10), uplink_call_atom::value, uplink_secret,
                                scheduler, beat, uint32_t{5000});
  ASSERT_TRUE(passed) << passed.error().message;
  EXPECT_TRUE(*passed);
  EXPECT_EQ(test::ask<bool>(self, uplink, seconds(10), uplink_call_atom::value,
                            std::string(64, 'e'), scheduler, beat, uint32_t{5000})
              .code(),
            errc::permission_denied);
  EXPECT_EQ(
    test::ask<bool>(self, uplink, seconds(10), sc_beat_atom::value, schema::worker_heartbeat{})
      .code(),
    errc::permission_denied);
  EXPECT_EQ(beats, 1) << "a refused call reached the scheduler";
  caf::anon_send_exit(uplink, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(scheduler, caf::exit_reason::user_shutdown);
}

TEST(session_secret, has_one_shape_and_compares_whole) {
  EXPECT_TRUE(is_session_secret(secret));
  EXPECT_FALSE(is_session_secret(std::string(63, 'a')));
  EXPECT_FALSE(is_session_secret(std::string(64, 'A')));
  EXPECT_TRUE(same_session_secret(secret, secret));
  EXPECT_FALSE(same_session_secret(secret, std::string(64, 'b')));
  EXPECT_FALSE(same_session_secret("", ""));
}

} // namespace
} // namespace airlock::actors
