#pragma once
// reconciler: makes the control plane's sandbox records agree with what the
// workers actually run. A worker that restarts ends every process of its
// earlier run (their guests died with it) but keeps the sandboxes' files, so
// a record that still says running or paused for a sandbox its worker no
// longer runs is brought back from those files (`ndrecreate`: running again,
// processes lost, audited), or, when the files are gone too, marked `error`
// with a reason that says what to do. A sandbox its worker runs takes the
// worker's word on running versus paused and its current data URL. Runs at
// start and then periodically; workers that are not reachable are left
// alone (their sandboxes may come back when they rejoin).

#include <caf/actor_system.hpp>
#include <caf/atom.hpp>
#include <caf/typed_actor.hpp>

#include <cstdint>

#include "actors/audit_actor.hpp"
#include "actors/cluster_protocol.hpp"
#include "actors/sandbox_registry.hpp"

namespace airlock::actors {

using rc_tick_atom = caf::atom_constant<caf::atom("rctick")>;
using rc_run_atom = caf::atom_constant<caf::atom("rcrun")>;

struct reconciler_options {
  /// Time between passes. Default: 10000.
  uint32_t interval_ms = 10'000;
  /// Bound on each registry, scheduler or node call. Default: 10000.
  uint32_t call_timeout_ms = 10'000;
  /// Records read per page. Default: 1000.
  size_t page_size = 1000;
};

using reconciler_actor = caf::typed_actor<
  /// Runs one pass now and replies with how many records it marked. Idempotent.
  caf::replies_to<rc_run_atom>::with<uint64_t>,
  /// Internal: the periodic timer.
  caf::reacts_to<rc_tick_atom>>;

/// With `audit`, every record marked error also becomes a lifecycle audit
/// record (decision "error").
reconciler_actor spawn_reconciler(caf::actor_system& system, sandbox_registry_actor registry,
                                  scheduler_actor scheduler, reconciler_options options = {},
                                  audit_actor audit = {});

} // namespace airlock::actors
