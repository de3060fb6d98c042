#pragma once
// Placement policy as a pure library: given the fleet view, choose a worker
// for a sandbox. The scheduler actor (scheduler_actor.hpp) feeds it the ready
// workers; tests and a simulator can drive it in isolation.

#include <cstddef>
#include <string>
#include <vector>

#include "actors/clock.hpp"
#include "schema/errc.hpp"
#include "schema/worker.hpp"

namespace airlock::scheduler {

struct worker_view {
  std::string id;
  schema::resources capacity;
  /// What its sandboxes requested, placed ones included: placement fits
  /// requests into capacity.
  schema::resources allocated;
  /// The sum of its sandboxes' limits, bounded by memory_limit_percent.
  schema::resources limited;
  /// Reserved for a request field left at 0.
  schema::resources default_request;
  /// The sum of memory limits may reach this percent of capacity; 0: unbounded.
  uint32_t memory_limit_percent = 0;
  bool schedulable = true;            ///< false when cordoned, draining or lost
  bool memory_pressure = false;       ///< the worker refuses placements until it recovers
  std::vector<std::string> templates; ///< templates it has cached locally
  /// The runtimes it offers; empty: namespace only (a worker that names none).
  std::vector<std::string> runtimes;
};

struct placement_request {
  schema::resources need; ///< limits; `sandboxes` is ignored: each placement is one sandbox
  /// What to reserve; a zero field takes the worker's default request.
  schema::resources requests;
  std::string template_name;
  /// Non-empty: the sandbox starts from a snapshot this worker holds, and
  /// only it fits (snapshots do not move between workers yet).
  std::string snapshot_worker;
  /// The runtime the sandbox runs in: only a worker offering it fits.
  /// Empty: namespace.
  std::string runtime;
};

struct placement_options {
  /// Workers sampled at random among those that fit; the best one wins
  /// ("power of K choices": near-best balance without scanning a big
  /// fleet). 0 scores every fitting worker. Default: 2.
  size_t sample_k = 2;
  /// Score bonus for a worker that already has the template. Default: 0.25.
  double template_locality_bonus = 0.25;
};

/// The request reserved on `worker`: `requests`, each zero field taken from
/// the worker's default request.
schema::resources effective_request(const worker_view& worker, const schema::resources& requests);

/// True when `worker` offers the runtime `request` names (namespace when
/// either says nothing).
bool offers_runtime(const worker_view& worker, const placement_request& request);

/// True when `worker` offers the runtime, is schedulable, not under memory pressure, has room
/// for the request plus one more sandbox, and stays within its memory-limit
/// bound with `request.need` added.
bool fits(const worker_view& worker, const placement_request& request);

/// Free share of the scarcest resource after placing `need`, plus the
/// locality bonus; higher is better.
double score(const worker_view& worker, const placement_request& request,
             const placement_options& options);

/// The chosen worker's id. Fails with resource_exhausted, saying what was
/// asked and what the largest free worker offers, when nothing fits.
result<std::string> place(const std::vector<worker_view>& workers, const placement_request& request,
                          const placement_options& options, entropy_source& entropy);

} // namespace airlock::scheduler
