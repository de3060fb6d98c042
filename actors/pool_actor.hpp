#pragma once
// pool_actor: warm pools (docs/pools.md). A template with a pool of size N
// keeps N sandboxes of its current version running on every worker that can
// hold that version: created the usual way (sandbox.create operations, so
// they are durable, placed and brought back after a restart like any
// sandbox), owned by no tenant (pool_tenant), network deny-all, no idle or
// lifetime rule. A create that matches a member claims it (pl_claim) instead
// of starting a sandbox: the member's id becomes the new sandbox's id.
//
// The actor keeps the pools and their members in memory and rebuilds both
// from the registry at start (pool settings live in the template records,
// members are sandbox records of pool_tenant). Each pass (a timer, or right
// after a claim) reads the members' records, counts what is ready, starts
// creates where a worker is short (at most `refills_max` at once, and after a
// quiet moment without claims unless half the pool is gone, so refills
// never crowd out clients' creates) and deletes members that no pool wants
// (a smaller size, an older version).

#include <caf/atom.hpp>
#include <caf/typed_actor.hpp>

#include <cstdint>
#include <map>
#include <string>

#include "actors/clock.hpp"
#include "actors/cluster_protocol.hpp"
#include "actors/operation_engine.hpp"
#include "actors/sandbox_registry.hpp"
#include "schema/template_record.hpp"

namespace airlock::metrics {
class metrics_registry;
}

namespace airlock::actors {

using pl_set_atom = caf::atom_constant<caf::atom("plset")>;
using pl_get_atom = caf::atom_constant<caf::atom("plget")>;
using pl_all_atom = caf::atom_constant<caf::atom("plall")>;
using pl_claim_atom = caf::atom_constant<caf::atom("plclaim")>;
using pl_tick_atom = caf::atom_constant<caf::atom("pltick")>;

/// The metadata key that names a member's pool (its template).
inline constexpr const char* pool_metadata_key = "airlock.pool";

/// One pool as GET /v1/templates/{name}/pool shows it.
struct pool_view {
  schema::pool_settings settings;
  uint32_t ready = 0;    ///< members that a create can claim now
  uint32_t creating = 0; ///< members being made
  uint64_t hits_total = 0;
  uint64_t misses_total = 0;
  bool operator==(const pool_view&) const = default;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, pool_view& x) {
  return f(caf::meta::type_name("pool_view"), x.settings, x.ready, x.creating, x.hits_total,
           x.misses_total);
}

struct pool_actor_options {
  /// Time between passes. Default: 500.
  uint32_t tick_ms = 500;
  /// Member creates under way at once, over all pools. Default: 2.
  uint32_t refills_max = 2;
  /// Refills wait until no claim came for this long, unless fewer than half
  /// of a worker's members are ready: a burst of creates does not share the
  /// CPU with the members that replace what it took. Default: 300.
  uint32_t refill_quiet_ms = 300;
  /// A worker whose member create failed gets no new one for this long.
  /// Default: 5000.
  uint32_t retry_after_failure_ms = 5'000;
  /// Bound on each registry, scheduler and engine call. Default: 10000.
  uint32_t call_timeout_ms = 10'000;
};

using pool_actor = caf::typed_actor<
  /// Sets template `name`'s pool as `tenant` (its owner; "" an admin) and
  /// replies with it. Errors as rg_tpool.
  caf::replies_to<pl_set_atom, std::string, std::string, schema::pool_settings>::with<pool_view>,
  /// The pool of template `name` as `tenant` sees it. Errors: not_found.
  caf::replies_to<pl_get_atom, std::string, std::string>::with<pool_view>,
  /// Every pool with a size, by template name.
  caf::replies_to<pl_all_atom>::with<std::map<std::string, pool_view>>,
  /// A ready member that a create of `wanted` (its spec resolved to a
  /// template version) can become, handed out once. Errors: not_found (a
  /// miss: no pool, or no member ready that fits).
  caf::replies_to<pl_claim_atom, schema::sandbox_record>::with<schema::sandbox_record>,
  /// Internal: the periodic pass.
  caf::reacts_to<pl_tick_atom>>;

struct pool_actor_deps {
  sandbox_registry_actor registry;
  scheduler_actor scheduler;
  operation_engine_actor engine;
  const wall_clock* clock = nullptr; ///< outlives the actor
  entropy_source* entropy = nullptr; ///< outlives the actor; member ids
  /// Pool figures for /metrics (size, ready, hits, misses, refill time);
  /// may be null. Outlives the actor.
  metrics::metrics_registry* metrics = nullptr;
};

pool_actor spawn_pool_actor(caf::actor_system& system, pool_actor_deps deps,
                            pool_actor_options options = {});

/// Whether a create of `wanted` can take `member`: the same template
/// version, no checkpoint to start from, the same disk limit and requests
/// (a wanted 0 is the default a member got), the same runtime. CPU and
/// memory limits may differ: the claim sets them in place; a microVM's
/// memory and vCPUs are fixed at boot, so for a VM member they must match.
bool member_fits(const schema::sandbox_record& member, const schema::sandbox_record& wanted);

} // namespace airlock::actors
