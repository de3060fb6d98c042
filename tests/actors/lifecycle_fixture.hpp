#pragma once
// The lifecycle procedures' test fixture: the real operation engine, registry
// and scheduler, against a node actor whose answers each test chooses
// (lifecycle_test.cpp, snapshot_procedures_test.cpp).

#include <caf/actor_system.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "actors/operation_engine.hpp"
#include "actors/reconciler.hpp"
#include "actors/sandbox_procedures.hpp"
#include "actors/sandbox_registry.hpp"
#include "actors/system_config.hpp"
#include "scheduler/scheduler_actor.hpp"
#include "storage/commit_journal.hpp"

namespace airlock::actors::test {

using std::chrono::seconds;

/// What the fake worker does; shared with the node actor (atomics: it runs
/// on CAF threads).
struct node_script {
  std::atomic<errc> create_error{errc::none};
  std::atomic<errc> pause_error{errc::none};
  std::atomic<errc> checkpoint_error{errc::none};
  std::atomic<errc> claim_error{errc::none};
  /// What a recreate after a worker restart answers: not_found (the files
  /// did not survive) unless a test says otherwise.
  std::atomic<errc> recreate_error{errc::not_found};
  std::atomic<int> creates{0};
  std::atomic<int> destroys{0};
  std::atomic<int> recreates{0};
  std::mutex mutex;                      ///< guards the four below
  std::string refused_id;                ///< a create of this id is refused
  std::vector<std::string> created_from; ///< each create's from_checkpoint, in order
  std::set<std::string> snapshots;       ///< snapshots the worker holds
  std::vector<std::string> calls;        ///< "create ID", "destroy ID", "ckpt ID" in order
  std::vector<process_view> processes;   ///< what dp_procs answers for any sandbox
  /// What dp_quiet answers: ms since a client of the worker's own listener
  /// used a sandbox (-1: none).
  std::atomic<int64_t> quiet_ms{-1};
  std::atomic<uint64_t> snapshot_size{4096}; ///< what nd_ckpt answers
  /// Above 0: creates wait for a first build of their template, which
  /// reports progress to this many watches (nd_twatch) and ends at the next.
  std::atomic<int> build_watches_to_finish{0};
  std::atomic<int> build_watches{0};
  std::atomic<bool> build_watch_cancelled{false}; ///< a watch asked to cancel
  /// Creates waiting for that build, by sandbox id; guarded by mutex.
  std::vector<std::pair<std::string, caf::typed_response_promise<node_sandbox>>> held_creates;

  void note(const std::string& call) {
    std::lock_guard<std::mutex> lock(mutex);
    calls.push_back(call);
  }
};

inline node_actor spawn_fake_node(caf::actor_system& system, std::shared_ptr<node_script> script) {
  auto reply = [](const std::string& id, schema::sandbox_state state) {
    return node_sandbox{id, state};
  };
  return system.spawn([script, reply](node_actor::pointer self) -> node_actor::behavior_type {
    return {
      [script, reply, self](nd_create_atom,
                            schema::sandbox_record& record) -> caf::result<node_sandbox> {
        ++script->creates;
        if (auto code = script->create_error.load(); code != errc::none)
          return make_error(code, "the fake worker refuses");
        std::lock_guard<std::mutex> lock(script->mutex);
        if (script->build_watches_to_finish.load() > 0) {
          auto promise = self->make_response_promise<node_sandbox>();
          script->held_creates.emplace_back(record.id, promise);
          return promise;
        }
        if (record.id == script->refused_id)
          return make_error(errc::resource_exhausted, "the fake worker refuses " + record.id);
        if (!record.spec.from_checkpoint.empty()
            && script->snapshots.count(record.spec.from_checkpoint) == 0)
          return make_error(errc::not_found, "no snapshot " + record.spec.from_checkpoint);
        script->created_from.push_back(record.spec.from_checkpoint);
        script->calls.push_back("create " + record.id);
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
        script->note("destroy " + id);
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
      [script](dp_procs_atom, std::string&) {
        std::lock_guard<std::mutex> lock(script->mutex);
        return script->processes;
      },
      [](dp_file_atom, std::string&, file_spec&) -> caf::result<file_result> {
        return make_error(errc::internal);
      },
      [](actors::dp_watch_atom, std::string&, actors::watch_request&)
        -> caf::result<actors::watch_batch> { return make_error(errc::internal); },
      [](actors::dp_usage_atom, std::string&) -> caf::result<actors::sandbox_usage> {
        return make_error(errc::internal);
      },
      [](nd_egress_atom, schema::sandbox_record&) -> caf::result<node_sandbox> {
        return make_error(errc::unimplemented);
      },
      [](actors::nd_metrics_atom) { return std::string{}; },
      [](actors::nd_load_atom) { return schema::worker_heartbeat{}; },
      [script](actors::nd_ckpt_atom, std::string&, std::string& id, bool) -> caf::result<uint64_t> {
        if (auto code = script->checkpoint_error.load(); code != errc::none)
          return make_error(code, "the fake worker refuses the snapshot");
        std::lock_guard<std::mutex> lock(script->mutex);
        if (!script->snapshots.insert(id).second)
          return make_error(errc::already_exists, "snapshot " + id + " exists");
        script->calls.push_back("ckpt " + id);
        return script->snapshot_size.load();
      },
      [script](actors::nd_ckptdel_atom, std::string& id) -> caf::result<bool> {
        std::lock_guard<std::mutex> lock(script->mutex);
        script->snapshots.erase(id);
        return true;
      },
      [script](actors::nd_ckpts_atom) {
        std::lock_guard<std::mutex> lock(script->mutex);
        return std::vector<std::string>(script->snapshots.begin(), script->snapshots.end());
      },
      [script, reply](actors::nd_recreate_atom,
                      schema::sandbox_record& record) -> caf::result<node_sandbox> {
        ++script->recreates;
        if (auto code = script->recreate_error.load(); code != errc::none)
          return make_error(code, "no files of " + record.id + " on the fake worker");
        script->note("recreate " + record.id);
        return reply(record.id, schema::sandbox_state::running);
      },
      [script](dp_quiet_atom, std::string&) { return script->quiet_ms.load(); },
      [](nd_spool_atom, std::string&, uint64_t, std::string&, bool) -> caf::result<uint64_t> {
        return make_error(errc::unimplemented, "the fake worker takes no uploads");
      },
      [](nd_tbuild_atom, template_build&) -> caf::result<template_built> {
        return make_error(errc::unimplemented, "the fake worker builds no templates");
      },
      [](nd_tdel_atom, std::string&) { return true; },
      [script](nd_twatch_atom, std::string& name, uint64_t,
               bool cancel) -> caf::result<schema::template_progress> {
        const int finish_at = script->build_watches_to_finish.load();
        if (finish_at == 0)
          return make_error(errc::not_found, "no build of " + name + " on the stub node");
        script->build_watch_cancelled = script->build_watch_cancelled || cancel;
        schema::template_progress at;
        const int watch = ++script->build_watches;
        if (watch > finish_at) { // the build ends: its creates go on
          std::lock_guard<std::mutex> lock(script->mutex);
          script->build_watches_to_finish = 0;
          for (auto& [id, held] : script->held_creates)
            held.deliver(node_sandbox{id, schema::sandbox_state::running});
          script->held_creates.clear();
          return at; // not building any more
        }
        at.building = true;
        at.step = "download " + name;
        at.percent = 10 * watch;
        return at;
      },
      [script, reply](nd_claim_atom, schema::sandbox_record& record) -> caf::result<node_sandbox> {
        if (auto code = script->claim_error.load(); code != errc::none)
          return make_error(code, "the fake worker refuses the claim");
        script->note("claim " + record.id + " for " + record.tenant_id);
        return reply(record.id, schema::sandbox_state::running);
      },
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
    options.worker_wait_ms = 300;  // how long a step waits for an absent worker
    options.progress_poll_ms = 20; // a held create's build progress, read quickly
    procedures_ = spawn_sandbox_procedures(system_, registry_, scheduler_, options);
    operation_engine_deps engine_deps{store_.get(), &journal_, &clock_, &entropy_, procedures_, {}};
    engine_ = spawn_operation_engine(system_, {}, std::move(engine_deps));
    node_ = spawn_fake_node(system_, script_);
  }

  ~lifecycle() override {
    std::vector<caf::actor> actors{
      caf::actor_cast<caf::actor>(registry_), caf::actor_cast<caf::actor>(scheduler_),
      caf::actor_cast<caf::actor>(engine_), caf::actor_cast<caf::actor>(node_)};
    for (const auto& [kind, runner] : procedures_)
      actors.push_back(caf::actor_cast<caf::actor>(runner));
    for (const auto& actor : actors)
      caf::anon_send_exit(actor, caf::exit_reason::user_shutdown);
    // They use the store and the clock, which go before the actor system:
    // every one must be gone first.
    for (const auto& actor : actors)
      self_->wait_for(actor);
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

  /// Stores a snapshot record (not complete) as the API does before the
  /// operation that takes it.
  void add_snapshot(const std::string& id, const std::string& sandbox_id,
                    schema::snapshot_kind kind = schema::snapshot_kind::checkpoint) {
    schema::snapshot_record snapshot;
    snapshot.id = id;
    snapshot.kind = kind;
    snapshot.sandbox_id = sandbox_id;
    snapshot.tenant_id = "t";
    snapshot.template_name = "minimal";
    self_->request(registry_, seconds(5), rg_snapsave_atom::value, snapshot)
      .receive([](schema::snapshot_record&) {},
               [](caf::error& error) { FAIL() << to_status(error).message; });
  }

  /// The snapshot's record, or nothing.
  std::optional<schema::snapshot_record> snapshot(const std::string& id) {
    std::optional<schema::snapshot_record> found;
    self_->request(registry_, seconds(5), rg_snapget_atom::value, id, std::string{})
      .receive([&found](schema::snapshot_record& record) { found = record; }, [](caf::error&) {});
    return found;
  }

  /// Waits for the operation first created with Idempotency-Key `key`
  /// (tenant "t") to end; its record (empty id: there is none).
  schema::operation_record wait_keyed(const std::string& key) {
    std::string op_id;
    self_->request(registry_, seconds(5), rg_opkey_atom::value, std::string("t"), key)
      .receive([&op_id](std::string& id) { op_id = id; },
               [](caf::error& error) { FAIL() << to_status(error).message; });
    schema::operation_record done;
    if (op_id.empty())
      return done;
    self_
      ->request(engine_, seconds(30), op_wait_atom::value, op_id, std::string("t"),
                uint64_t{20'000})
      .receive([&done](schema::operation_record& record) { done = record; },
               [](caf::error& error) { FAIL() << to_status(error).message; });
    return done;
  }

  /// Runs operation `kind` on `id` to its end.
  schema::operation_record run(const std::string& kind, const std::string& id,
                               const std::string& params_json = "{}") {
    operation_request request{kind, id, "t", params_json, {}, 0};
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

} // namespace airlock::actors::test
