// The snapshot procedures (docs/snapshots.md): checkpoint.create and
// checkpoint.delete, sandbox.suspend, sandbox.restore (from the suspend
// snapshot, or back to a checkpoint), sandbox.wake and sandbox.fork. Every
// step is idempotent like the rest of the lifecycle: a step run again after a
// crash asks the worker for the same snapshot (already_exists means taken)
// and the same sandbox ids.

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "actors/errors.hpp"
#include "actors/procedure_steps.hpp"

namespace airlock::actors::procedure_detail {

namespace {

using nlohmann::json;

bool is_live(sandbox_state state) {
  return state == sandbox_state::running || state == sandbox_state::paused;
}

/// The state the operation found the sandbox in (the API records it), which
/// a refused suspend or restore puts back. Default: `fallback`.
sandbox_state from_state(const step_context& ctx, sandbox_state fallback) {
  auto parsed = schema::parse_sandbox_state(ctx.param_text("from_state"));
  return parsed ? *parsed : fallback;
}

std::string checkpoint_result(const snapshot_record& snapshot) {
  return json{{"checkpoint_id", snapshot.id},
              {"sandbox_id", snapshot.sandbox_id},
              {"label", snapshot.label},
              {"complete", snapshot.complete}}
    .dump();
}

json error_json(const status& failure) {
  return json{{"code", std::string(to_string(failure.code))}, {"message", failure.message}};
}

/// Takes snapshot `id` (its record stored, not complete) of the sandbox on
/// its worker and marks it complete; `taken` gets the record. A refusal
/// forgets the record (nothing of a snapshot that was not taken is left)
/// and goes to `refused`.
void take_snapshot(std::shared_ptr<step_context> ctx, sandbox_record record, const std::string& id,
                   std::function<void(snapshot_record)> taken,
                   std::function<void(status)> refused) {
  ctx->with_snapshot(
    id,
    [ctx, record, taken, refused](snapshot_record snapshot) {
      if (snapshot.complete)
        return taken(std::move(snapshot));
      // A refused snapshot may still exist on the worker (taken before a
      // restart that the refusal followed): deleted there before its record.
      auto forget_then = [ctx, refused, id = snapshot.id,
                          worker = record.worker_id](status failure) {
        ctx->with_node(worker, [ctx, refused, id, failure](node_actor node) {
          ctx->self->request(node, ctx->node_timeout(), nd_ckptdel_atom::value, id)
            .then([ctx, refused, id, failure](
                    bool) { ctx->forget_snapshot(id, [refused, failure] { refused(failure); }); },
                  [ctx](caf::error& error) { ctx->deliver_worker_error(error); });
        });
      };
      ctx->with_node(
        record.worker_id, [ctx, record, snapshot, taken, forget_then](node_actor node) mutable {
          auto mark_complete = [ctx, record, snapshot, taken](uint64_t size_bytes) mutable {
            snapshot.complete = true;
            snapshot.worker_id = record.worker_id;
            snapshot.size_bytes = size_bytes;
            ctx->save_snapshot(std::move(snapshot), taken);
          };
          ctx->self
            ->request(node, ctx->node_timeout(), nd_ckpt_atom::value, record.id, snapshot.id,
                      snapshot.memory_persisted)
            .then([mark_complete](uint64_t size_bytes) mutable { mark_complete(size_bytes); },
                  [ctx, mark_complete, forget_then](caf::error& error) mutable {
                    auto failure = to_status(error);
                    // Taken by an earlier run of this step whose answer was
                    // lost, with it its size: recorded as unknown (0).
                    if (failure.code == errc::already_exists)
                      return mark_complete(0);
                    if (retry_later(failure.code))
                      return ctx->deliver_unknown(error);
                    forget_then(failure);
                  });
        });
    },
    [id, refused] { refused(make_status(errc::not_found, "no snapshot " + id)); });
}

/// Deletes a snapshot on its worker, then its record.
void delete_snapshot(std::shared_ptr<step_context> ctx, const std::string& id,
                     std::function<void()> done) {
  ctx->with_snapshot(
    id,
    [ctx, done](snapshot_record snapshot) {
      auto forget = [ctx, id = snapshot.id, done] { ctx->forget_snapshot(id, done); };
      if (snapshot.worker_id.empty()) // never taken
        return forget();
      ctx->with_node(snapshot.worker_id, [ctx, snapshot, forget](node_actor node) {
        ctx->self->request(node, ctx->node_timeout(), nd_ckptdel_atom::value, snapshot.id)
          .then([forget](bool) { forget(); },
                [ctx](caf::error& error) { ctx->deliver_worker_error(error); });
      });
    },
    done);
}

// --- checkpoint.create and checkpoint.delete ---------------------------------

/// Takes checkpoint `id` of a live sandbox. One that is no longer live
/// (the sandbox moved on since this step first ran) counts as taken if its
/// record is complete; else the record goes and the step fails, naming
/// `what_it_needs`.
void take_checkpoint(std::shared_ptr<step_context> ctx, sandbox_record record,
                     const std::string& id, std::function<void(snapshot_record)> taken,
                     const std::string& what_it_needs) {
  auto refused = [ctx](const status& failure) { ctx->deliver(fail_with(failure)); };
  if (is_live(record.state))
    return take_snapshot(ctx, std::move(record), id, taken, refused);
  ctx->with_snapshot(
    id,
    [ctx, record, taken, what_it_needs](snapshot_record snapshot) {
      if (snapshot.complete)
        return taken(std::move(snapshot));
      ctx->forget_snapshot(snapshot.id, [ctx, record, what_it_needs] {
        ctx->deliver(fail_with(wrong_state(record, what_it_needs)));
      });
    },
    [ctx, record, what_it_needs] { ctx->deliver(fail_with(wrong_state(record, what_it_needs))); });
}

void checkpoint_take(std::shared_ptr<step_context> ctx, sandbox_record record) {
  const auto id = ctx->param_text("checkpoint_id");
  if (id.empty())
    return ctx->deliver(
      step_outcome::fail("invalid_argument", "the operation names no checkpoint"));
  take_checkpoint(
    ctx, std::move(record), id,
    [ctx](snapshot_record snapshot) {
      ctx->deliver(step_outcome::complete(checkpoint_result(snapshot)));
    },
    "a checkpoint needs it running or paused");
}

void checkpoint_remove(std::shared_ptr<step_context> ctx, sandbox_record) {
  const auto id = ctx->param_text("checkpoint_id");
  if (id.empty())
    return ctx->deliver(
      step_outcome::fail("invalid_argument", "the operation names no checkpoint"));
  delete_snapshot(ctx, id, [ctx, id] {
    ctx->deliver(step_outcome::complete(json{{"checkpoint_id", id}, {"deleted", true}}.dump()));
  });
}

// --- sandbox.suspend ----------------------------------------------------------

std::string suspend_result(const sandbox_record& record, const snapshot_record& snapshot) {
  return json{{"sandbox_id", record.id},
              {"state", std::string(schema::to_string(record.state))},
              {"snapshot_id", snapshot.id},
              {"memory_persisted", snapshot.memory_persisted},
              {"size_bytes", snapshot.size_bytes}}
    .dump();
}

/// Moves the sandbox to `during` when `allowed` (it is in a state the
/// procedure starts from) and advances; already `during` (the step ran
/// before), advances at once.
void mark_then_advance(std::shared_ptr<step_context> ctx, sandbox_record record,
                       sandbox_state during, bool allowed, const std::string& needs) {
  if (record.state == during)
    return ctx->deliver(step_outcome::advance());
  if (!allowed)
    return ctx->deliver(fail_with(wrong_state(record, needs)));
  record.state = during;
  ctx->save(std::move(record), [ctx](sandbox_record) { ctx->deliver(step_outcome::advance()); });
}

/// An idle suspend that activity overtook: the sandbox goes back to the state
/// it was in and the snapshot's record goes.
void abandon_suspend(std::shared_ptr<step_context> ctx, sandbox_record record) {
  auto finish = [ctx](sandbox_record now) {
    ctx->forget_snapshot(ctx->param_text("snapshot_id"), [ctx, now] {
      ctx->deliver(step_outcome::complete(abandoned_result(now)));
    });
  };
  if (record.state != sandbox_state::suspending)
    return finish(std::move(record));
  record.state = from_state(*ctx, sandbox_state::running);
  ctx->save(std::move(record), finish);
}

void suspend_mark(std::shared_ptr<step_context> ctx, sandbox_record record) {
  if (record.state == sandbox_state::suspended)
    return ctx->deliver(step_outcome::complete(sandbox_result(record)));
  if (active_since_decision(*ctx, record))
    return abandon_suspend(std::move(ctx), std::move(record));
  bool allowed = is_live(record.state);
  mark_then_advance(ctx, std::move(record), sandbox_state::suspending, allowed,
                    "suspend needs it running or paused");
}

/// Snapshot, then release everything the worker holds for the sandbox: in
/// the namespace runtime its processes end (memory_persisted false).
void suspend_on_worker(std::shared_ptr<step_context> ctx, sandbox_record record) {
  if (record.state == sandbox_state::suspended)
    return ctx->deliver(step_outcome::complete(sandbox_result(record)));
  if (record.state != sandbox_state::suspending)
    return ctx->deliver(fail_with(wrong_state(record, "")));
  if (active_since_decision(*ctx, record))
    return abandon_suspend(std::move(ctx), std::move(record));
  const auto id = ctx->param_text("snapshot_id");
  auto refused = [ctx, record](const status& failure) mutable {
    // The worker still runs it as it was.
    record.state = from_state(*ctx, sandbox_state::running);
    ctx->save(std::move(record),
              [ctx, failure](sandbox_record) { ctx->deliver(fail_with(failure)); });
  };
  take_snapshot(
    ctx, record, id,
    [ctx, record](snapshot_record snapshot) {
      ctx->with_node(record.worker_id, [ctx, record, snapshot](node_actor node) {
        ctx->self->request(node, ctx->node_timeout(), nd_destroy_atom::value, record.id)
          .then(
            [ctx, record, snapshot](node_sandbox&) mutable {
              ctx->release(record);
              record.state = sandbox_state::suspended;
              record.snapshot_id = snapshot.id;
              record.data_url.clear();
              ctx->save(std::move(record), [ctx, snapshot](sandbox_record saved) {
                ctx->deliver(step_outcome::complete(suspend_result(saved, snapshot)));
              });
            },
            [ctx](caf::error& error) { ctx->deliver_worker_error(error); });
      });
    },
    refused);
}

// --- sandbox.restore and sandbox.wake -----------------------------------------

void restore_mark(std::shared_ptr<step_context> ctx, sandbox_record record) {
  const bool rollback = !ctx->param_text("checkpoint_id").empty();
  if (!rollback && record.state == sandbox_state::running && record.snapshot_id.empty())
    return ctx->deliver(step_outcome::complete(sandbox_result(record)));
  bool allowed = rollback ? is_live(record.state) || record.state == sandbox_state::suspended
                          : record.state == sandbox_state::suspended;
  mark_then_advance(ctx, std::move(record), sandbox_state::restoring, allowed,
                    rollback ? "rollback needs it running, paused or suspended"
                             : "restore without a checkpoint needs it suspended");
}

std::string restore_result(const sandbox_record& record, const snapshot_record& source) {
  return json{{"sandbox_id", record.id},
              {"state", std::string(schema::to_string(record.state))},
              {"restored_from", source.id},
              {"memory_persisted", source.memory_persisted}}
    .dump();
}

/// Puts the sandbox back from `source` (its suspend snapshot or one of its
/// checkpoints) with the same id, spec and egress policy; a sandbox that
/// still runs is destroyed first. The suspend snapshot, if any, goes once
/// the sandbox runs again.
void restore_start(std::shared_ptr<step_context> ctx, sandbox_record record) {
  if (record.state == sandbox_state::running && record.snapshot_id.empty())
    return ctx->deliver(step_outcome::complete(sandbox_result(record)));
  if (record.state != sandbox_state::restoring)
    return ctx->deliver(fail_with(wrong_state(record, "")));
  auto checkpoint = ctx->param_text("checkpoint_id");
  const auto before = from_state(*ctx, sandbox_state::suspended);
  const auto source = checkpoint.empty() ? record.snapshot_id : checkpoint;
  // Refused before anything changed: the sandbox stays as it was. After a
  // live sandbox was destroyed there is nothing to go back to.
  auto give_up = [ctx, record, before](const status& failure, bool destroyed) mutable {
    record.state = destroyed ? sandbox_state::error : before;
    if (destroyed)
      record.error_reason =
        schema::error_info{std::string(to_string(failure.code)),
                           "the restore could not start the sandbox again: " + failure.message
                             + "; restore it again from the checkpoint, or delete it"};
    ctx->save(std::move(record),
              [ctx, failure](sandbox_record) { ctx->deliver(fail_with(failure)); });
  };
  auto run_from = [ctx, source, give_up](sandbox_record current, snapshot_record snapshot,
                                         bool destroyed) {
    ctx->place(
      std::move(current), snapshot.worker_id,
      [ctx, source, snapshot, give_up, destroyed](sandbox_record placed) {
        ctx->start(
          std::move(placed), source,
          [ctx, snapshot](sandbox_record running) {
            auto finish = [ctx, snapshot](sandbox_record done) {
              ctx->deliver(step_outcome::complete(restore_result(done, snapshot)));
            };
            if (running.snapshot_id.empty())
              return finish(std::move(running));
            delete_snapshot(ctx, running.snapshot_id, [ctx, running, finish]() mutable {
              running.snapshot_id.clear();
              ctx->save(std::move(running), finish);
            });
          },
          [give_up, destroyed](const status& failure) mutable { give_up(failure, destroyed); });
      },
      [give_up, destroyed](const status& failure) mutable { give_up(failure, destroyed); });
  };
  ctx->with_snapshot(
    source,
    [ctx, record, before, run_from, give_up](snapshot_record snapshot) mutable {
      if (!snapshot.complete || snapshot.sandbox_id != record.id)
        return give_up(
          make_status(errc::not_found,
                      "snapshot " + snapshot.id + " is not a complete snapshot of " + record.id),
          false);
      if (!is_live(before))
        return run_from(std::move(record), std::move(snapshot), false);
      ctx->with_node(record.worker_id, [ctx, record, snapshot, run_from](node_actor node) {
        ctx->self->request(node, ctx->node_timeout(), nd_destroy_atom::value, record.id)
          .then([record, snapshot, run_from](node_sandbox&) { run_from(record, snapshot, true); },
                [ctx](caf::error& error) { ctx->deliver_worker_error(error); });
      });
    },
    [source, give_up]() mutable {
      give_up(make_status(errc::not_found, "snapshot " + source + " is gone"), false);
    });
}

/// wake: whichever path leads back to running.
void wake_mark(std::shared_ptr<step_context> ctx, sandbox_record record) {
  switch (record.state) {
    case sandbox_state::running:
      return ctx->deliver(step_outcome::complete(sandbox_result(record)));
    case sandbox_state::resuming:
    case sandbox_state::restoring: return ctx->deliver(step_outcome::advance());
    case sandbox_state::paused: record.state = sandbox_state::resuming; break;
    case sandbox_state::suspended: record.state = sandbox_state::restoring; break;
    default:
      return ctx->deliver(fail_with(wrong_state(record, "wake needs it paused or suspended")));
  }
  ctx->save(std::move(record), [ctx](sandbox_record) { ctx->deliver(step_outcome::advance()); });
}

void wake_finish(std::shared_ptr<step_context> ctx, sandbox_record record) {
  if (record.state == sandbox_state::resuming)
    return freeze_on_worker(std::move(ctx), std::move(record));
  restore_start(std::move(ctx), std::move(record));
}

// --- sandbox.fork ---------------------------------------------------------------

void fork_checkpoint(std::shared_ptr<step_context> ctx, sandbox_record record) {
  take_checkpoint(
    ctx, std::move(record), ctx->param_text("checkpoint_id"),
    [ctx](snapshot_record) { ctx->deliver(step_outcome::advance()); },
    "fork needs it running or paused");
}

/// The forks' outcomes as they come in; the step ends with the last.
struct fork_tally {
  size_t pending = 0;
  std::vector<std::string> started;
  json failed = json::array();
};

/// One fork: its record (created once, with the source's spec and the
/// checkpoint as its origin), placed on the checkpoint's worker, started.
void fork_one(std::shared_ptr<step_context> ctx, const sandbox_record& source,
              const snapshot_record& snapshot, const std::string& id,
              std::function<void(const std::string&, const status&)> done) {
  auto params = ctx->params();
  sandbox_record fresh;
  fresh.id = id;
  fresh.tenant_id = source.tenant_id;
  fresh.state = sandbox_state::creating;
  fresh.spec = source.spec;
  fresh.spec.from_checkpoint = snapshot.id;
  if (auto metadata = params.find("metadata"); metadata != params.end() && metadata->is_object())
    fresh.spec.metadata = metadata->get<std::map<std::string, std::string>>();
  fresh.created_at_ms = params.value("created_at_ms", int64_t{0});
  fresh.last_active_at_ms = fresh.created_at_ms;
  auto fail = [ctx, id, done](sandbox_record record, const status& failure) {
    ctx->end_failed(std::move(record), failure, [id, done, failure] { done(id, failure); });
  };
  ctx->self->request(ctx->deps.registry, ctx->control_timeout(), rg_create_atom::value, fresh)
    .then(
      [ctx, snapshot, id, done, fail](sandbox_record& stored) {
        if (stored.state == sandbox_state::running)
          return done(id, status::ok());
        if (stored.state != sandbox_state::creating)
          return done(id, stored.error_reason
                            ? make_status(errc::unavailable, stored.error_reason->message)
                            : wrong_state(stored, ""));
        ctx->place(
          stored, snapshot.worker_id,
          [ctx, snapshot, id, done, fail](sandbox_record placed) {
            ctx->start(
              placed, snapshot.id, [id, done](sandbox_record) { done(id, status::ok()); },
              [fail, placed](const status& failure) { fail(placed, failure); });
          },
          [fail, stored](const status& failure) { fail(stored, failure); });
      },
      [ctx](caf::error& error) { ctx->deliver_unknown(error); });
}

void fork_sandboxes(std::shared_ptr<step_context> ctx, sandbox_record source) {
  auto params = ctx->params();
  std::vector<std::string> ids;
  if (auto listed = params.find("sandbox_ids"); listed != params.end() && listed->is_array())
    for (const auto& id : *listed)
      if (id.is_string())
        ids.push_back(id.get<std::string>());
  const auto checkpoint = ctx->param_text("checkpoint_id");
  if (ids.empty() || checkpoint.empty())
    return ctx->deliver(
      step_outcome::fail("invalid_argument", "the operation names no checkpoint or no sandboxes"));
  ctx->with_snapshot(
    checkpoint,
    [ctx, source, ids](snapshot_record snapshot) {
      if (!snapshot.complete)
        return ctx->deliver(fail_with(
          make_status(errc::wrong_state, "checkpoint " + snapshot.id + " is not complete")));
      auto tally = std::make_shared<fork_tally>();
      tally->pending = ids.size();
      auto done = [ctx, tally, snapshot](const std::string& id, const status& outcome) {
        if (outcome)
          tally->started.push_back(id);
        else
          tally->failed.push_back(json{{"sandbox_id", id}, {"error", error_json(outcome)}});
        if (--tally->pending != 0)
          return;
        if (tally->started.empty())
          return ctx->deliver(
            step_outcome::fail(tally->failed[0]["error"]["code"].get<std::string>(),
                               "no fork started; the first failure: "
                                 + tally->failed[0]["error"]["message"].get<std::string>()));
        ctx->deliver(step_outcome::complete(json{
          {"checkpoint_id", snapshot.id},
          {"sandbox_ids", tally->started},
          {"failed", tally->failed}}.dump()));
      };
      for (const auto& id : ids)
        fork_one(ctx, source, snapshot, id, done);
    },
    [ctx, checkpoint] {
      ctx->deliver(fail_with(
        make_status(errc::not_found, "checkpoint " + checkpoint + " is gone: fork again")));
    });
}

} // namespace

step_function snapshot_step_of(const std::string& kind, uint32_t step) {
  auto pick = [step](step_function first, step_function second) -> step_function {
    return step == 0 ? first : step == 1 ? second : nullptr;
  };
  if (kind == kind_checkpoint_create)
    return pick(checkpoint_take, nullptr);
  if (kind == kind_checkpoint_delete)
    return pick(checkpoint_remove, nullptr);
  if (kind == kind_sandbox_suspend)
    return pick(suspend_mark, suspend_on_worker);
  if (kind == kind_sandbox_restore)
    return pick(restore_mark, restore_start);
  if (kind == kind_sandbox_wake)
    return pick(wake_mark, wake_finish);
  if (kind == kind_sandbox_fork)
    return pick(fork_checkpoint, fork_sandboxes);
  return nullptr;
}

} // namespace airlock::actors::procedure_detail
