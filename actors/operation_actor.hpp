#pragma once
// One actor per operation: drives its procedure's steps through the state
// machine pending -> running -> succeeded | failed | cancelled, persisting
// every transition through the commit journal before anyone hears of it.
//
// Steps are run by a step runner actor (see operation_engine.hpp). Before a
// step runs, the record says step_started; if the actor (or the process) dies
// before the step's outcome is recorded, the step is ambiguous and is
// reconciled (step_check) rather than blindly repeated.

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <cstdint>
#include <string>

#include "actors/clock.hpp"
#include "actors/messages.hpp"
#include "schema/operation.hpp"
#include "storage/commit_journal.hpp"

namespace airlock::actors {

/// Runs the steps of one operation kind. Steps must be idempotent.
using step_runner_actor = caf::typed_actor<
  /// Performs step `req.step`. Reply advance/complete/fail, or unknown when
  /// the effect cannot be known. A request timeout counts as unknown.
  caf::replies_to<step_run_atom, step_request>::with<step_outcome>,
  /// Tells what became of a step whose outcome was not recorded: advance,
  /// complete or fail when it took effect, not_done when it did not (it is
  /// then run again), unknown to be asked again later.
  caf::replies_to<step_check_atom, step_request>::with<step_outcome>>;

/// Limits and timings of operations. Field names carry their unit.
struct operation_options {
  /// How long one step run or check may take before its outcome counts as
  /// unknown. Default: 60000.
  uint64_t step_timeout_ms = 60'000;
  /// Runs of one step (after not_done) before the operation fails. A
  /// create's first run may wait on its template's first build (debootstrap
  /// takes minutes on a busy host), each run bounded by the node call's
  /// timeout: 12 runs of 50 s cover ten minutes, inside the default deadline
  /// of fifteen. Default: 12.
  uint32_t step_attempts_max = 12;
  /// Unknown outcomes in a row before the operation fails with
  /// outcome_unknown. Default: 10.
  uint32_t reconcile_attempts_max = 10;
  /// First delay before a reconcile or persist retry; doubles each time.
  /// Default: 200.
  uint64_t retry_delay_ms = 200;
  /// Cap on the retry delay. Default: 10000.
  uint64_t retry_delay_max_ms = 10'000;
  /// Failed persists of one transition before the actor gives up (the
  /// operation then resumes on the next recovery). Default: 20.
  uint32_t persist_attempts_max = 20;
  /// Longest ?wait= a caller may ask for. Default: 60000.
  uint64_t wait_max_ms = 60'000;
  /// Watchers (SSE streams) per operation. Default: 64.
  size_t watchers_max = 64;
  /// Concurrent waiters per operation. Default: 1024.
  size_t waiters_max = 1024;
};

using operation_actor = caf::typed_actor<
  /// The operation as last persisted. Errors: not_found for another tenant
  /// (tenant "" matches any). Idempotent.
  caf::replies_to<op_get_atom, std::string /*tenant*/>::with<schema::operation_record>,
  /// Requests cancellation; replies once cancel_requested (or a terminal
  /// state) is persisted. A pending operation is cancelled at once, a
  /// running one at its next step boundary. Errors: wrong_state when
  /// already terminal. Idempotent.
  caf::replies_to<op_cancel_atom, std::string /*tenant*/>::with<schema::operation_record>,
  /// Replies when the operation reaches a terminal state or after wait_ms
  /// (capped at wait_max_ms), with the record as it then is.
  caf::replies_to<op_wait_atom, std::string /*tenant*/,
                  uint64_t /*wait_ms*/>::with<schema::operation_record>,
  /// Replies with the current record, then sends (op_event_atom, record) to
  /// `watcher` after every persisted transition, the terminal one last, and
  /// (op_progress_atom, record) when a step reports progress.
  /// Errors: resource_exhausted past watchers_max.
  caf::replies_to<op_watch_atom, std::string /*tenant*/,
                  caf::actor /*watcher*/>::with<schema::operation_record>,
  /// A running step's progress (a JSON object: step, percent, bytes_done,
  /// bytes_total). Kept with the record and sent to watchers as
  /// (op_progress_atom, record); not a transition of its own (it is written
  /// with the next one). Answers whether cancellation was requested, so a
  /// long step can stop early.
  caf::replies_to<op_progress_atom, std::string /*progress_json*/>::with<bool>,
  /// Internal: the journal acknowledged (or refused) transition `sequence`.
  caf::reacts_to<op_saved_atom, uint64_t /*sequence*/, caf::error>,
  /// Internal: the operation's deadline passed.
  caf::reacts_to<op_timer_atom>,
  /// Internal: waiter `id` ran out of time.
  caf::reacts_to<op_waited_atom, uint64_t /*id*/>,
  /// Internal: time to retry a reconcile or a persist.
  caf::reacts_to<op_retry_atom>>;

/// What an operation actor needs from its surroundings; the pointees outlive it.
struct operation_context {
  storage::commit_journal* journal = nullptr;
  const wall_clock* clock = nullptr;
  step_runner_actor runner;
  /// Receives (op_event_atom, record) once, for the terminal transition.
  caf::actor engine;
  operation_options options;
};

/// Spawns the actor for `record`, which must already be persisted. With
/// `recovered`, a step recorded as started is reconciled before anything
/// else runs.
operation_actor spawn_operation(caf::actor_system& system, schema::operation_record record,
                                bool recovered, operation_context context);

} // namespace airlock::actors
