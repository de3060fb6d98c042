#pragma once
// What the lifecycle procedures' steps share (sandbox_procedures.cpp for
// create, delete, pause and resume; snapshot_procedures.cpp for checkpoints,
// suspend, restore, wake and fork): the step's context with its chained
// calls to the registry, the scheduler and the worker's node, and the two
// halves of starting a sandbox (place it, start it on its worker) that
// create, restore and fork all use. Internal to actors/.

#include <caf/typed_event_based_actor.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "actors/errors.hpp"
#include "actors/sandbox_procedures.hpp"

namespace airlock::actors::procedure_detail {

using schema::sandbox_record;
using schema::sandbox_state;
using schema::snapshot_record;
using std::chrono::milliseconds;

// Atoms of the wait timer (at most 10 characters, unique in airlock).
using lc_wait_atom = caf::atom_constant<caf::atom("lcwait")>;
using lc_wake_atom = caf::atom_constant<caf::atom("lcwake")>;

/// What every procedure step works with.
struct lifecycle_deps {
  sandbox_registry_actor registry;
  scheduler_actor scheduler;
  caf::actor timer; ///< answers (lc_wait, ms) with true after ms on the actor clock
  sandbox_procedure_options options;
};

using runner_pointer = step_runner_actor::pointer;
using promise_type = caf::typed_response_promise<step_outcome>;

/// The scheduler's answers while a worker is away: unavailable (none
/// registered or ready, or this one lost) and not_found (not registered since
/// the control plane started). Worth waiting for, within worker_wait_ms.
inline bool worker_away(errc code) noexcept {
  return code == errc::unavailable || code == errc::not_found;
}

/// Errors that say the worker may be back soon (restart, reconnect) or that
/// the effect may have happened: reconcile later rather than fail.
inline bool retry_later(errc code) noexcept {
  return code == errc::timeout || code == errc::unavailable || code == errc::outcome_unknown
         || code == errc::not_found;
}

inline step_outcome fail_with(const status& failure) {
  return step_outcome::fail(std::string(to_string(failure.code)), failure.message);
}

inline status wrong_state(const sandbox_record& record, const std::string& what_it_needs) {
  return make_status(errc::wrong_state, "sandbox " + record.id + " is "
                                          + std::string(schema::to_string(record.state))
                                          + (what_it_needs.empty() ? "" : "; " + what_it_needs));
}

inline std::string sandbox_result(const sandbox_record& record) {
  return nlohmann::json{{"sandbox_id", record.id},
                        {"state", std::string(schema::to_string(record.state))}}
    .dump();
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
  milliseconds node_timeout() const { return milliseconds(deps.options.node_call_timeout_ms); }

  void deliver(step_outcome outcome) { promise.deliver(std::move(outcome)); }

  /// A failure of a control-plane call (registry, scheduler): unknown, so the
  /// engine reconciles and runs the step again.
  void deliver_unknown(const caf::error&) { deliver(step_outcome::unknown()); }

  /// A worker's refusal fails the step; a lost or late answer is unknown.
  void deliver_worker_error(const caf::error& error) {
    auto failure = to_status(error);
    if (retry_later(failure.code))
      return deliver_unknown(error);
    deliver(fail_with(failure));
  }

  /// The operation's parameters (an object, or empty).
  nlohmann::json params() const;

  /// A text parameter, or "".
  std::string param_text(const char* name) const;

  void with_record(const std::string& id, std::function<void(sandbox_record)> next);
  void save(sandbox_record record, std::function<void(sandbox_record)> next);

  /// The snapshot's record; `missing` runs when there is none.
  void with_snapshot(const std::string& id, std::function<void(snapshot_record)> next,
                     std::function<void()> missing);
  void save_snapshot(snapshot_record snapshot, std::function<void(snapshot_record)> next);
  void forget_snapshot(const std::string& id, std::function<void()> next);

  /// Runs `next(waited_ms + worker_poll_ms)` after worker_poll_ms. False
  /// (and nothing runs) once `waited_ms` reached worker_wait_ms.
  bool poll_again(uint32_t waited_ms, std::function<void(uint32_t)> next);

  /// The worker's node. While it is not (yet) registered or not ready, polls
  /// for up to worker_wait_ms (a step recovered right after a control-plane
  /// restart waits for workers to rejoin), then reports unknown.
  void with_node(const std::string& worker_id, std::function<void(node_actor)> next,
                 uint32_t waited_ms = 0);

  /// Frees the sandbox's reservation on its worker (best effort: a lost
  /// release is found again when the worker re-registers).
  void release(const sandbox_record& record);

  /// Ends a start that failed: nothing of it is left on any worker, so its
  /// record ends destroyed with the reason (refusals must not pile up as
  /// records in error), and `next` runs.
  void end_failed(sandbox_record record, const status& reason, std::function<void()> next);

  /// end_failed, then the operation fails with the reason.
  void fail_create(sandbox_record record, const status& reason);

  /// Places the sandbox (only on `snapshot_worker` when it is not empty) and
  /// records where; polls for up to worker_wait_ms while no worker is
  /// ready. A refusal goes to `refused`; a lost answer is unknown.
  void place(sandbox_record record, std::string snapshot_worker,
             std::function<void(sandbox_record)> placed, std::function<void(status)> refused,
             uint32_t waited_ms = 0);

  /// Starts the placed sandbox on its worker, from the snapshot
  /// `from_snapshot` there when it is not empty (else its template), and
  /// saves it running. A refusal (nothing is left on the worker) releases
  /// the reservation and goes to `refused`; a lost answer is unknown.
  void start(sandbox_record record, std::string from_snapshot,
             std::function<void(sandbox_record)> started, std::function<void(status)> refused);
};

using step_function = void (*)(std::shared_ptr<step_context>, sandbox_record);

/// An operation the idle policy started names the last activity it decided
/// on (`idle_since`); activity that arrived since wins, and the operation
/// gives up with this result instead.
inline bool active_since_decision(const step_context& ctx, const sandbox_record& record) {
  auto params = ctx.params();
  auto since = params.find("idle_since");
  return since != params.end() && since->is_number_integer()
         && record.last_active_at_ms > since->get<int64_t>();
}

inline std::string abandoned_result(const sandbox_record& record) {
  return nlohmann::json{{"sandbox_id", record.id},
                        {"state", std::string(schema::to_string(record.state))},
                        {"abandoned", true},
                        {"reason", "the sandbox was active after the idle decision"}}
    .dump();
}

/// The worker half of pause and resume (and of wake from paused): the
/// operation's kind says which.
void freeze_on_worker(std::shared_ptr<step_context> ctx, sandbox_record record);

/// The step of a snapshot procedure (checkpoint.*, sandbox.suspend, restore,
/// wake, fork), or nullptr.
step_function snapshot_step_of(const std::string& kind, uint32_t step);

} // namespace airlock::actors::procedure_detail
