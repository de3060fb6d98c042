#pragma once
// lifecycle_policy: the idle and lifetime rules, run as operations so that
// they are visible and audited like any other (docs/snapshots.md).
//
// Each pass (on a timer of the actor clock, or on lp_run) reads the running
// and paused sandboxes and, by the wall clock:
// - a sandbox whose running time (paused and suspended time do not count)
//   reached `max_lifetime_s` is deleted (sandbox.delete);
// - a sandbox with no activity for `idle_timeout_s` is suspended
//   (`on_idle: suspend`, sandbox.suspend) or deleted (`on_idle: delete`);
// - a running sandbox active within its `checkpoint_interval_s` gets an
//   automatic checkpoint once per interval (checkpoint.create), and its
//   oldest automatic checkpoints beyond `checkpoints_max` are deleted.
// Activity is what the registry has been told (API calls on the sandbox)
// and what the policy sees on the worker: a process that started or ended,
// or output that grew, since the last look. Before acting on an idle
// sandbox the policy looks at its processes twice, one pass apart: a
// process busy writing output is activity even with nobody reading it. The
// suspend it starts names the idle time it decided on; the operation gives
// up (`abandoned`) when activity arrived since.
// Deadlines come from the stored records (last_active_at, running time), so
// a restarted control plane recomputes them rather than losing them.

#include <caf/actor_system.hpp>
#include <caf/typed_actor.hpp>

#include <cstdint>

#include "actors/clock.hpp"
#include "actors/cluster_protocol.hpp"
#include "actors/operation_engine.hpp"
#include "actors/sandbox_registry.hpp"

namespace airlock::actors {

using lp_tick_atom = caf::atom_constant<caf::atom("lptick")>;
using lp_run_atom = caf::atom_constant<caf::atom("lprun")>;

struct lifecycle_policy_options {
  /// Time between passes (an idle sandbox is acted on within two). Default: 5000.
  uint32_t interval_ms = 5'000;
  /// Bound on each registry, scheduler, node or engine call. Default: 10000.
  uint32_t call_timeout_ms = 10'000;
  /// Records read per page. Default: 1000.
  size_t page_size = 1000;
};

using lifecycle_policy_actor = caf::typed_actor<
  /// Runs one pass now and replies with how many operations it started.
  caf::replies_to<lp_run_atom>::with<uint64_t>,
  /// Internal: the periodic timer.
  caf::reacts_to<lp_tick_atom>>;

/// `clock` (the wall clock the records' times use) outlives the actor.
lifecycle_policy_actor
spawn_lifecycle_policy(caf::actor_system& system, sandbox_registry_actor registry,
                       scheduler_actor scheduler, operation_engine_actor engine,
                       const wall_clock& clock, lifecycle_policy_options options = {});

} // namespace airlock::actors
