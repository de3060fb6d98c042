#pragma once
// The sandbox lifecycle as operation procedures: every step is idempotent,
// so a step whose outcome was lost (a control-plane crash, a timeout) is
// simply run again. Each step reads the sandbox record from the registry,
// acts through the scheduler and the worker's node actor, and writes the
// record's new state back through the registry.
//
// Kinds: sandbox.create, sandbox.delete, sandbox.pause, sandbox.resume, and
// the snapshot procedures (docs/snapshots.md): checkpoint.create,
// checkpoint.delete, sandbox.suspend, sandbox.restore, sandbox.wake and
// sandbox.fork. Their target is the sandbox; their params name the
// snapshot (whose record the API stored before starting the operation) and,
// for fork, the new sandboxes' ids, chosen once so a step run again after a
// crash never makes two.

#include <caf/actor_system.hpp>

#include <cstdint>

#include "actors/cluster_protocol.hpp"
#include "actors/operation_engine.hpp"
#include "actors/sandbox_registry.hpp"

namespace airlock::actors {

inline constexpr const char* kind_sandbox_create = "sandbox.create";
inline constexpr const char* kind_sandbox_delete = "sandbox.delete";
inline constexpr const char* kind_sandbox_pause = "sandbox.pause";
inline constexpr const char* kind_sandbox_resume = "sandbox.resume";
inline constexpr const char* kind_checkpoint_create = "checkpoint.create";
inline constexpr const char* kind_checkpoint_delete = "checkpoint.delete";
inline constexpr const char* kind_sandbox_suspend = "sandbox.suspend";
inline constexpr const char* kind_sandbox_restore = "sandbox.restore";
inline constexpr const char* kind_sandbox_wake = "sandbox.wake";
inline constexpr const char* kind_sandbox_fork = "sandbox.fork";

struct sandbox_procedure_options {
  /// Bound on one call to the registry or the scheduler. Default: 10000.
  uint32_t control_call_timeout_ms = 10'000;
  /// Bound on a create on the worker (a template built on demand takes
  /// longer: the step then counts as unknown and is run again, which joins
  /// the build). Default: 50000.
  uint32_t node_create_timeout_ms = 50'000;
  /// Bound on pause, resume and destroy on the worker. Default: 30000.
  uint32_t node_call_timeout_ms = 30'000;
  /// How long a step waits for a worker that is not (yet) registered or
  /// ready, polling the scheduler, before it gives up: long enough for
  /// workers to rejoin a restarted control plane (their reconnect backoff),
  /// short enough that a create with no worker fails instead of hanging.
  /// Default: 15000.
  uint32_t worker_wait_ms = 15'000;
  /// Pause between two such polls. Default: 250.
  uint32_t worker_poll_ms = 250;
  /// While a create waits for its template's first build on the worker, how
  /// often that build's progress is read into the operation. Default: 1000.
  uint32_t progress_poll_ms = 1000;
};

/// What a sandbox asks the scheduler for; `snapshot_worker` holds the
/// snapshot it starts from, if any.
schema::placement_request placement_for(const schema::sandbox_record& record,
                                        std::string snapshot_worker = {});

/// A new snapshot record of the sandbox (not complete): what the API and
/// the lifecycle policy store before the operation that takes it.
schema::snapshot_record new_snapshot_record(const schema::sandbox_record& sandbox,
                                            schema::snapshot_kind kind, std::string id,
                                            int64_t created_at_ms);

/// The procedure table entries for the ten kinds. The actors live until the
/// system stops.
procedure_table spawn_sandbox_procedures(caf::actor_system& system, sandbox_registry_actor registry,
                                         scheduler_actor scheduler,
                                         sandbox_procedure_options options = {});

} // namespace airlock::actors
