#include "actors/sandbox_procedures.hpp"

#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "actors/build_progress.hpp"
#include "actors/errors.hpp"
#include "actors/procedure_steps.hpp"
#include "actors/runtime_choice.hpp"

namespace airlock::actors {

schema::placement_request placement_for(const schema::sandbox_record& record,
                                        std::string snapshot_worker) {
  const auto& spec = record.spec;
  return schema::placement_request{
    record.id, spec.template_name,
    schema::resources{spec.cpu_millis, spec.memory_mb, spec.disk_mb, 1},
    schema::resources{spec.cpu_request_millis, spec.memory_request_mb, spec.disk_request_mb, 1},
    // A snapshot lives on one worker, as does a template version built from
    // an upload: the sandbox goes where its files are.
    snapshot_worker.empty() ? spec.template_worker_id : std::move(snapshot_worker),
    runtime_of(spec)};
}

schema::snapshot_record new_snapshot_record(const schema::sandbox_record& sandbox,
                                            schema::snapshot_kind kind, std::string id,
                                            int64_t created_at_ms) {
  schema::snapshot_record snapshot;
  snapshot.id = std::move(id);
  snapshot.kind = kind;
  snapshot.sandbox_id = sandbox.id;
  snapshot.tenant_id = sandbox.tenant_id;
  snapshot.template_name = sandbox.spec.template_name;
  if (sandbox.spec.template_version != 0)
    snapshot.template_version = std::to_string(sandbox.spec.template_version);
  snapshot.runtime = runtime_of(sandbox.spec);
  // A VM's snapshots hold its memory: its processes go on after a restore
  // and in every fork. Its disk alone would miss what the guest has not
  // written back, so there are no files-only ones.
  snapshot.memory_persisted = snapshot.runtime == microvm_runtime_name;
  snapshot.created_at_ms = created_at_ms;
  return snapshot;
}

namespace procedure_detail {

nlohmann::json step_context::params() const {
  auto parsed = nlohmann::json::parse(request.params_json, nullptr, false);
  return parsed.is_object() ? parsed : nlohmann::json::object();
}

std::string step_context::param_text(const char* name) const {
  auto all = params();
  auto found = all.find(name);
  return found != all.end() && found->is_string() ? found->get<std::string>() : std::string{};
}

void step_context::with_record(const std::string& id, std::function<void(sandbox_record)> next) {
  auto ctx = shared_from_this();
  self->request(deps.registry, control_timeout(), rg_get_atom::value, id, std::string{})
    .then([next](sandbox_record& record) { next(std::move(record)); },
          [ctx](caf::error& error) {
            auto failure = to_status(error);
            if (failure.code == errc::not_found)
              ctx->deliver(fail_with(failure));
            else
              ctx->deliver_unknown(error);
          });
}

void step_context::save(sandbox_record record, std::function<void(sandbox_record)> next) {
  auto ctx = shared_from_this();
  self->request(deps.registry, control_timeout(), rg_save_atom::value, std::move(record))
    .then([next](sandbox_record& saved) { next(std::move(saved)); },
          [ctx](caf::error& error) { ctx->deliver_unknown(error); });
}

void step_context::with_snapshot(const std::string& id, std::function<void(snapshot_record)> next,
                                 std::function<void()> missing) {
  auto ctx = shared_from_this();
  self->request(deps.registry, control_timeout(), rg_snapget_atom::value, id, std::string{})
    .then([next](snapshot_record& snapshot) { next(std::move(snapshot)); },
          [ctx, missing](caf::error& error) {
            if (to_status(error).code == errc::not_found)
              return missing();
            ctx->deliver_unknown(error);
          });
}

void step_context::save_snapshot(snapshot_record snapshot,
                                 std::function<void(snapshot_record)> next) {
  auto ctx = shared_from_this();
  self->request(deps.registry, control_timeout(), rg_snapsave_atom::value, std::move(snapshot))
    .then([next](snapshot_record& saved) { next(std::move(saved)); },
          [ctx](caf::error& error) { ctx->deliver_unknown(error); });
}

void step_context::forget_snapshot(const std::string& id, std::function<void()> next) {
  auto ctx = shared_from_this();
  self->request(deps.registry, control_timeout(), rg_snapdel_atom::value, id)
    .then([next](bool) { next(); }, [ctx](caf::error& error) { ctx->deliver_unknown(error); });
}

bool step_context::poll_again(uint32_t waited_ms, std::function<void(uint32_t)> next) {
  if (waited_ms >= deps.options.worker_wait_ms)
    return false;
  auto ctx = shared_from_this();
  auto poll = deps.options.worker_poll_ms;
  self->request(deps.timer, milliseconds(poll) + control_timeout(), lc_wait_atom::value, poll)
    .then([next, waited_ms, poll](bool) { next(waited_ms + poll); },
          [ctx](caf::error& error) { ctx->deliver_unknown(error); });
  return true;
}

void step_context::with_node(const std::string& worker_id, std::function<void(node_actor)> next,
                             uint32_t waited_ms) {
  auto ctx = shared_from_this();
  self->request(deps.scheduler, control_timeout(), sc_node_atom::value, worker_id)
    .then([next](placement& where) { next(where.node); },
          [ctx, worker_id, next, waited_ms](caf::error& error) {
            auto again = [ctx, worker_id, next](uint32_t waited) {
              ctx->with_node(worker_id, next, waited);
            };
            if (worker_away(to_status(error).code) && ctx->poll_again(waited_ms, again))
              return;
            ctx->deliver_unknown(error);
          });
}

void step_context::release(const sandbox_record& record) {
  self
    ->request(deps.scheduler, control_timeout(), sc_release_atom::value, record.worker_id,
              record.id)
    .then([](bool) {}, [](caf::error&) {});
}

void step_context::end_failed(sandbox_record record, const status& reason,
                              std::function<void()> next) {
  record.state = sandbox_state::destroyed;
  record.error_reason = schema::error_info{std::string(to_string(reason.code)), reason.message};
  save(std::move(record), [next](sandbox_record) { next(); });
}

void step_context::fail_create(sandbox_record record, const status& reason) {
  auto ctx = shared_from_this();
  end_failed(std::move(record), reason, [ctx, reason] { ctx->deliver(fail_with(reason)); });
}

void step_context::place(sandbox_record record, std::string snapshot_worker,
                         std::function<void(sandbox_record)> placed,
                         std::function<void(status)> refused, uint32_t waited_ms) {
  auto ctx = shared_from_this();
  ctx->self
    ->request(deps.scheduler, control_timeout(), sc_place_atom::value,
              placement_for(record, snapshot_worker))
    .then(
      [ctx, record, placed](placement& where) mutable {
        record.worker_id = where.worker_id;
        record.data_url = where.data_url;
        // The record says what was reserved, defaults included.
        auto& reserved = record.spec;
        if (where.reserved.cpu_millis != 0)
          reserved.cpu_request_millis = where.reserved.cpu_millis;
        if (where.reserved.memory_mb != 0)
          reserved.memory_request_mb = where.reserved.memory_mb;
        if (where.reserved.disk_mb != 0)
          reserved.disk_request_mb = where.reserved.disk_mb;
        ctx->save(std::move(record), placed);
      },
      [ctx, record, snapshot_worker, placed, refused, waited_ms](caf::error& error) mutable {
        auto failure = to_status(error);
        if (failure.code == errc::timeout)
          return ctx->deliver_unknown(error);
        auto again = [ctx, record, snapshot_worker, placed, refused](uint32_t waited) {
          ctx->place(record, snapshot_worker, placed, refused, waited);
        };
        if (failure.code == errc::unavailable && ctx->poll_again(waited_ms, again))
          return;
        refused(failure);
      });
}

void step_context::start(sandbox_record record, std::string from_snapshot,
                         std::function<void(sandbox_record)> started,
                         std::function<void(status)> refused) {
  auto ctx = shared_from_this();
  with_node(record.worker_id, [ctx, record, from_snapshot, started, refused](node_actor node) {
    auto timeout = milliseconds(ctx->deps.options.node_create_timeout_ms);
    // The worker reads where the root comes from off the record it is sent.
    auto sent = record;
    sent.spec.from_checkpoint = from_snapshot;
    // A template's first use on a worker builds it (debootstrap for base:
    // minutes): its progress shows in the create's operation meanwhile.
    caf::actor relay;
    if (ctx->request.operation && from_snapshot.empty()) {
      progress_relay_options relayed;
      relayed.every = milliseconds(ctx->deps.options.progress_poll_ms);
      relayed.call_timeout = ctx->control_timeout();
      relayed.lifetime = timeout;
      relayed.forward_cancel = false; // other creates wait for the same build
      relayed.step_prefix = "building template " + record.spec.template_name + ": ";
      relay = spawn_progress_relay(ctx->self->home_system(), node, worker_template_of(record.spec),
                                   ctx->request.operation, relayed);
    }
    ctx->self->request(node, timeout, nd_create_atom::value, sent)
      .then(
        [ctx, record, started, relay](node_sandbox&) mutable {
          stop_progress_relay(relay);
          record.state = sandbox_state::running;
          record.error_reason.reset();
          ctx->save(std::move(record), started);
        },
        [ctx, record, refused, relay](caf::error& error) {
          stop_progress_relay(relay);
          auto failure = to_status(error);
          if (failure.code == errc::timeout || failure.code == errc::outcome_unknown)
            return ctx->deliver_unknown(error);
          // Nothing is left on the worker after a failed create: free the
          // reservation so the capacity is not lost.
          ctx->release(record);
          refused(failure);
        });
  });
}

} // namespace procedure_detail

namespace {

using namespace procedure_detail;

struct wait_timer_state {
  uint64_t next_id = 0;
  std::map<uint64_t, caf::response_promise> waiting;
};

/// Answers (lc_wait, ms) with true after ms on the actor clock: a typed
/// actor in CAF 0.17 cannot schedule a function for later, so steps that
/// poll ask this timer instead.
caf::behavior wait_timer(caf::stateful_actor<wait_timer_state>* self) {
  return {
    [self](lc_wait_atom, uint32_t ms) -> caf::result<bool> {
      auto id = ++self->state.next_id;
      self->state.waiting.emplace(id, self->make_response_promise());
      self->delayed_send(self, milliseconds(ms), lc_wake_atom::value, id);
      return caf::delegated<bool>();
    },
    [self](lc_wake_atom, uint64_t id) {
      auto found = self->state.waiting.find(id);
      if (found == self->state.waiting.end())
        return;
      found->second.deliver(true);
      self->state.waiting.erase(found);
    },
  };
}

// --- sandbox.create ---------------------------------------------------------

/// Places the sandbox: on the worker that holds its checkpoint when it
/// starts from one (which must be complete), else where the scheduler likes.
void create_place(std::shared_ptr<step_context> ctx, sandbox_record record) {
  if (record.state != sandbox_state::creating) {
    if (record.state == sandbox_state::running)
      return ctx->deliver(step_outcome::complete(sandbox_result(record)));
    return ctx->deliver(fail_with(wrong_state(record, "")));
  }
  if (record.spec.from_pool) // a claimed pool member: placed when it was made
    return ctx->deliver(step_outcome::advance());
  auto place_on = [ctx, record](std::string snapshot_worker) {
    ctx->place(
      record, std::move(snapshot_worker),
      [ctx](sandbox_record) { ctx->deliver(step_outcome::advance()); },
      [ctx, record](const status& refused) { ctx->fail_create(record, refused); });
  };
  const auto& checkpoint = record.spec.from_checkpoint;
  if (checkpoint.empty())
    return place_on({});
  ctx->with_snapshot(
    checkpoint,
    [ctx, record, place_on](snapshot_record snapshot) {
      if (!snapshot.complete || snapshot.tenant_id != record.tenant_id)
        return ctx->fail_create(
          record,
          make_status(errc::not_found, "no complete checkpoint " + snapshot.id + " to start from"));
      place_on(snapshot.worker_id);
    },
    [ctx, record, checkpoint] {
      ctx->fail_create(
        record, make_status(errc::not_found, "checkpoint " + checkpoint
                                               + " is gone (deleted before the sandbox started)"));
    });
}

status claim_lost(const status& why) {
  return make_status(why.code, "the warm pool member this create claimed is gone (" + why.message
                                 + "): create the sandbox again");
}

/// The claim of a warm pool member: the worker makes the running member
/// this sandbox (tenant, env, egress, limits). A member the worker no longer
/// runs (it restarted) is brought back from its root as this sandbox; one
/// lost for good fails the create, and the client creates again.
void create_by_claim(std::shared_ptr<step_context> ctx, sandbox_record record) {
  ctx->with_node(record.worker_id, [ctx, record](node_actor node) {
    auto claimed = [ctx, record](node_sandbox&) mutable {
      record.state = sandbox_state::running;
      ctx->save(std::move(record), [ctx](sandbox_record saved) {
        ctx->deliver(step_outcome::complete(sandbox_result(saved)));
      });
    };
    ctx->self->request(node, ctx->control_timeout(), nd_claim_atom::value, record)
      .then(claimed, [ctx, record, node, claimed](caf::error& error) {
        auto failure = to_status(error);
        if (failure.code == errc::not_found) {
          auto timeout = milliseconds(ctx->deps.options.node_create_timeout_ms);
          ctx->self->request(node, timeout, nd_recreate_atom::value, record)
            .then(claimed, [ctx, record](caf::error& lost) {
              auto why = to_status(lost);
              if (why.code == errc::timeout || why.code == errc::outcome_unknown)
                return ctx->deliver_unknown(lost);
              ctx->release(record);
              ctx->fail_create(record, claim_lost(why));
            });
          return;
        }
        if (failure.code == errc::timeout || failure.code == errc::outcome_unknown)
          return ctx->deliver_unknown(error);
        auto refused = claim_lost(failure);
        // Whatever is left of the member goes with the failed create.
        auto fail = [ctx, record, refused] {
          ctx->release(record);
          ctx->fail_create(record, refused);
        };
        ctx->self->request(node, ctx->control_timeout(), nd_destroy_atom::value, record.id)
          .then([fail](node_sandbox&) { fail(); }, [fail](caf::error&) { fail(); });
      });
  });
}

void create_on_worker(std::shared_ptr<step_context> ctx, sandbox_record record) {
  if (record.state == sandbox_state::running)
    return ctx->deliver(step_outcome::complete(sandbox_result(record)));
  if (record.state != sandbox_state::creating)
    return ctx->deliver(fail_with(wrong_state(record, "")));
  if (record.spec.from_pool)
    return create_by_claim(ctx, std::move(record));
  auto from = record.spec.from_checkpoint;
  ctx->start(
    record, from,
    [ctx](sandbox_record saved) { ctx->deliver(step_outcome::complete(sandbox_result(saved))); },
    [ctx, record](const status& refused) { ctx->fail_create(record, refused); });
}

// --- sandbox.delete ---------------------------------------------------------

void delete_mark(std::shared_ptr<step_context> ctx, sandbox_record record) {
  if (record.state == sandbox_state::destroyed)
    return ctx->deliver(step_outcome::complete(sandbox_result(record)));
  if (active_since_decision(*ctx, record))
    return ctx->deliver(step_outcome::complete(abandoned_result(record)));
  record.state = sandbox_state::destroying;
  ctx->save(std::move(record), [ctx](sandbox_record) { ctx->deliver(step_outcome::advance()); });
}

void delete_finish(std::shared_ptr<step_context> ctx, sandbox_record record) {
  record.state = sandbox_state::destroyed;
  ctx->save(std::move(record), [ctx](sandbox_record saved) {
    ctx->deliver(step_outcome::complete(sandbox_result(saved)));
  });
}

/// A suspended sandbox's files are its suspend snapshot: deleting the
/// sandbox deletes it too (checkpoints stay until deleted themselves).
void delete_suspend_snapshot(std::shared_ptr<step_context> ctx, sandbox_record record) {
  auto id = record.snapshot_id;
  ctx->with_snapshot(
    id,
    [ctx, record](snapshot_record snapshot) mutable {
      auto forget = [ctx, record]() mutable {
        ctx->forget_snapshot(record.snapshot_id, [ctx, record]() mutable {
          record.snapshot_id.clear();
          delete_finish(ctx, std::move(record));
        });
      };
      if (snapshot.worker_id.empty())
        return forget();
      ctx->with_node(snapshot.worker_id, [ctx, snapshot, forget](node_actor node) {
        ctx->self->request(node, ctx->node_timeout(), nd_ckptdel_atom::value, snapshot.id)
          .then([forget](bool) mutable { forget(); },
                [ctx](caf::error& error) { ctx->deliver_worker_error(error); });
      });
    },
    [ctx, record]() mutable {
      record.snapshot_id.clear();
      delete_finish(ctx, std::move(record));
    });
}

void delete_on_worker(std::shared_ptr<step_context> ctx, sandbox_record record) {
  if (record.state == sandbox_state::destroyed)
    return ctx->deliver(step_outcome::complete(sandbox_result(record)));
  auto after_worker = [ctx](sandbox_record done) {
    if (!done.snapshot_id.empty())
      return delete_suspend_snapshot(ctx, std::move(done));
    delete_finish(ctx, std::move(done));
  };
  if (record.worker_id.empty()) // never placed
    return after_worker(std::move(record));
  ctx->with_node(record.worker_id, [ctx, record, after_worker](node_actor node) {
    ctx->self->request(node, ctx->node_timeout(), nd_destroy_atom::value, record.id)
      .then(
        [ctx, record, after_worker](node_sandbox&) {
          ctx->self
            ->request(ctx->deps.scheduler, ctx->control_timeout(), sc_release_atom::value,
                      record.worker_id, record.id)
            .then([record, after_worker](bool) { after_worker(record); },
                  [ctx](caf::error& error) { ctx->deliver_unknown(error); });
        },
        [ctx](caf::error& error) { ctx->deliver_worker_error(error); });
  });
}

// --- sandbox.pause and sandbox.resume ---------------------------------------

/// pause: running -> pausing -> paused; resume (and wake from paused):
/// paused -> resuming -> running.
struct freeze_states {
  sandbox_state from;
  sandbox_state during;
  sandbox_state to;
};

freeze_states states_of(const std::string& kind) {
  if (kind == kind_sandbox_pause)
    return {sandbox_state::running, sandbox_state::pausing, sandbox_state::paused};
  return {sandbox_state::paused, sandbox_state::resuming, sandbox_state::running};
}

void freeze_mark(std::shared_ptr<step_context> ctx, sandbox_record record) {
  auto states = states_of(ctx->request.kind);
  if (record.state == states.to)
    return ctx->deliver(step_outcome::complete(sandbox_result(record)));
  if (record.state != states.from && record.state != states.during)
    return ctx->deliver(fail_with(wrong_state(record, "")));
  record.state = states.during;
  ctx->save(std::move(record), [ctx](sandbox_record) { ctx->deliver(step_outcome::advance()); });
}

} // namespace

namespace procedure_detail {

void freeze_on_worker(std::shared_ptr<step_context> ctx, sandbox_record record) {
  auto states = states_of(ctx->request.kind);
  if (record.state == states.to)
    return ctx->deliver(step_outcome::complete(sandbox_result(record)));
  ctx->with_node(record.worker_id, [ctx, record, states](node_actor node) mutable {
    auto on_done = [ctx, record, states](node_sandbox&) mutable {
      record.state = states.to;
      ctx->save(std::move(record), [ctx](sandbox_record saved) {
        ctx->deliver(step_outcome::complete(sandbox_result(saved)));
      });
    };
    auto on_error = [ctx, record, states](caf::error& error) mutable {
      auto failure = to_status(error);
      if (retry_later(failure.code))
        return ctx->deliver_unknown(error);
      // The worker refused: the sandbox stays as it was.
      record.state = states.from;
      ctx->save(std::move(record),
                [ctx, failure](sandbox_record) { ctx->deliver(fail_with(failure)); });
    };
    if (ctx->request.kind == kind_sandbox_pause)
      ctx->self->request(node, ctx->node_timeout(), nd_pause_atom::value, record.id)
        .then(on_done, on_error);
    else
      ctx->self->request(node, ctx->node_timeout(), nd_resume_atom::value, record.id)
        .then(on_done, on_error);
  });
}

} // namespace procedure_detail

namespace {

// --- the runner -------------------------------------------------------------

step_function step_of(const std::string& kind, uint32_t step) {
  if (kind == kind_sandbox_create)
    return step == 0 ? create_place : step == 1 ? create_on_worker : nullptr;
  if (kind == kind_sandbox_delete)
    return step == 0 ? delete_mark : step == 1 ? delete_on_worker : nullptr;
  if (kind == kind_sandbox_pause || kind == kind_sandbox_resume)
    return step == 0 ? freeze_mark : step == 1 ? freeze_on_worker : nullptr;
  return snapshot_step_of(kind, step);
}

step_runner_actor::behavior_type lifecycle_runner(runner_pointer self, lifecycle_deps deps) {
  return {
    [self, deps](step_run_atom, step_request& request) -> caf::result<step_outcome> {
      auto step = step_of(request.kind, request.step);
      if (step == nullptr)
        return step_outcome::fail("internal", "no step " + std::to_string(request.step)
                                                + " in procedure " + request.kind);
      auto ctx = std::make_shared<step_context>();
      ctx->self = self;
      ctx->deps = deps;
      ctx->request = std::move(request);
      ctx->promise = self->make_response_promise<step_outcome>();
      auto promise = ctx->promise;
      ctx->with_record(ctx->request.target_id,
                       [ctx, step](sandbox_record record) { step(ctx, std::move(record)); });
      return promise;
    },
    // Every step is idempotent: one whose outcome was lost is run again.
    [](step_check_atom, step_request&) -> caf::result<step_outcome> {
      return step_outcome::not_done();
    },
  };
}

} // namespace

procedure_table spawn_sandbox_procedures(caf::actor_system& system, sandbox_registry_actor registry,
                                         scheduler_actor scheduler,
                                         sandbox_procedure_options options) {
  lifecycle_deps deps{std::move(registry), std::move(scheduler), system.spawn(wait_timer), options};
  auto runner = system.spawn(lifecycle_runner, deps);
  procedure_table table;
  for (const char* kind :
       {kind_sandbox_create, kind_sandbox_delete, kind_sandbox_pause, kind_sandbox_resume,
        kind_checkpoint_create, kind_checkpoint_delete, kind_sandbox_suspend, kind_sandbox_restore,
        kind_sandbox_wake, kind_sandbox_fork})
    table.emplace(kind, runner);
  return table;
}

} // namespace airlock::actors
