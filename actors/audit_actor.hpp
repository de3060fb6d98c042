#pragma once
// audit_actor: the control plane's audit log (GET /v1/audit). Workers send
// batches of egress, DNS and credential decisions over the cluster link
// (through the scheduler's sc_audit); the engine's on_terminal hook and the
// reconciler add lifecycle records. Appends are buffered writes (no fsync
// per record); a sweep every sweep_interval_ms deletes records older than the
// retention. Messages are local to the control plane.

#include <caf/atom.hpp>
#include <caf/typed_actor.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "actors/clock.hpp"
#include "actors/cluster_protocol.hpp" // inspect() of audit_record, audit_query, page
#include "schema/egress.hpp"
#include "schema/operation.hpp"
#include "schema/page.hpp"
#include "storage/kv_store.hpp"

namespace airlock::actors {

using au_append_atom = caf::atom_constant<caf::atom("auappend")>;
using au_query_atom = caf::atom_constant<caf::atom("auquery")>;
using au_sweep_atom = caf::atom_constant<caf::atom("ausweep")>;
using au_tick_atom = caf::atom_constant<caf::atom("autick")>;

struct audit_options {
  /// Records older than this are deleted by the sweep. Default: 720 (30 days).
  uint32_t audit_retention_hours = 720;
  /// Time between retention sweeps. Default: 60000.
  uint32_t sweep_interval_ms = 60'000;
  /// Records deleted per sweep at most (the rest waits for the next one).
  /// Default: 100000.
  size_t sweep_records_max = 100'000;
  /// Records one append may carry; a larger batch is refused with too_large.
  /// Default: 10000.
  size_t append_records_max = 10'000;
  /// Longest text field kept; longer ones are cut (a guest chooses host names
  /// and paths). Default: 1024.
  size_t field_bytes_max = 1'024;
};

/// One page of GET /v1/audit.
using audit_page = schema::page<schema::audit_record>;

using audit_actor = caf::typed_actor<
  /// Appends records (at_ms 0 is stamped with now). Errors: too_large,
  /// io_error. Not idempotent: a repeat appends again.
  caf::replies_to<au_append_atom, std::vector<schema::audit_record>>::with<bool>,
  /// Records matching the query in time order. Errors: invalid_argument
  /// (bad cursor), io_error. Idempotent.
  caf::replies_to<au_query_atom, schema::audit_query>::with<audit_page>,
  /// Deletes records past the retention now; replies with how many.
  /// Idempotent.
  caf::replies_to<au_sweep_atom>::with<uint64_t>,
  /// Internal: the periodic sweep, which schedules the next one.
  caf::reacts_to<au_tick_atom>>;

/// `store` and `clock` outlive the actor.
audit_actor spawn_audit_actor(caf::actor_system& system, storage::kv_store& store,
                              const wall_clock& clock, audit_options options = {});

/// The lifecycle audit record of an operation that ended: kind "lifecycle",
/// decision = its state, target = its kind, detail = its id.
schema::audit_record lifecycle_audit(const schema::operation_record& record);

} // namespace airlock::actors
