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

#include "actors/errors.hpp"

namespace airlock::actors {

namespace {

using schema::sandbox_record;
using schema::sandbox_state;
using std::chrono::milliseconds;

// Atoms of the wait timer below (at most 10 characters, unique in airlock).
using lc_wait_atom = caf::atom_constant<caf::atom("lcwait")>;
using lc_wake_atom = caf::atom_constant<caf::atom("lcwake")>;

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

/// What every procedure step works with.
struct lifecycle_deps {
  sandbox_registry_actor registry;
  scheduler_actor scheduler;
  caf::actor timer; ///< wait_timer
  sandbox_procedure_options options;
};

using runner_pointer = step_runner_actor::pointer;
using promise_type = caf::typed_response_promise<step_outcome>;

/// Errors that say the worker may be back soon (restart, reconnect) or that
/// the effect may have happened: reconcile later rather than fail.
/// The scheduler's answers while a worker is away: unavailable (none
/// registered or ready, or this one lost) and not_found (not registered since
/// the control plane started). Worth waiting for, within worker_wait_ms.
bool worker_away(errc code) noexcept {
  return code == errc::unavailable || code == errc::not_found;
}

bool retry_later(errc code) noexcept {
  return code == errc::timeout || code == errc::unavailable || code == errc::outcome_unknown
         || code == errc::not_found;
}

step_outcome fail_with(const status& failure) {
  return step_outcome::fail(std::string(to_string(failure.code)), failure.message);
}

/// One step in flight: the promise, and the shared helpers to chain calls.
struct step_context : std::enable_shared_from_this<step_context> {
  runner_pointer self;
  lifecycle_deps deps;
  step_request request;
  promise_type promise;

  milliseconds control_timeout() const {
    return milliseconds(deps.options.control_call_timeout_ms);
  }

  void deliver(step_outcome outcome) { promise.deliver(std::move(outcome)); }

  /// A failure of a control-plane call (registry, scheduler): unknown, so the
  /// engine reconciles and runs the step again.
  void deliver_unknown(const caf::error&) { deliver(step_outcome::unknown()); }

  void with_record(std::function<void(sandbox_record)> next) {
    auto ctx = shared_from_this();
    self
      ->request(deps.registry, control_timeout(), rg_get_atom::value, request.target_id,
                std::string{})
      .then([ctx, next](sandbox_record& record) { next(std::move(record)); },
            [ctx](caf::error& error) {
              auto failure = to_status(error);
              if (failure.code == errc::not_found)
                ctx->deliver(fail_with(failure));
              else
                ctx->deliver_unknown(error);
            });
  }

  void save(sandbox_record record, std::function<void(sandbox_record)> next) {
    auto ctx = shared_from_this();
    self->request(deps.registry, control_timeout(), rg_save_atom::value, std::move(record))
      .then([next](sandbox_record& saved) { next(std::move(saved)); },
            [ctx](caf::error& error) { ctx->deliver_unknown(error); });
  }

  /// Runs `next(waited_ms + worker_poll_ms)` after worker_poll_ms. False
  /// (and nothing runs) once `waited_ms` reached worker_wait_ms.
  bool poll_again(uint32_t waited_ms, std::function<void(uint32_t)> next) {
    if (waited_ms >= deps.options.worker_wait_ms)
      return false;
    auto ctx = shared_from_this();
    auto poll = deps.options.worker_poll_ms;
    self->request(deps.timer, milliseconds(poll) + control_timeout(), lc_wait_atom::value, poll)
      .then([next, waited_ms, poll](bool) { next(waited_ms + poll); },
            [ctx](caf::error& error) { ctx->deliver_unknown(error); });
    return true;
  }

  /// The worker's node. While it is not (yet) registered or not ready, polls
  /// for up to worker_wait_ms (a step recovered right after a control-plane
  /// restart waits for workers to rejoin), then reports unknown.
  void with_node(const std::string& worker_id, std::function<void(node_actor)> next,
                 uint32_t waited_ms = 0) {
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

  /// Ends a create that failed: nothing of it is left on any worker, so its
  /// record ends destroyed with the reason (refusals must not pile up as
  /// records in error), and the operation fails with it.
  void fail_create(sandbox_record record, const status& reason) {
    auto ctx = shared_from_this();
    record.state = sandbox_state::destroyed;
    record.error_reason = schema::error_info{std::string(to_string(reason.code)), reason.message};
    save(std::move(record), [ctx, reason](sandbox_record) { ctx->deliver(fail_with(reason)); });
  }
};

std::string sandbox_result(const sandbox_record& record) {
  return nlohmann::json{{"sandbox_id", record.id},
                        {"state", std::string(schema::to_string(record.state))}}
    .dump();
}

// --- sandbox.create ---------------------------------------------------------

void create_place(std::shared_ptr<step_context> ctx, sandbox_record record, uint32_t waited_ms);

void create_place_first(std::shared_ptr<step_context> ctx, sandbox_record record) {
  create_place(std::move(ctx), std::move(record), 0);
}

/// Places the sandbox; while no worker is registered or ready, polls for up
/// to worker_wait_ms before the create fails with unavailable.
void create_place(std::shared_ptr<step_context> ctx, sandbox_record record, uint32_t waited_ms) {
  if (record.state != sandbox_state::creating) {
    if (record.state == sandbox_state::running)
      return ctx->deliver(step_outcome::complete(sandbox_result(record)));
    return ctx->deliver(
      fail_with(make_status(errc::wrong_state, "sandbox " + record.id + " is "
                                                 + std::string(schema::to_string(record.state)))));
  }
  const auto& spec = record.spec;
  placement_request wanted{
    record.id, spec.template_name,
    schema::resources{spec.cpu_millis, spec.memory_mb, spec.disk_mb, 1},
    schema::resources{spec.cpu_request_millis, spec.memory_request_mb, spec.disk_request_mb, 1}};
  ctx->self->request(ctx->deps.scheduler, ctx->control_timeout(), sc_place_atom::value, wanted)
    .then(
      [ctx, record](placement& where) mutable {
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
        ctx->save(std::move(record),
                  [ctx](sandbox_record) { ctx->deliver(step_outcome::advance()); });
      },
      [ctx, record, waited_ms](caf::error& error) mutable {
        auto failure = to_status(error);
        if (failure.code == errc::timeout)
          return ctx->deliver_unknown(error);
        auto again = [ctx, record](uint32_t waited) { create_place(ctx, record, waited); };
        if (failure.code == errc::unavailable && ctx->poll_again(waited_ms, again))
          return;
        ctx->fail_create(std::move(record), failure);
      });
}

void create_on_worker(std::shared_ptr<step_context> ctx, sandbox_record record) {
  if (record.state == sandbox_state::running)
    return ctx->deliver(step_outcome::complete(sandbox_result(record)));
  if (record.state != sandbox_state::creating)
    return ctx->deliver(
      fail_with(make_status(errc::wrong_state, "sandbox " + record.id + " is "
                                                 + std::string(schema::to_string(record.state)))));
  ctx->with_node(record.worker_id, [ctx, record](node_actor node) mutable {
    auto timeout = milliseconds(ctx->deps.options.node_create_timeout_ms);
    ctx->self->request(node, timeout, nd_create_atom::value, record)
      .then(
        [ctx, record](node_sandbox&) mutable {
          record.state = sandbox_state::running;
          record.error_reason.reset();
          ctx->save(std::move(record), [ctx](sandbox_record saved) {
            ctx->deliver(step_outcome::complete(sandbox_result(saved)));
          });
        },
        [ctx, record](caf::error& error) mutable {
          auto failure = to_status(error);
          if (failure.code == errc::timeout || failure.code == errc::outcome_unknown)
            return ctx->deliver_unknown(error);
          // Nothing is left on the worker after a failed create: free the
          // reservation so the capacity is not lost.
          ctx->self
            ->request(ctx->deps.scheduler, ctx->control_timeout(), sc_release_atom::value,
                      record.worker_id, record.id)
            .then([](bool) {}, [](caf::error&) {});
          ctx->fail_create(std::move(record), failure);
        });
  });
}

// --- sandbox.delete ---------------------------------------------------------

void delete_mark(std::shared_ptr<step_context> ctx, sandbox_record record) {
  if (record.state == sandbox_state::destroyed)
    return ctx->deliver(step_outcome::complete(sandbox_result(record)));
  record.state = sandbox_state::destroying;
  ctx->save(std::move(record), [ctx](sandbox_record) { ctx->deliver(step_outcome::advance()); });
}

void delete_finish(std::shared_ptr<step_context> ctx, sandbox_record record) {
  record.state = sandbox_state::destroyed;
  ctx->save(std::move(record), [ctx](sandbox_record saved) {
    ctx->deliver(step_outcome::complete(sandbox_result(saved)));
  });
}

void delete_on_worker(std::shared_ptr<step_context> ctx, sandbox_record record) {
  if (record.state == sandbox_state::destroyed)
    return ctx->deliver(step_outcome::complete(sandbox_result(record)));
  if (record.worker_id.empty()) // never placed
    return delete_finish(ctx, std::move(record));
  ctx->with_node(record.worker_id, [ctx, record](node_actor node) mutable {
    auto timeout = milliseconds(ctx->deps.options.node_call_timeout_ms);
    ctx->self->request(node, timeout, nd_destroy_atom::value, record.id)
      .then(
        [ctx, record](node_sandbox&) mutable {
          ctx->self
            ->request(ctx->deps.scheduler, ctx->control_timeout(), sc_release_atom::value,
                      record.worker_id, record.id)
            .then([ctx, record](bool) mutable { delete_finish(ctx, std::move(record)); },
                  [ctx](caf::error& error) { ctx->deliver_unknown(error); });
        },
        [ctx](caf::error& error) {
          auto failure = to_status(error);
          if (retry_later(failure.code))
            return ctx->deliver_unknown(error);
          ctx->deliver(fail_with(failure));
        });
  });
}

// --- sandbox.pause and sandbox.resume ---------------------------------------

/// pause: running -> pausing -> paused; resume: paused -> resuming -> running.
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
    return ctx->deliver(
      fail_with(make_status(errc::wrong_state, "sandbox " + record.id + " is "
                                                 + std::string(schema::to_string(record.state)))));
  record.state = states.during;
  ctx->save(std::move(record), [ctx](sandbox_record) { ctx->deliver(step_outcome::advance()); });
}

void freeze_on_worker(std::shared_ptr<step_context> ctx, sandbox_record record) {
  auto states = states_of(ctx->request.kind);
  if (record.state == states.to)
    return ctx->deliver(step_outcome::complete(sandbox_result(record)));
  ctx->with_node(record.worker_id, [ctx, record, states](node_actor node) mutable {
    auto timeout = milliseconds(ctx->deps.options.node_call_timeout_ms);
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
      ctx->self->request(node, timeout, nd_pause_atom::value, record.id).then(on_done, on_error);
    else
      ctx->self->request(node, timeout, nd_resume_atom::value, record.id).then(on_done, on_error);
  });
}

// --- checkpoint.create and checkpoint.delete ---------------------------------

using schema::snapshot_record;

/// The checkpoint an operation is about (its params name it).
std::string checkpoint_of(const step_context& ctx) {
  auto params = nlohmann::json::parse(ctx.request.params_json, nullptr, false);
  if (!params.is_object() || !params.contains("checkpoint_id")
      || !params["checkpoint_id"].is_string())
    return {};
  return params["checkpoint_id"].get<std::string>();
}

std::string checkpoint_result(const snapshot_record& snapshot) {
  return nlohmann::json{{"checkpoint_id", snapshot.id},
                        {"sandbox_id", snapshot.sandbox_id},
                        {"label", snapshot.label},
                        {"complete", snapshot.complete}}
    .dump();
}

/// The checkpoint's record; `missing` runs when there is none.
void with_snapshot(std::shared_ptr<step_context> ctx, const std::string& id,
                   std::function<void(snapshot_record)> next, std::function<void()> missing) {
  ctx->self
    ->request(ctx->deps.registry, ctx->control_timeout(), rg_snapget_atom::value, id, std::string{})
    .then([next](snapshot_record& snapshot) { next(std::move(snapshot)); },
          [ctx, missing](caf::error& error) {
            if (to_status(error).code == errc::not_found)
              return missing();
            ctx->deliver_unknown(error);
          });
}

/// Forgets the checkpoint's record, then fails the operation with `reason`:
/// nothing of a checkpoint that was not taken is left.
void forget_and_fail(std::shared_ptr<step_context> ctx, const std::string& id,
                     const status& reason) {
  ctx->self->request(ctx->deps.registry, ctx->control_timeout(), rg_snapdel_atom::value, id)
    .then([ctx, reason](bool) { ctx->deliver(fail_with(reason)); },
          [ctx](caf::error& error) { ctx->deliver_unknown(error); });
}

void checkpoint_take(std::shared_ptr<step_context> ctx, sandbox_record record) {
  const auto id = checkpoint_of(*ctx);
  if (id.empty())
    return ctx->deliver(
      step_outcome::fail("invalid_argument", "the operation names no checkpoint"));
  auto missing = [ctx, id] {
    ctx->deliver(fail_with(make_status(errc::not_found, "no checkpoint " + id)));
  };
  with_snapshot(
    ctx, id,
    [ctx, record](snapshot_record snapshot) mutable {
      if (snapshot.complete)
        return ctx->deliver(step_outcome::complete(checkpoint_result(snapshot)));
      if (record.state != sandbox_state::running && record.state != sandbox_state::paused)
        return forget_and_fail(
          ctx, snapshot.id,
          make_status(errc::wrong_state, "sandbox " + record.id + " is "
                                           + std::string(schema::to_string(record.state))
                                           + "; a checkpoint needs it running or paused"));
      ctx->with_node(record.worker_id, [ctx, record, snapshot](node_actor node) mutable {
        auto timeout = milliseconds(ctx->deps.options.node_call_timeout_ms);
        auto mark_complete = [ctx, record, snapshot]() mutable {
          snapshot.complete = true;
          snapshot.worker_id = record.worker_id;
          ctx->self
            ->request(ctx->deps.registry, ctx->control_timeout(), rg_snapsave_atom::value, snapshot)
            .then(
              [ctx](snapshot_record& saved) {
                ctx->deliver(step_outcome::complete(checkpoint_result(saved)));
              },
              [ctx](caf::error& error) { ctx->deliver_unknown(error); });
        };
        ctx->self->request(node, timeout, nd_ckpt_atom::value, record.id, snapshot.id)
          .then([mark_complete](bool) mutable { mark_complete(); },
                [ctx, snapshot, mark_complete](caf::error& error) mutable {
                  auto failure = to_status(error);
                  // Taken by an earlier run of this step whose answer was lost.
                  if (failure.code == errc::already_exists)
                    return mark_complete();
                  if (retry_later(failure.code))
                    return ctx->deliver_unknown(error);
                  forget_and_fail(ctx, snapshot.id, failure);
                });
      });
    },
    missing);
}

void checkpoint_remove(std::shared_ptr<step_context> ctx, sandbox_record record) {
  const auto id = checkpoint_of(*ctx);
  if (id.empty())
    return ctx->deliver(
      step_outcome::fail("invalid_argument", "the operation names no checkpoint"));
  auto done = [ctx, id] {
    ctx->deliver(
      step_outcome::complete(nlohmann::json{{"checkpoint_id", id}, {"deleted", true}}.dump()));
  };
  with_snapshot(
    ctx, id,
    [ctx, record, done](snapshot_record snapshot) {
      auto forget = [ctx, id = snapshot.id, done] {
        ctx->self->request(ctx->deps.registry, ctx->control_timeout(), rg_snapdel_atom::value, id)
          .then([done](bool) { done(); },
                [ctx](caf::error& error) { ctx->deliver_unknown(error); });
      };
      if (snapshot.worker_id.empty()) // never taken
        return forget();
      ctx->with_node(snapshot.worker_id, [ctx, snapshot, forget](node_actor node) {
        auto timeout = milliseconds(ctx->deps.options.node_call_timeout_ms);
        ctx->self->request(node, timeout, nd_ckptdel_atom::value, snapshot.id)
          .then([forget](bool) { forget(); },
                [ctx](caf::error& error) {
                  auto failure = to_status(error);
                  if (retry_later(failure.code))
                    return ctx->deliver_unknown(error);
                  ctx->deliver(fail_with(failure));
                });
      });
    },
    done);
}

// --- the runner -------------------------------------------------------------

using step_function = void (*)(std::shared_ptr<step_context>, sandbox_record);

step_function step_of(const std::string& kind, uint32_t step) {
  if (kind == kind_sandbox_create)
    return step == 0 ? create_place_first : step == 1 ? create_on_worker : nullptr;
  if (kind == kind_sandbox_delete)
    return step == 0 ? delete_mark : step == 1 ? delete_on_worker : nullptr;
  if (kind == kind_sandbox_pause || kind == kind_sandbox_resume)
    return step == 0 ? freeze_mark : step == 1 ? freeze_on_worker : nullptr;
  if (kind == kind_checkpoint_create)
    return step == 0 ? checkpoint_take : nullptr;
  if (kind == kind_checkpoint_delete)
    return step == 0 ? checkpoint_remove : nullptr;
  return nullptr;
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
      ctx->with_record([ctx, step](sandbox_record record) { step(ctx, std::move(record)); });
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
  return {{kind_sandbox_create, runner},    {kind_sandbox_delete, runner},
          {kind_sandbox_pause, runner},     {kind_sandbox_resume, runner},
          {kind_checkpoint_create, runner}, {kind_checkpoint_delete, runner}};
}

} // namespace airlock::actors
