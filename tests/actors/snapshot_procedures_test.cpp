// The snapshot procedures (suspend, restore, rollback, wake, fork) with the
// real engine, registry and scheduler and a scripted node: the states the
// sandbox goes through, what the worker is asked in which order, refusals
// that leave everything as it was, a step run again after its answer was
// lost, and a fork whose sandboxes partly fail.

#include <nlohmann/json.hpp>

#include <algorithm>

#include "tests/actors/lifecycle_fixture.hpp"

namespace airlock::actors {
namespace {

using namespace airlock::actors::test;
using nlohmann::json;
using schema::operation_state;
using schema::sandbox_state;

class snapshots : public lifecycle {
protected:
  /// A running sandbox `id` on wk_1.
  void running(const std::string& id) {
    add_sandbox(id);
    ASSERT_EQ(run(kind_sandbox_create, id).state, operation_state::succeeded);
  }

  schema::operation_record suspend(const std::string& id, const std::string& snapshot_id) {
    add_snapshot(snapshot_id, id, schema::snapshot_kind::suspend);
    return run(kind_sandbox_suspend, id,
               json{{"snapshot_id", snapshot_id}, {"from_state", "running"}}.dump());
  }

  std::vector<std::string> calls() {
    std::lock_guard<std::mutex> lock(script_->mutex);
    return script_->calls;
  }
};

TEST_F(snapshots, suspend_releases_the_worker_and_restore_starts_it_again_from_the_snapshot) {
  register_worker();
  running("sb_s");
  auto suspended = suspend("sb_s", "ckpt_s");
  ASSERT_EQ(suspended.state, operation_state::succeeded) << suspended.error->message;
  auto result = json::parse(suspended.result_json);
  EXPECT_EQ(result["snapshot_id"], "ckpt_s");
  EXPECT_EQ(result["memory_persisted"], false);
  auto record = sandbox("sb_s");
  EXPECT_EQ(record.state, sandbox_state::suspended);
  EXPECT_EQ(record.snapshot_id, "ckpt_s");
  ASSERT_TRUE(snapshot("ckpt_s"));
  EXPECT_TRUE(snapshot("ckpt_s")->complete);
  EXPECT_EQ(snapshot("ckpt_s")->worker_id, "wk_1");
  EXPECT_EQ(snapshot("ckpt_s")->size_bytes, script_->snapshot_size.load())
    << "the size is the worker's answer";
  EXPECT_EQ(workers()[0].reserved.memory_mb, 0u) << "a suspended sandbox reserves nothing";
  EXPECT_EQ(calls(), (std::vector<std::string>{"create sb_s", "ckpt ckpt_s", "destroy sb_s"}))
    << "snapshot first, then release";

  auto restored = run(kind_sandbox_restore, "sb_s", R"({"from_state":"suspended"})");
  ASSERT_EQ(restored.state, operation_state::succeeded) << restored.error->message;
  EXPECT_EQ(json::parse(restored.result_json)["restored_from"], "ckpt_s");
  record = sandbox("sb_s");
  EXPECT_EQ(record.state, sandbox_state::running);
  EXPECT_TRUE(record.snapshot_id.empty());
  EXPECT_EQ(script_->created_from.back(), "ckpt_s");
  EXPECT_FALSE(snapshot("ckpt_s")) << "the suspend snapshot goes once the sandbox runs";
  EXPECT_TRUE(script_->snapshots.empty());
  EXPECT_EQ(workers()[0].reserved.memory_mb, 512u);
}

TEST_F(snapshots, a_refused_suspend_leaves_the_sandbox_running_and_no_snapshot_behind) {
  register_worker();
  running("sb_r");
  script_->checkpoint_error = errc::resource_exhausted; // the disk filled up
  auto suspended = suspend("sb_r", "ckpt_r");
  EXPECT_EQ(suspended.state, operation_state::failed);
  EXPECT_EQ(suspended.error->code, "resource_exhausted");
  EXPECT_EQ(sandbox("sb_r").state, sandbox_state::running);
  EXPECT_FALSE(snapshot("ckpt_r")) << "an incomplete snapshot is never left to be used";
  EXPECT_EQ(script_->destroys.load(), 0);
}

TEST_F(snapshots, a_snapshot_step_run_again_after_its_answer_was_lost_completes_it) {
  register_worker();
  running("sb_x");
  {
    // The worker took it before the control plane crashed.
    std::lock_guard<std::mutex> lock(script_->mutex);
    script_->snapshots.insert("ckpt_x");
  }
  auto suspended = suspend("sb_x", "ckpt_x");
  ASSERT_EQ(suspended.state, operation_state::succeeded) << suspended.error->message;
  EXPECT_TRUE(snapshot("ckpt_x")->complete);
  EXPECT_EQ(sandbox("sb_x").state, sandbox_state::suspended);
  // And a suspend run again once done changes nothing.
  EXPECT_EQ(run(kind_sandbox_suspend, "sb_x", R"({"snapshot_id":"ckpt_x"})").state,
            operation_state::succeeded);
  EXPECT_EQ(script_->destroys.load(), 1);
}

TEST_F(snapshots, rollback_destroys_the_running_sandbox_then_starts_it_from_the_checkpoint) {
  register_worker();
  running("sb_b");
  add_snapshot("ckpt_b", "sb_b");
  ASSERT_EQ(run(kind_checkpoint_create, "sb_b", R"({"checkpoint_id":"ckpt_b"})").state,
            operation_state::succeeded);
  auto rolled =
    run(kind_sandbox_restore, "sb_b", R"({"checkpoint_id":"ckpt_b","from_state":"running"})");
  ASSERT_EQ(rolled.state, operation_state::succeeded) << rolled.error->message;
  EXPECT_EQ(json::parse(rolled.result_json)["restored_from"], "ckpt_b");
  EXPECT_EQ(sandbox("sb_b").state, sandbox_state::running);
  EXPECT_EQ(calls(), (std::vector<std::string>{"create sb_b", "ckpt ckpt_b", "destroy sb_b",
                                               "create sb_b"}));
  EXPECT_EQ(script_->created_from.back(), "ckpt_b");
  EXPECT_TRUE(snapshot("ckpt_b")) << "a checkpoint outlives a rollback to it";
  EXPECT_EQ(workers()[0].reserved.memory_mb, 512u) << "one reservation, kept throughout";

  // Another sandbox's checkpoint is refused before anything changes.
  running("sb_other");
  auto foreign =
    run(kind_sandbox_restore, "sb_other", R"({"checkpoint_id":"ckpt_b","from_state":"running"})");
  EXPECT_EQ(foreign.state, operation_state::failed);
  EXPECT_EQ(foreign.error->code, "not_found");
  EXPECT_EQ(sandbox("sb_other").state, sandbox_state::running);
  EXPECT_EQ(script_->destroys.load(), 1);
}

TEST_F(snapshots, wake_resumes_a_paused_sandbox_and_restores_a_suspended_one) {
  register_worker();
  running("sb_w");
  EXPECT_EQ(run(kind_sandbox_wake, "sb_w").state, operation_state::succeeded);
  EXPECT_EQ(script_->creates.load(), 1) << "waking a running sandbox does nothing";
  ASSERT_EQ(run(kind_sandbox_pause, "sb_w").state, operation_state::succeeded);
  ASSERT_EQ(run(kind_sandbox_wake, "sb_w").state, operation_state::succeeded);
  EXPECT_EQ(sandbox("sb_w").state, sandbox_state::running);
  EXPECT_EQ(script_->creates.load(), 1) << "from paused, a resume";
  ASSERT_EQ(suspend("sb_w", "ckpt_w").state, operation_state::succeeded);
  ASSERT_EQ(run(kind_sandbox_wake, "sb_w").state, operation_state::succeeded);
  EXPECT_EQ(sandbox("sb_w").state, sandbox_state::running);
  EXPECT_EQ(script_->created_from.back(), "ckpt_w") << "from suspended, a restore";
  ASSERT_EQ(run(kind_sandbox_delete, "sb_w").state, operation_state::succeeded);
  auto late = run(kind_sandbox_wake, "sb_w");
  EXPECT_EQ(late.state, operation_state::failed);
  EXPECT_EQ(late.error->code, "wrong_state");
}

TEST_F(snapshots, fork_reports_each_sandbox_and_leaves_nothing_of_those_that_failed) {
  register_worker();
  running("sb_src");
  add_snapshot("ckpt_f", "sb_src");
  {
    std::lock_guard<std::mutex> lock(script_->mutex);
    script_->refused_id = "sb_f2";
  }
  auto forked = run(kind_sandbox_fork, "sb_src",
                    json{{"checkpoint_id", "ckpt_f"},
                         {"sandbox_ids", {"sb_f1", "sb_f2", "sb_f3"}},
                         {"metadata", {{"branch", "yes"}}},
                         {"created_at_ms", 1000}}
                      .dump());
  ASSERT_EQ(forked.state, operation_state::succeeded) << forked.error->message;
  auto result = json::parse(forked.result_json);
  EXPECT_EQ(result["checkpoint_id"], "ckpt_f");
  std::vector<std::string> started = result["sandbox_ids"];
  std::sort(started.begin(), started.end());
  EXPECT_EQ(started, (std::vector<std::string>{"sb_f1", "sb_f3"}));
  ASSERT_EQ(result["failed"].size(), 1u) << result.dump();
  EXPECT_EQ(result["failed"][0]["sandbox_id"], "sb_f2");
  EXPECT_EQ(result["failed"][0]["error"]["code"], "resource_exhausted");

  for (const char* id : {"sb_f1", "sb_f3"}) {
    auto record = sandbox(id);
    EXPECT_EQ(record.state, sandbox_state::running) << id;
    EXPECT_EQ(record.spec.from_checkpoint, "ckpt_f");
    EXPECT_EQ(record.spec.metadata.at("branch"), "yes");
    EXPECT_EQ(record.created_at_ms, 1000);
  }
  auto failed = sandbox("sb_f2");
  EXPECT_EQ(failed.state, sandbox_state::destroyed);
  ASSERT_TRUE(failed.error_reason);
  EXPECT_EQ(workers()[0].reserved.memory_mb, 3u * 512u) << "the source and two forks";

  // Run again (a lost answer): the same ids, nothing new.
  auto again =
    run(kind_sandbox_fork, "sb_src",
        json{{"checkpoint_id", "ckpt_f"}, {"sandbox_ids", {"sb_f1", "sb_f2", "sb_f3"}}}.dump());
  EXPECT_EQ(again.state, operation_state::succeeded);
  EXPECT_EQ(script_->creates.load(), 1 + 3);
}

TEST_F(snapshots, verbs_allow_what_each_state_can_do) {
  using schema::sandbox_state;
  EXPECT_TRUE(verb_allowed(sandbox_verb::suspend, sandbox_state::paused));
  EXPECT_FALSE(verb_allowed(sandbox_verb::suspend, sandbox_state::suspended));
  EXPECT_TRUE(verb_allowed(sandbox_verb::restore, sandbox_state::suspended));
  EXPECT_FALSE(verb_allowed(sandbox_verb::restore, sandbox_state::running));
  EXPECT_TRUE(verb_allowed(sandbox_verb::rollback, sandbox_state::running));
  EXPECT_FALSE(verb_allowed(sandbox_verb::rollback, sandbox_state::destroyed));
  EXPECT_TRUE(verb_allowed(sandbox_verb::wake, sandbox_state::running));
  EXPECT_FALSE(verb_allowed(sandbox_verb::wake, sandbox_state::error));
  EXPECT_FALSE(verb_allowed(sandbox_verb::fork, sandbox_state::suspended));
  EXPECT_FALSE(verb_allowed(sandbox_verb::checkpoint, sandbox_state::creating));
}

} // namespace
} // namespace airlock::actors
