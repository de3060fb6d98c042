// The sandbox lifecycle procedures driven by the real operation engine, the
// real registry and the real scheduler, against a node actor whose answers
// each test chooses. Checks what clients see: operation outcomes and the
// sandbox record's state after each verb, failures included.

#include <caf/actor_system.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>

#include "actors/operation_engine.hpp"
#include "actors/reconciler.hpp"
#include "actors/sandbox_procedures.hpp"
#include "actors/sandbox_registry.hpp"
#include "actors/system_config.hpp"
#include "scheduler/scheduler_actor.hpp"
#include "storage/commit_journal.hpp"

namespace airlock::actors {
namespace {

using std::chrono::seconds;

/// What the fake worker does; shared with the node actor (atomics: it runs
/// on CAF threads).
struct node_script {
  std::atomic<errc> create_error{errc::none};
  std::atomic<errc> pause_error{errc::none};
  std::atomic<int> creates{0};
  std::atomic<int> destroys{0};
};

node_actor spawn_fake_node(caf::actor_system& system, std::shared_ptr<node_script> script) {
  auto reply = [](const std::string& id, schema::sandbox_state state) {
    return node_sandbox{id, state};
  };
  return system.spawn([script, reply](node_actor::pointer) -> node_actor::behavior_type {
    return {
      [script, reply](nd_create_atom, schema::sandbox_record& record) -> caf::result<node_sandbox> {
        ++script->creates;
        if (auto code = script->create_error.load(); code != errc::none)
          return make_error(code, "the fake worker refuses");
        return reply(record.id, schema::sandbox_state::running);
      },
      [script, reply](nd_pause_atom, std::string& id) -> caf::result<node_sandbox> {
        if (auto code = script->pause_error.load(); code != errc::none)
          return make_error(code, "the fake worker refuses");
        return reply(id, schema::sandbox_state::paused);
      },
      [reply](nd_resume_atom, std::string& id) -> caf::result<node_sandbox> {
        return reply(id, schema::sandbox_state::running);
      },
      [script, reply](nd_destroy_atom, std::string& id) -> caf::result<node_sandbox> {
        ++script->destroys;
        return reply(id, schema::sandbox_state::destroyed);
      },
      [](nd_list_atom) { return std::vector<node_sandbox>{}; },
      [](dp_exec_atom, std::string&, exec_spec&) -> caf::result<process_view> {
        return make_error(errc::internal);
      },
      [](dp_output_atom, std::string&, output_request&) -> caf::result<output_batch> {
        return make_error(errc::internal);
      },
      [](dp_stdin_atom, std::string&, std::string&, std::string&, bool) -> caf::result<bool> {
        return make_error(errc::internal);
      },
      [](dp_signal_atom, std::string&, std::string&, int32_t) -> caf::result<bool> {
        return make_error(errc::internal);
      },
      [](dp_resize_atom, std::string&, std::string&, uint16_t, uint16_t) -> caf::result<bool> {
        return make_error(errc::internal);
      },
      [](dp_proc_atom, std::string&, std::string&, uint32_t) -> caf::result<process_view> {
        return make_error(errc::internal);
      },
      [](dp_procs_atom, std::string&) { return std::vector<process_view>{}; },
      [](dp_file_atom, std::string&, file_spec&) -> caf::result<file_result> {
        return make_error(errc::internal);
      },
      [](nd_egress_atom, schema::sandbox_record&) -> caf::result<node_sandbox> {
        return make_error(errc::unimplemented);
      },
      [](actors::nd_metrics_atom) { return std::string{}; },
      [](actors::nd_load_atom) { return schema::worker_heartbeat{}; },
      [](actors::nd_ckpt_atom, std::string&, std::string&) -> caf::result<bool> {
        return make_error(errc::unimplemented);
      },
      [](actors::nd_ckptdel_atom, std::string&) -> caf::result<bool> {
        return make_error(errc::unimplemented);
      },
      [](actors::nd_ckpts_atom) { return std::vector<std::string>{}; },
    };
  });
}

class lifecycle : public ::testing::Test {
protected:
  lifecycle()
      : config_(actor_system_options{2}), system_(config_), store_(storage::make_memory_store()),
        journal_(*store_), self_(system_) {
    registry_ = spawn_sandbox_registry(system_, *store_, clock_);
    scheduler::scheduler_deps deps;
    deps.token_public_key = "key";
    deps.clock = &clock_;
    deps.entropy = &entropy_;
    scheduler_ = scheduler::spawn_scheduler(system_, {}, deps);
    sandbox_procedure_options options;
    options.worker_wait_ms = 300; // how long a step waits for an absent worker
    procedures_ = spawn_sandbox_procedures(system_, registry_, scheduler_, options);
    operation_engine_deps engine_deps{store_.get(), &journal_, &clock_, &entropy_, procedures_, {}};
    engine_ = spawn_operation_engine(system_, {}, std::move(engine_deps));
    node_ = spawn_fake_node(system_, script_);
  }

  ~lifecycle() override {
    for (const auto& [kind, runner] : procedures_)
      caf::anon_send_exit(runner, caf::exit_reason::user_shutdown);
    for (const caf::actor& actor :
         {caf::actor_cast<caf::actor>(registry_), caf::actor_cast<caf::actor>(scheduler_),
          caf::actor_cast<caf::actor>(engine_), caf::actor_cast<caf::actor>(node_)})
      caf::anon_send_exit(actor, caf::exit_reason::user_shutdown);
  }

  void register_worker(uint32_t memory_mb = 4096) {
    schema::worker_registration registration;
    registration.id = "wk_1";
    registration.data_url = "http://worker";
    registration.capacity = {4000, memory_mb, 100'000, 10};
    bool ok = false;
    self_->request(scheduler_, seconds(5), sc_register_atom::value, registration, node_)
      .receive([&ok](registration_ack&) { ok = true; },
               [](caf::error& error) { FAIL() << to_status(error).message; });
    ASSERT_TRUE(ok);
  }

  /// Stores a new sandbox record as the API does before its create operation.
  void add_sandbox(const std::string& id, uint32_t memory_mb = 512) {
    schema::sandbox_record record;
    record.id = id;
    record.tenant_id = "t";
    record.spec.template_name = "minimal";
    record.spec.memory_mb = memory_mb;
    // Requests as large as the limits: these tests reserve whole sandboxes.
    record.spec.memory_request_mb = memory_mb;
    record.spec.cpu_request_millis = record.spec.cpu_millis;
    self_->request(registry_, seconds(5), rg_create_atom::value, record)
      .receive([](schema::sandbox_record&) {},
               [](caf::error& error) { FAIL() << to_status(error).message; });
  }

  /// Runs operation `kind` on `id` to its end.
  schema::operation_record run(const std::string& kind, const std::string& id) {
    operation_request request{kind, id, "t", "{}", {}, 0};
    std::string op_id;
    self_->request(engine_, seconds(5), op_create_atom::value, request)
      .receive([&op_id](create_reply& reply) { op_id = reply.record.id; },
               [](caf::error& error) { FAIL() << to_status(error).message; });
    schema::operation_record done;
    self_
      ->request(engine_, seconds(30), op_wait_atom::value, op_id, std::string("t"),
                uint64_t{20'000})
      .receive([&done](schema::operation_record& record) { done = record; },
               [](caf::error& error) { FAIL() << to_status(error).message; });
    EXPECT_TRUE(schema::is_terminal(done.state)) << to_string(done.state);
    return done;
  }

  schema::sandbox_record sandbox(const std::string& id) {
    schema::sandbox_record found;
    self_->request(registry_, seconds(5), rg_get_atom::value, id, std::string{})
      .receive([&found](schema::sandbox_record& record) { found = record; },
               [](caf::error& error) { FAIL() << to_status(error).message; });
    return found;
  }

  std::vector<worker_view> workers() {
    std::vector<worker_view> out;
    self_->request(scheduler_, seconds(5), sc_workers_atom::value)
      .receive([&out](std::vector<worker_view>& views) { out = views; },
               [](caf::error& error) { FAIL() << to_status(error).message; });
    return out;
  }

  system_config config_;
  caf::actor_system system_;
  std::unique_ptr<storage::kv_store> store_;
  storage::direct_journal journal_;
  manual_wall_clock clock_;
  seeded_entropy entropy_{7};
  caf::scoped_actor self_;
  sandbox_registry_actor registry_;
  scheduler_actor scheduler_;
  procedure_table procedures_;
  operation_engine_actor engine_;
  std::shared_ptr<node_script> script_ = std::make_shared<node_script>();
  node_actor node_;
};

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
