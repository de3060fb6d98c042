#pragma once
// Relays a template build's progress from the worker that runs it to an
// operation: the template's own build (template.build) and a create that
// waits for its template's first build on a worker (sandbox.create).

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>

#include <chrono>
#include <string>

#include "actors/cluster_protocol.hpp"
#include "schema/sandbox.hpp"

namespace airlock::actors {

struct progress_relay_options {
  /// Between two polls of the worker; the first comes after a quarter of it.
  std::chrono::milliseconds every{1000};
  std::chrono::milliseconds call_timeout{10'000};
  /// The relay ends by itself after this long (its step's whole wait).
  std::chrono::milliseconds lifetime{50'000};
  /// Tell the worker to stop the build once the operation is asked to
  /// cancel. False where the build is shared (a create waiting for it).
  bool forward_cancel = true;
  /// Put before the worker's step name ("building template base: ").
  std::string step_prefix;
};

/// Polls `node` for build `worker_name` (nd_twatch) and hands what it reports
/// to `operation` (op_progress) while a build runs; quiet when none does.
/// Stop it with stop_progress_relay when the wait it serves ends.
caf::actor spawn_progress_relay(caf::actor_system& system, node_actor node, std::string worker_name,
                                caf::actor operation, progress_relay_options options);

void stop_progress_relay(const caf::actor& relay);

/// The name of a sandbox's template in its worker's rootfs: the version's
/// own name for a versioned template, else the template's.
inline const std::string& worker_template_of(const schema::sandbox_spec& spec) {
  return spec.template_worker_name.empty() ? spec.template_name : spec.template_worker_name;
}

} // namespace airlock::actors
