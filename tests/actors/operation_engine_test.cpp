#include <gtest/gtest.h>

#include "engine_fixture.hpp"

namespace airlock::testing {
namespace {

using actors::step_outcome;
using actors::step_request;
using schema::operation_state;

/// Steps 0..last-1 advance (leaving "after-N" as step data); step `last` completes.
auto steps_then_complete(uint32_t last) {
  return [last](bool, const step_request& r) -> std::optional<step_outcome> {
    if (r.step < last)
      return step_outcome::advance("after-" + std::to_string(r.step));
    return step_outcome::complete(R"({"done":true})");
  };
}

class operation_engine : public engine_fixture {};

TEST_F(operation_engine, runs_every_step_of_an_operation_to_success) {
  script->answer = steps_then_complete(2);
  start_engine();
  auto created = create();
  ASSERT_TRUE(created) << system.render(created.error());
  EXPECT_FALSE(created->existing);
  EXPECT_EQ(created->record.state, operation_state::pending);
  run();
  auto record = stored(created->record.id);
  EXPECT_EQ(record.state, operation_state::succeeded);
  EXPECT_EQ(record.result_json, R"({"done":true})");
  EXPECT_EQ(record.step, 2u);
  ASSERT_EQ(script->runs(), 3u);
  EXPECT_EQ(script->calls[1].request.step_data, "after-0");
  EXPECT_EQ(script->calls[2].request.step_data, "after-1");
  EXPECT_EQ(script->checks(), 0u);
  storage::operation_store operations{*store};
  EXPECT_TRUE(operations.load_active()->empty())
    << "a finished operation stays in the active index";
}

TEST_F(operation_engine, acknowledges_creation_only_after_the_journal_has_synced_it) {
  start_engine();
  journal.hold = true;
  auto asker = std::make_unique<caf::scoped_actor>(system);
  actors::operation_request request{"test.op", "sb_1", "t1", "{}", "", 0};
  auto pending = (*asker)->request(engine, caf::infinite, actors::op_create_atom::value, request);
  run();
  EXPECT_TRUE((*asker)->mailbox().empty()) << "a reply went out before the record was durable";
  EXPECT_EQ(script->calls.size(), 0u);
  journal.release();
  run();
  ASSERT_FALSE((*asker)->mailbox().empty());
  std::string id;
  pending.receive([&id](actors::create_reply& reply) { id = reply.record.id; },
                  [](caf::error&) { FAIL() << "create failed"; });
  EXPECT_EQ(stored(id).id, id);
}

TEST_F(operation_engine, tells_watchers_every_transition_only_after_it_is_durable) {
  script->answer = [](bool, const step_request&) -> std::optional<step_outcome> {
    return std::nullopt; // hold every step
  };
  start_engine();
  auto created = create();
  ASSERT_TRUE(created);
  auto watcher = std::make_unique<caf::scoped_actor>(system);
  auto first =
    ask<schema::operation_record>(engine, actors::op_watch_atom::value, created->record.id,
                                  std::string{"t1"}, caf::actor_cast<caf::actor>(*watcher));
  ASSERT_TRUE(first);
  std::vector<schema::operation_record> events;
  auto drain = [&] {
    while (!(*watcher)->mailbox().empty())
      (*watcher)->receive([&events](actors::op_event_atom, schema::operation_record& r) {
        events.push_back(std::move(r));
      });
  };
  drain();
  journal.hold = true;
  ASSERT_EQ(script->runs(), 1u);
  caf::anon_send(caf::actor_cast<caf::actor>(script_runner()), release_atom::value,
                 step_outcome::complete());
  run();
  drain();
  auto before = events.size();
  EXPECT_EQ(stored(created->record.id).state, operation_state::running);
  journal.release();
  run();
  drain();
  ASSERT_EQ(events.size(), before + 1);
  EXPECT_EQ(events.back().state, operation_state::succeeded);
  for (size_t i = 1; i < events.size(); ++i)
    EXPECT_EQ(events[i].sequence, events[i - 1].sequence + 1) << "a transition was skipped";
}

TEST_F(operation_engine, deduplicates_requests_that_share_an_idempotency_key) {
  start_engine();
  journal.hold = true;
  auto a1 = std::make_unique<caf::scoped_actor>(system);
  auto a2 = std::make_unique<caf::scoped_actor>(system);
  actors::operation_request request{"test.op", "sb_target", "t1", "{}", "key-1", 0};
  auto r1 = (*a1)->request(engine, caf::infinite, actors::op_create_atom::value, request);
  auto r2 = (*a2)->request(engine, caf::infinite, actors::op_create_atom::value, request);
  run();
  journal.release();
  run();
  actors::create_reply first, second;
  r1.receive([&first](actors::create_reply& r) { first = r; }, [](caf::error&) { FAIL(); });
  r2.receive([&second](actors::create_reply& r) { second = r; }, [](caf::error&) { FAIL(); });
  EXPECT_EQ(first.record.id, second.record.id);
  EXPECT_FALSE(first.existing);
  EXPECT_TRUE(second.existing);
  journal.hold = false;
  journal.release();
  run();
  auto third = create("key-1");
  ASSERT_TRUE(third) << system.render(third.error());
  EXPECT_EQ(third->record.id, first.record.id);
  EXPECT_TRUE(third->existing);
  EXPECT_EQ(script->runs(), 1u) << "a duplicate request ran the operation again";
  auto other_tenant = create("key-1", "{}", "t2");
  ASSERT_TRUE(other_tenant);
  EXPECT_NE(other_tenant->record.id, first.record.id);
}

TEST_F(operation_engine, refuses_an_idempotency_key_reused_for_a_different_request) {
  start_engine();
  ASSERT_TRUE(create("key-2", R"({"a":1})"));
  auto reused = create("key-2", R"({"a":2})");
  ASSERT_FALSE(reused);
  EXPECT_EQ(to_status(reused.error()).code, errc::conflict) << to_status(reused.error()).message;
}

TEST_F(operation_engine, refuses_an_unknown_kind_and_oversized_input) {
  start_engine();
  actors::operation_request request{"no.such", "sb_1", "t1", "{}", "", 0};
  auto unknown = ask<actors::create_reply>(engine, actors::op_create_atom::value, request);
  ASSERT_FALSE(unknown);
  EXPECT_EQ(to_status(unknown.error()).code, errc::invalid_argument);
  auto huge = create("", std::string(options.params_bytes_max + 1, 'x'));
  ASSERT_FALSE(huge);
  EXPECT_EQ(to_status(huge.error()).code, errc::invalid_argument);
  EXPECT_EQ(journal.submitted, 0u);
}

TEST_F(operation_engine, fails_the_operation_when_a_step_fails) {
  script->answer = [](bool, const step_request& r) -> std::optional<step_outcome> {
    if (r.step == 0)
      return step_outcome::advance();
    return step_outcome::fail("no_capacity", "no worker has room");
  };
  start_engine();
  auto created = create();
  run();
  auto record = stored(created->record.id);
  EXPECT_EQ(record.state, operation_state::failed);
  ASSERT_TRUE(record.error);
  EXPECT_EQ(record.error->code, "no_capacity");
}

TEST_F(operation_engine, hides_operations_from_other_tenants) {
  script->answer = [](bool, const step_request&) -> std::optional<step_outcome> {
    return std::nullopt;
  };
  start_engine();
  auto created = create();
  for (auto id : {created->record.id, std::string("op_missing")}) {
    auto foreign =
      ask<schema::operation_record>(engine, actors::op_get_atom::value, id, std::string{"t2"});
    ASSERT_FALSE(foreign);
    EXPECT_EQ(to_status(foreign.error()).code, errc::not_found);
  }
  auto own = ask<schema::operation_record>(engine, actors::op_get_atom::value, created->record.id,
                                           std::string{"t1"});
  EXPECT_TRUE(own);
}

TEST_F(operation_engine, reconciles_an_ambiguous_step_after_recovery_instead_of_rerunning_it) {
  // A previous process persisted "step 1 started" and died before its outcome.
  schema::operation_record record;
  record.id = "op_recovered1";
  record.kind = "test.op";
  record.tenant_id = "t1";
  record.state = operation_state::running;
  record.step = 1;
  record.step_started = true;
  record.attempts = 1;
  record.sequence = 5;
  record.deadline_ms = clock.now_ms() + 60'000;
  storage::write_batch batch;
  storage::operation_store::stage_put(batch, record);
  ASSERT_TRUE(store->write(batch));
  script->answer = [](bool check, const step_request& r) -> std::optional<step_outcome> {
    if (check)
      return step_outcome::advance("reconciled");
    return r.step == 2 ? step_outcome::complete() : step_outcome::fail("bad", "re-ran a step");
  };
  start_engine();
  auto stats = ask<actors::engine_stats>(engine, actors::op_recover_atom::value);
  ASSERT_TRUE(stats);
  EXPECT_EQ(stats->recovered, 1u);
  run();
  ASSERT_GE(script->calls.size(), 2u);
  EXPECT_TRUE(script->calls[0].check) << "the ambiguous step was run again instead of checked";
  EXPECT_EQ(script->calls[0].request.step, 1u);
  EXPECT_FALSE(script->calls[1].check);
  EXPECT_EQ(script->calls[1].request.step, 2u);
  EXPECT_EQ(script->calls[1].request.step_data, "reconciled");
  EXPECT_EQ(stored(record.id).state, operation_state::succeeded);
}

TEST_F(operation_engine, reruns_a_step_that_reconcile_reports_not_done) {
  schema::operation_record record;
  record.id = "op_recovered2";
  record.kind = "test.op";
  record.state = operation_state::running;
  record.step_started = true;
  record.attempts = 1;
  record.sequence = 3;
  storage::write_batch batch;
  storage::operation_store::stage_put(batch, record);
  ASSERT_TRUE(store->write(batch));
  script->answer = [](bool check, const step_request&) -> std::optional<step_outcome> {
    return check ? step_outcome::not_done() : step_outcome::complete();
  };
  start_engine();
  ASSERT_TRUE(ask<actors::engine_stats>(engine, actors::op_recover_atom::value));
  run();
  ASSERT_EQ(script->calls.size(), 2u);
  EXPECT_TRUE(script->calls[0].check);
  EXPECT_FALSE(script->calls[1].check);
  EXPECT_EQ(script->calls[1].request.attempt, 1u)
    << "a step cut short by a restart used up an attempt";
  EXPECT_EQ(stored(record.id).state, operation_state::succeeded);
}

TEST_F(operation_engine, treats_a_step_timeout_as_an_unknown_outcome_and_reconciles) {
  script->answer = [](bool check, const step_request&) -> std::optional<step_outcome> {
    if (check)
      return step_outcome::complete(R"({"via":"check"})");
    return std::nullopt; // the run never answers
  };
  start_engine();
  auto created = create();
  run();
  EXPECT_EQ(script->runs(), 1u);
  EXPECT_EQ(script->checks(), 0u);
  advance_ms(static_cast<int64_t>(options.operation.step_timeout_ms
                                  + options.operation.retry_delay_ms + 20));
  EXPECT_EQ(script->checks(), 1u);
  EXPECT_EQ(script->runs(), 1u) << "a timed-out step was re-run blindly";
  auto record = stored(created->record.id);
  EXPECT_EQ(record.state, operation_state::succeeded);
  EXPECT_EQ(record.result_json, R"({"via":"check"})");
}

TEST_F(operation_engine, fails_a_step_that_never_takes_effect_after_its_attempts_run_out) {
  options.operation.step_attempts_max = 3;
  script->answer = [](bool check, const step_request&) -> std::optional<step_outcome> {
    if (check)
      return step_outcome::not_done();
    return std::nullopt; // every run times out
  };
  start_engine();
  auto created = create();
  advance_ms(10'000);
  auto record = stored(created->record.id);
  EXPECT_EQ(record.state, operation_state::failed);
  ASSERT_TRUE(record.error);
  EXPECT_EQ(record.error->code, "step_attempts_exhausted");
  EXPECT_EQ(script->runs(), 3u);
  EXPECT_EQ(script->checks(), 3u);
}

TEST_F(operation_engine, fails_with_outcome_unknown_when_reconcile_never_learns_the_outcome) {
  options.operation.reconcile_attempts_max = 3;
  script->answer = [](bool, const step_request&) -> std::optional<step_outcome> {
    return step_outcome::unknown();
  };
  start_engine();
  auto created = create();
  advance_ms(2'000);
  auto record = stored(created->record.id);
  EXPECT_EQ(record.state, operation_state::failed);
  ASSERT_TRUE(record.error);
  EXPECT_EQ(record.error->code, "outcome_unknown");
  EXPECT_EQ(script->runs(), 1u);
  EXPECT_EQ(script->checks(), 3u);
}

TEST_F(operation_engine, cancels_a_running_operation_at_its_next_step_boundary) {
  script->answer = [](bool, const step_request&) -> std::optional<step_outcome> {
    return std::nullopt;
  };
  start_engine();
  auto created = create();
  ASSERT_EQ(script->runs(), 1u);
  auto cancel = ask<schema::operation_record>(engine, actors::op_cancel_atom::value,
                                              created->record.id, std::string{"t1"});
  ASSERT_TRUE(cancel) << system.render(cancel.error());
  EXPECT_TRUE(cancel->cancel_requested);
  EXPECT_TRUE(stored(created->record.id).cancel_requested)
    << "cancel answered before it was durable";
  caf::anon_send(caf::actor_cast<caf::actor>(script_runner()), release_atom::value,
                 step_outcome::advance());
  run();
  auto record = stored(created->record.id);
  EXPECT_EQ(record.state, operation_state::cancelled);
  EXPECT_EQ(script->runs(), 1u) << "a step ran after cancellation";
  auto again = ask<schema::operation_record>(engine, actors::op_cancel_atom::value,
                                             created->record.id, std::string{"t1"});
  ASSERT_FALSE(again);
  EXPECT_EQ(to_status(again.error()).code, errc::wrong_state);
}

TEST_F(operation_engine, a_running_step_reports_progress_to_watchers_and_learns_of_a_cancel) {
  script->answer = [](bool, const step_request&) -> std::optional<step_outcome> {
    return std::nullopt; // hold the step: it reports progress meanwhile
  };
  start_engine();
  auto created = create();
  ASSERT_TRUE(created);
  ASSERT_EQ(script->runs(), 1u);
  auto operation = script->calls.back().request.operation;
  ASSERT_TRUE(operation) << "a step must be told its operation to report to";
  auto watcher = std::make_unique<caf::scoped_actor>(system);
  ASSERT_TRUE(ask<schema::operation_record>(engine, actors::op_watch_atom::value,
                                            created->record.id, std::string{"t1"},
                                            caf::actor_cast<caf::actor>(*watcher)));
  auto sequence_before = stored(created->record.id).sequence;

  auto cancel_wanted = ask<bool>(operation, actors::op_progress_atom::value,
                                 std::string{R"({"step":"run 1/2","percent":40})"});
  ASSERT_TRUE(cancel_wanted);
  EXPECT_FALSE(*cancel_wanted);
  std::vector<schema::operation_record> progress;
  while (!(*watcher)->mailbox().empty())
    (*watcher)->receive(
      [&progress](actors::op_progress_atom, schema::operation_record& r) {
        progress.push_back(std::move(r));
      },
      [](actors::op_event_atom, schema::operation_record&) {});
  ASSERT_EQ(progress.size(), 1u);
  EXPECT_EQ(progress[0].progress_json, R"({"step":"run 1/2","percent":40})");
  auto live = ask<schema::operation_record>(engine, actors::op_get_atom::value, created->record.id,
                                            std::string{"t1"});
  ASSERT_TRUE(live);
  EXPECT_EQ(live->progress_json, R"({"step":"run 1/2","percent":40})");
  EXPECT_EQ(stored(created->record.id).sequence, sequence_before)
    << "progress is not a transition of its own";

  // Cancel: the next report learns of it; the step stops with cancelled and
  // the operation ends cancelled (not failed), the last progress written.
  ASSERT_TRUE(ask<schema::operation_record>(engine, actors::op_cancel_atom::value,
                                            created->record.id, std::string{"t1"}));
  cancel_wanted = ask<bool>(operation, actors::op_progress_atom::value,
                            std::string{R"({"step":"run 2/2","percent":70})"});
  ASSERT_TRUE(cancel_wanted);
  EXPECT_TRUE(*cancel_wanted);
  caf::anon_send(caf::actor_cast<caf::actor>(script_runner()), release_atom::value,
                 step_outcome::fail("cancelled", "the build was cancelled"));
  run();
  auto record = stored(created->record.id);
  EXPECT_EQ(record.state, operation_state::cancelled);
  ASSERT_TRUE(record.error);
  EXPECT_EQ(record.error->code, "cancelled");
  EXPECT_EQ(record.progress_json, R"({"step":"run 2/2","percent":70})");
}

TEST_F(operation_engine, a_step_failing_with_cancelled_unasked_is_a_failure) {
  script->answer = [](bool, const step_request&) -> std::optional<step_outcome> {
    return step_outcome::fail("cancelled", "something else stopped it");
  };
  start_engine();
  auto created = create();
  ASSERT_TRUE(created);
  run();
  EXPECT_EQ(stored(created->record.id).state, operation_state::failed);
}

TEST_F(operation_engine, cancels_an_operation_before_its_first_step_runs) {
  start_engine();
  journal.hold = true;
  actors::operation_request request{"test.op", "sb_1", "t1", "{}", "", 0};
  auto asker = send_request(engine, actors::op_create_atom::value, request);
  run();
  journal.release(); // creation durable; the actor now writes "running" (held)
  run();
  std::string id;
  (*asker)->receive([&id](actors::create_reply& r) { id = r.record.id; });
  auto canceller = send_request(engine, actors::op_cancel_atom::value, id, std::string{"t1"});
  run();
  journal.hold = false;
  journal.release();
  run();
  EXPECT_EQ(stored(id).state, operation_state::cancelled);
  EXPECT_EQ(script->calls.size(), 0u);
}

TEST_F(operation_engine, fails_an_operation_that_outlives_its_deadline_and_ignores_the_late_step) {
  script->answer = [](bool, const step_request&) -> std::optional<step_outcome> {
    return std::nullopt;
  };
  options.operation.step_timeout_ms = 1'000'000;
  start_engine();
  actors::operation_request request{"test.op", "sb_1", "t1", "{}", "", 500};
  auto created = ask<actors::create_reply>(engine, actors::op_create_atom::value, request);
  ASSERT_TRUE(created);
  advance_ms(600);
  auto record = stored(created->record.id);
  EXPECT_EQ(record.state, operation_state::failed);
  ASSERT_TRUE(record.error);
  EXPECT_EQ(record.error->code, "deadline_exceeded");
  caf::anon_send(caf::actor_cast<caf::actor>(script_runner()), release_atom::value,
                 step_outcome::complete());
  run();
  EXPECT_EQ(stored(created->record.id).state, operation_state::failed);
}

TEST_F(operation_engine, answers_a_waiter_when_the_operation_ends_or_its_wait_runs_out) {
  script->answer = [](bool, const step_request&) -> std::optional<step_outcome> {
    return std::nullopt;
  };
  start_engine();
  auto created = create();
  auto short_wait = send_request(engine, actors::op_wait_atom::value, created->record.id,
                                 std::string{"t1"}, uint64_t{200});
  auto long_wait = send_request(engine, actors::op_wait_atom::value, created->record.id,
                                std::string{"t1"}, uint64_t{50'000});
  run();
  EXPECT_TRUE((*short_wait)->mailbox().empty());
  advance_ms(250);
  ASSERT_FALSE((*short_wait)->mailbox().empty());
  (*short_wait)->receive([](schema::operation_record& r) {
    EXPECT_EQ(r.state, operation_state::running);
  });
  EXPECT_TRUE((*long_wait)->mailbox().empty());
  caf::anon_send(caf::actor_cast<caf::actor>(script_runner()), release_atom::value,
                 step_outcome::complete());
  run();
  ASSERT_FALSE((*long_wait)->mailbox().empty());
  (*long_wait)->receive([](schema::operation_record& r) {
    EXPECT_EQ(r.state, operation_state::succeeded);
  });
}

TEST_F(operation_engine, retries_a_transition_the_store_refused) {
  start_engine();
  auto created = create();
  ASSERT_TRUE(created);
  journal.failures_left = 3; // the next three writes fail
  advance_ms(1'000);
  EXPECT_EQ(stored(created->record.id).state, operation_state::succeeded);
}

TEST_F(operation_engine, recovers_every_unfinished_operation_and_fails_those_of_unknown_kinds) {
  storage::write_batch batch;
  for (int i = 0; i < 5; ++i) {
    schema::operation_record record;
    record.id = "op_pending" + std::to_string(i);
    record.kind = i == 4 ? "gone.kind" : "test.op";
    record.sequence = 1;
    storage::operation_store::stage_put(batch, record);
  }
  batch.put(storage::keyspace::operations, "op_corrupt", "not capnp");
  batch.put(storage::keyspace::active_ops, "op_corrupt", "");
  ASSERT_TRUE(store->write(batch));
  start_engine();
  auto stats = ask<actors::engine_stats>(engine, actors::op_recover_atom::value);
  ASSERT_TRUE(stats);
  EXPECT_EQ(stats->recovered, 5u);
  EXPECT_EQ(stats->unreadable, 1u);
  run();
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(stored("op_pending" + std::to_string(i)).state, operation_state::succeeded);
  auto orphan = stored("op_pending4");
  EXPECT_EQ(orphan.state, operation_state::failed);
  ASSERT_TRUE(orphan.error);
  EXPECT_EQ(orphan.error->code, "unknown_kind");
  auto again = ask<actors::engine_stats>(engine, actors::op_recover_atom::value);
  EXPECT_EQ(again->recovered, 5u) << "recovery is not idempotent";
}

} // namespace
} // namespace airlock::testing
