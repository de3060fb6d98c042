// The idle and lifetime policy on a test clock, with the real engine,
// registry, scheduler and procedures and a scripted node: an idle sandbox is
// suspended (or deleted) only after two looks at its processes found nothing
// new, output keeps it running, activity that arrives while the suspend is
// being decided wins, and only running time counts against the lifetime.

#include <nlohmann/json.hpp>

#include "actors/lifecycle_policy.hpp"
#include "tests/actors/lifecycle_fixture.hpp"

namespace airlock::actors {
namespace {

using namespace airlock::actors::test;
using nlohmann::json;
using schema::operation_state;
using schema::sandbox_state;

class policy : public lifecycle {
protected:
  policy() {
    lifecycle_policy_options options;
    options.interval_ms = 3'600'000; // passes run when the test asks
    policy_ = spawn_lifecycle_policy(system_, registry_, scheduler_, engine_, clock_, options);
  }

  ~policy() override {
    caf::anon_send_exit(policy_, caf::exit_reason::user_shutdown);
    self_->wait_for(policy_); // it reads the clock the base class owns
  }

  /// A running sandbox `id` whose spec `shape` adjusts.
  void running(const std::string& id, std::function<void(schema::sandbox_record&)> shape) {
    schema::sandbox_record record;
    record.id = id;
    record.tenant_id = "t";
    record.spec.template_name = "minimal";
    record.spec.memory_request_mb = record.spec.memory_mb;
    record.spec.cpu_request_millis = record.spec.cpu_millis;
    record.last_active_at_ms = clock_.now_ms();
    shape(record);
    self_->request(registry_, seconds(5), rg_create_atom::value, record)
      .receive([](schema::sandbox_record&) {},
               [](caf::error& error) { FAIL() << to_status(error).message; });
    ASSERT_EQ(run(kind_sandbox_create, id).state, operation_state::succeeded);
  }

  /// One policy pass; how many operations it started.
  uint64_t pass() {
    uint64_t started = 0;
    self_->request(policy_, seconds(10), lp_run_atom::value)
      .receive([&started](uint64_t count) { started = count; },
               [](caf::error& error) { FAIL() << to_status(error).message; });
    return started;
  }

  void set_output(uint64_t bytes) {
    std::lock_guard<std::mutex> lock(script_->mutex);
    script_->processes.clear();
    process_view busy;
    busy.process_id = "p1";
    busy.state = schema::process_state::running;
    busy.started_at_ms = 1; // long ago
    busy.stdout_bytes = bytes;
    script_->processes.push_back(busy);
  }

  lifecycle_policy_actor policy_;
};

TEST_F(policy, an_idle_sandbox_is_suspended_after_two_quiet_looks) {
  register_worker();
  running("sb_idle", [](schema::sandbox_record& r) { r.spec.idle_timeout_s = 60; });
  const auto since = sandbox("sb_idle").last_active_at_ms;
  EXPECT_EQ(pass(), 0u) << "not idle yet";
  clock_.advance_ms(61'000);
  EXPECT_EQ(pass(), 0u) << "the first look only samples the processes";
  EXPECT_EQ(sandbox("sb_idle").state, sandbox_state::running);
  EXPECT_EQ(pass(), 1u) << "nothing changed since: idle";
  auto op = wait_keyed("idle-suspend-sb_idle-" + std::to_string(since));
  ASSERT_EQ(op.state, operation_state::succeeded) << op.result_json;
  EXPECT_EQ(op.kind, kind_sandbox_suspend);
  auto record = sandbox("sb_idle");
  EXPECT_EQ(record.state, sandbox_state::suspended);
  EXPECT_FALSE(record.snapshot_id.empty());
  EXPECT_EQ(pass(), 0u) << "a suspended sandbox is left alone";
}

TEST_F(policy, output_nobody_reads_keeps_a_sandbox_running) {
  register_worker();
  running("sb_busy", [](schema::sandbox_record& r) { r.spec.idle_timeout_s = 60; });
  clock_.advance_ms(61'000);
  set_output(100);
  EXPECT_EQ(pass(), 0u);
  set_output(5000); // the process wrote more since the last look
  const auto before = sandbox("sb_busy").last_active_at_ms;
  EXPECT_EQ(pass(), 0u);
  EXPECT_GT(sandbox("sb_busy").last_active_at_ms, before) << "output is activity";
  EXPECT_EQ(pass(), 0u) << "active again: the idle clock restarted";
  EXPECT_EQ(sandbox("sb_busy").state, sandbox_state::running);
}

TEST_F(policy, activity_during_the_decision_wins_and_the_suspend_is_abandoned) {
  register_worker();
  running("sb_race", [](schema::sandbox_record& r) { r.spec.idle_timeout_s = 60; });
  const auto decided_on = sandbox("sb_race").last_active_at_ms;
  clock_.advance_ms(61'000);
  caf::anon_send(registry_, rg_touch_atom::value, std::string("sb_race"));
  add_snapshot("ckpt_race", "sb_race", schema::snapshot_kind::suspend);
  auto op =
    run(kind_sandbox_suspend, "sb_race",
        json{{"snapshot_id", "ckpt_race"}, {"from_state", "running"}, {"idle_since", decided_on}}
          .dump());
  ASSERT_EQ(op.state, operation_state::succeeded);
  EXPECT_EQ(json::parse(op.result_json)["abandoned"], true);
  EXPECT_EQ(sandbox("sb_race").state, sandbox_state::running);
  EXPECT_FALSE(snapshot("ckpt_race")) << "no snapshot record is left behind";
  EXPECT_EQ(script_->destroys.load(), 0);
}

TEST_F(policy, an_open_attach_stream_keeps_a_silent_sandbox_active) {
  register_worker();
  running("sb_attached", [](schema::sandbox_record& r) { r.spec.idle_timeout_s = 60; });
  caf::anon_send(registry_, rg_attach_atom::value, std::string("sb_attached"), int32_t{1});
  clock_.advance_ms(600'000);
  EXPECT_EQ(pass(), 0u);
  EXPECT_EQ(pass(), 0u) << "attached: active now, however long it was silent";
  caf::anon_send(registry_, rg_attach_atom::value, std::string("sb_attached"), int32_t{-1});
  // Read back: the registry took the detach before the clock moves on.
  const auto since = sandbox("sb_attached").last_active_at_ms;
  clock_.advance_ms(61'000);
  EXPECT_EQ(pass(), 0u);
  EXPECT_EQ(pass(), 1u) << "detached and idle for the timeout since";
  auto op = wait_keyed("idle-suspend-sb_attached-" + std::to_string(since));
  EXPECT_EQ(op.state, operation_state::succeeded);
}

TEST_F(policy, use_of_the_worker_s_own_listener_counts_as_activity_at_its_time) {
  register_worker();
  running("sb_direct", [](schema::sandbox_record& r) { r.spec.idle_timeout_s = 60; });
  const auto created = sandbox("sb_direct").last_active_at_ms;
  clock_.advance_ms(61'000);
  script_->quiet_ms = 1'000; // a file was written on the worker a second ago
  EXPECT_EQ(pass(), 0u);
  EXPECT_EQ(sandbox("sb_direct").last_active_at_ms, created + 60'000)
    << "the activity counts at the time it happened, not at the look";
  EXPECT_EQ(pass(), 0u) << "active a second ago: not idle-looking";
  // Quiet since then (the worker's answer grows with its own clock).
  clock_.advance_ms(61'000);
  script_->quiet_ms = 62'000;
  EXPECT_EQ(pass(), 0u) << "the first look only samples the processes";
  EXPECT_EQ(pass(), 1u) << "no newer use and nothing changed: idle";
  EXPECT_EQ(wait_keyed("idle-suspend-sb_direct-" + std::to_string(created + 60'000)).state,
            operation_state::succeeded);
  EXPECT_EQ(sandbox("sb_direct").state, sandbox_state::suspended);
}

TEST_F(policy, on_idle_delete_deletes_the_idle_sandbox) {
  register_worker();
  running("sb_gone", [](schema::sandbox_record& r) {
    r.spec.idle_timeout_s = 30;
    r.spec.on_idle = schema::idle_action::delete_sandbox;
  });
  const auto since = sandbox("sb_gone").last_active_at_ms;
  clock_.advance_ms(31'000);
  EXPECT_EQ(pass(), 0u);
  EXPECT_EQ(pass(), 1u);
  auto op = wait_keyed("idle-delete-sb_gone-" + std::to_string(since));
  ASSERT_EQ(op.state, operation_state::succeeded);
  EXPECT_EQ(sandbox("sb_gone").state, sandbox_state::destroyed);
}

TEST_F(policy, only_running_time_counts_against_the_lifetime) {
  register_worker();
  running("sb_life", [](schema::sandbox_record& r) { r.spec.max_lifetime_s = 100; });
  clock_.advance_ms(50'000);
  ASSERT_EQ(run(kind_sandbox_pause, "sb_life").state, operation_state::succeeded);
  clock_.advance_ms(1'000'000); // paused: not counted
  EXPECT_EQ(pass(), 0u);
  ASSERT_EQ(run(kind_sandbox_resume, "sb_life").state, operation_state::succeeded);
  clock_.advance_ms(40'000);
  EXPECT_EQ(pass(), 0u) << "90 s of 100 used";
  clock_.advance_ms(11'000);
  EXPECT_EQ(pass(), 1u);
  auto op = wait_keyed("lifetime-sb_life");
  ASSERT_EQ(op.state, operation_state::succeeded);
  EXPECT_EQ(sandbox("sb_life").state, sandbox_state::destroyed);
}

TEST_F(policy, an_active_sandbox_is_checkpointed_each_interval_and_old_automatic_ones_pruned) {
  register_worker();
  running("sb_auto", [](schema::sandbox_record& r) {
    r.spec.checkpoint_interval_s = 60;
    r.spec.checkpoints_max = 2;
  });
  add_snapshot("ckpt_mine", "sb_auto"); // requested by the user: never pruned
  ASSERT_EQ(run(kind_checkpoint_create, "sb_auto", R"({"checkpoint_id":"ckpt_mine"})").state,
            operation_state::succeeded);
  std::vector<std::string> automatic;
  for (int round = 0; round < 3; ++round) {
    clock_.advance_ms(61'000);
    caf::anon_send(registry_, rg_touch_atom::value, std::string("sb_auto")); // active
    EXPECT_EQ(pass(), 1u) << "round " << round;
    const auto slot = std::to_string(clock_.now_ms() / 60'000);
    auto op = wait_keyed("auto-ckpt-sb_auto-" + slot);
    ASSERT_EQ(op.state, operation_state::succeeded) << op.result_json;
    automatic.push_back("ckpt_auto_sb_auto_" + slot);
    ASSERT_TRUE(snapshot(automatic.back()));
    EXPECT_TRUE(snapshot(automatic.back())->automatic);
  }
  EXPECT_EQ(pass(), 1u) << "not due again: the oldest automatic one is pruned";
  auto pruned = wait_keyed("auto-prune-" + automatic.front());
  ASSERT_EQ(pruned.state, operation_state::succeeded);
  EXPECT_FALSE(snapshot(automatic[0]));
  EXPECT_TRUE(snapshot(automatic[1]));
  EXPECT_TRUE(snapshot(automatic[2]));
  EXPECT_TRUE(snapshot("ckpt_mine"));
  // Idle for an interval: nothing changed, no checkpoint.
  clock_.advance_ms(61'000);
  EXPECT_EQ(pass(), 0u);
}

} // namespace
} // namespace airlock::actors
