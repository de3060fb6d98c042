// The sandbox lifecycle procedures driven by the real operation engine, the
// real registry and the real scheduler, against a node actor whose answers
// each test chooses. Checks what clients see: operation outcomes and the
// sandbox record's state after each verb, failures included.

#include <nlohmann/json.hpp>

#include "tests/actors/lifecycle_fixture.hpp"

namespace airlock::actors {
namespace {

using namespace airlock::actors::test;

TEST_F(lifecycle, create_places_and_runs_the_sandbox_then_delete_destroys_it) {
  register_worker();
  add_sandbox("sb_a");
  auto created = run(kind_sandbox_create, "sb_a");
  EXPECT_EQ(created.state, schema::operation_state::succeeded) << created.error->message;
  auto record = sandbox("sb_a");
  EXPECT_EQ(record.state, schema::sandbox_state::running);
  EXPECT_EQ(record.worker_id, "wk_1");
  EXPECT_EQ(record.data_url, "http://worker");
  ASSERT_EQ(workers().size(), 1u);
  EXPECT_EQ(workers()[0].reserved.memory_mb, 512u);

  auto deleted = run(kind_sandbox_delete, "sb_a");
  EXPECT_EQ(deleted.state, schema::operation_state::succeeded);
  EXPECT_EQ(sandbox("sb_a").state, schema::sandbox_state::destroyed);
  EXPECT_EQ(script_->destroys.load(), 1);
  EXPECT_EQ(workers()[0].reserved.memory_mb, 0u) << "the reservation is released";
}

// A create whose template is being built on its worker for the first time
// shows that build's progress in its own operation, and never cancels it
// (other creates wait for the same build).
TEST_F(lifecycle, create_waiting_for_its_templates_first_build_reports_the_builds_progress) {
  register_worker();
  add_sandbox("sb_wait");
  script_->build_watches_to_finish = 3;
  auto created = run(kind_sandbox_create, "sb_wait");
  EXPECT_EQ(created.state, schema::operation_state::succeeded)
    << (created.error ? created.error->message : "");
  EXPECT_EQ(script_->build_watches.load(), 4); // three while building, one that saw it end
  auto progress = nlohmann::json::parse(created.progress_json, nullptr, false);
  ASSERT_TRUE(progress.is_object()) << created.progress_json;
  EXPECT_EQ(progress["step"], "building template minimal: download minimal");
  EXPECT_EQ(progress["percent"], 30);
  EXPECT_FALSE(script_->build_watch_cancelled.load());
  EXPECT_EQ(sandbox("sb_wait").state, schema::sandbox_state::running);
}

TEST_F(lifecycle, create_without_any_worker_fails_and_ends_the_sandbox_destroyed_with_why) {
  add_sandbox("sb_b");
  auto created = run(kind_sandbox_create, "sb_b");
  EXPECT_EQ(created.state, schema::operation_state::failed);
  auto record = sandbox("sb_b");
  EXPECT_EQ(record.state, schema::sandbox_state::destroyed) << "nothing of it exists anywhere";
  ASSERT_TRUE(record.error_reason.has_value());
  EXPECT_EQ(record.error_reason->code, "unavailable");
}

TEST_F(lifecycle, create_larger_than_any_worker_fails_with_resource_exhausted) {
  register_worker(1024);
  add_sandbox("sb_c", 8192);
  auto created = run(kind_sandbox_create, "sb_c");
  EXPECT_EQ(created.state, schema::operation_state::failed);
  ASSERT_TRUE(created.error.has_value());
  EXPECT_EQ(created.error->code, "resource_exhausted");
  EXPECT_EQ(sandbox("sb_c").state, schema::sandbox_state::destroyed);
}

TEST_F(lifecycle, a_worker_refusing_the_create_frees_the_reservation) {
  register_worker();
  script_->create_error = errc::not_found; // e.g. an unknown template
  add_sandbox("sb_d");
  auto created = run(kind_sandbox_create, "sb_d");
  EXPECT_EQ(created.state, schema::operation_state::failed);
  EXPECT_EQ(created.error->code, "not_found");
  EXPECT_EQ(sandbox("sb_d").state, schema::sandbox_state::destroyed);
  EXPECT_EQ(sandbox("sb_d").error_reason->code, "not_found");
  EXPECT_EQ(workers()[0].reserved.memory_mb, 0u);
}

TEST_F(lifecycle, pause_and_resume_move_the_state_and_refuse_the_wrong_one) {
  register_worker();
  add_sandbox("sb_e");
  ASSERT_EQ(run(kind_sandbox_create, "sb_e").state, schema::operation_state::succeeded);
  // Steps are idempotent: a resume that finds the sandbox running (a rerun
  // after a crash) is done; the API refuses it with 409 before it starts.
  EXPECT_EQ(run(kind_sandbox_resume, "sb_e").state, schema::operation_state::succeeded);
  EXPECT_EQ(sandbox("sb_e").state, schema::sandbox_state::running);
  ASSERT_EQ(run(kind_sandbox_delete, "sb_e").state, schema::operation_state::succeeded);
  auto late = run(kind_sandbox_pause, "sb_e");
  EXPECT_EQ(late.state, schema::operation_state::failed) << "a destroyed sandbox cannot pause";
  EXPECT_EQ(late.error->code, "wrong_state");
  add_sandbox("sb_e2");
  ASSERT_EQ(run(kind_sandbox_create, "sb_e2").state, schema::operation_state::succeeded);
  EXPECT_EQ(sandbox("sb_e2").state, schema::sandbox_state::running);
  EXPECT_EQ(run(kind_sandbox_pause, "sb_e2").state, schema::operation_state::succeeded);
  EXPECT_EQ(sandbox("sb_e2").state, schema::sandbox_state::paused);
  EXPECT_EQ(run(kind_sandbox_resume, "sb_e2").state, schema::operation_state::succeeded);
  EXPECT_EQ(sandbox("sb_e2").state, schema::sandbox_state::running);
}

TEST_F(lifecycle, a_worker_refusing_pause_leaves_the_sandbox_running) {
  register_worker();
  add_sandbox("sb_f");
  ASSERT_EQ(run(kind_sandbox_create, "sb_f").state, schema::operation_state::succeeded);
  script_->pause_error = errc::wrong_state;
  auto paused = run(kind_sandbox_pause, "sb_f");
  EXPECT_EQ(paused.state, schema::operation_state::failed);
  EXPECT_EQ(sandbox("sb_f").state, schema::sandbox_state::running);
}

TEST_F(lifecycle, deleting_twice_is_harmless) {
  register_worker();
  add_sandbox("sb_g");
  ASSERT_EQ(run(kind_sandbox_create, "sb_g").state, schema::operation_state::succeeded);
  EXPECT_EQ(run(kind_sandbox_delete, "sb_g").state, schema::operation_state::succeeded);
  EXPECT_EQ(run(kind_sandbox_delete, "sb_g").state, schema::operation_state::succeeded);
  EXPECT_EQ(sandbox("sb_g").state, schema::sandbox_state::destroyed);
}

TEST_F(lifecycle, reconciliation_marks_sandboxes_their_worker_no_longer_runs) {
  register_worker();
  add_sandbox("sb_h");
  ASSERT_EQ(run(kind_sandbox_create, "sb_h").state, schema::operation_state::succeeded);
  add_sandbox("sb_never_placed");
  // The fake worker lists nothing: as after a restart that cleaned up.
  auto reconciler = spawn_reconciler(system_, registry_, scheduler_);
  uint64_t marked = 0;
  self_->request(reconciler, seconds(10), rc_run_atom::value)
    .receive([&marked](uint64_t count) { marked = count; },
             [](caf::error& error) { FAIL() << to_status(error).message; });
  EXPECT_EQ(marked, 1u);
  auto record = sandbox("sb_h");
  EXPECT_EQ(record.state, schema::sandbox_state::error);
  ASSERT_TRUE(record.error_reason.has_value());
  EXPECT_NE(record.error_reason->message.find("delete it"), std::string::npos);
  EXPECT_EQ(sandbox("sb_never_placed").state, schema::sandbox_state::creating);
  caf::anon_send_exit(reconciler, caf::exit_reason::user_shutdown);
}

TEST_F(lifecycle, reconciliation_brings_back_a_sandbox_whose_files_survived_a_worker_restart) {
  register_worker();
  add_sandbox("sb_kept");
  ASSERT_EQ(run(kind_sandbox_create, "sb_kept").state, schema::operation_state::succeeded);
  ASSERT_EQ(run(kind_sandbox_pause, "sb_kept").state, schema::operation_state::succeeded);
  script_->recreate_error = errc::none; // the worker kept its files
  auto reconciler = spawn_reconciler(system_, registry_, scheduler_);
  uint64_t marked = 1;
  self_->request(reconciler, seconds(10), rc_run_atom::value)
    .receive([&marked](uint64_t count) { marked = count; },
             [](caf::error& error) { FAIL() << to_status(error).message; });
  EXPECT_EQ(marked, 0u);
  EXPECT_EQ(script_->recreates.load(), 1);
  auto record = sandbox("sb_kept");
  EXPECT_EQ(record.state, schema::sandbox_state::running) << "brought back running";
  EXPECT_FALSE(record.error_reason.has_value());
  caf::anon_send_exit(reconciler, caf::exit_reason::user_shutdown);
}

TEST_F(lifecycle, reconciliation_deletes_snapshots_no_record_names) {
  register_worker();
  add_sandbox("sb_snap");
  ASSERT_EQ(run(kind_sandbox_create, "sb_snap").state, schema::operation_state::succeeded);
  add_snapshot("ckpt_known", "sb_snap");
  {
    std::lock_guard<std::mutex> lock(script_->mutex);
    script_->snapshots = {"ckpt_known", "ckpt_orphan"}; // left by a crash
  }
  auto reconciler = spawn_reconciler(system_, registry_, scheduler_);
  self_->request(reconciler, seconds(10), rc_run_atom::value)
    .receive([](uint64_t) {}, [](caf::error& error) { FAIL() << to_status(error).message; });
  {
    std::lock_guard<std::mutex> lock(script_->mutex);
    EXPECT_EQ(script_->snapshots, (std::set<std::string>{"ckpt_known"}));
  }
  caf::anon_send_exit(reconciler, caf::exit_reason::user_shutdown);
}

TEST_F(lifecycle, verbs_are_checked_against_the_state_before_an_operation_starts) {
  EXPECT_TRUE(verb_allowed(sandbox_verb::pause, schema::sandbox_state::running));
  EXPECT_FALSE(verb_allowed(sandbox_verb::pause, schema::sandbox_state::paused));
  EXPECT_TRUE(verb_allowed(sandbox_verb::resume, schema::sandbox_state::paused));
  EXPECT_FALSE(verb_allowed(sandbox_verb::resume, schema::sandbox_state::running));
  EXPECT_TRUE(verb_allowed(sandbox_verb::destroy, schema::sandbox_state::error));
  EXPECT_FALSE(verb_allowed(sandbox_verb::destroy, schema::sandbox_state::destroyed));
}

} // namespace
} // namespace airlock::actors
