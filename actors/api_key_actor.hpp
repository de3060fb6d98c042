#pragma once
// api_key_actor: who an API key belongs to, and new tenant keys. Every HTTP
// request that carries an API key asks it first, so it is an actor of its
// own: a caller is never queued behind the sandbox registry's record scans.
//
// Messages are local to the control plane (never cross hosts).

#include <caf/atom.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/typed_actor.hpp>

#include <string>

#include "actors/clock.hpp"
#include "storage/kv_store.hpp"

namespace airlock::actors {

using key_auth_atom = caf::atom_constant<caf::atom("keyauth")>;
using key_create_atom = caf::atom_constant<caf::atom("keycreate")>;

/// Who made a request.
struct caller_identity {
  std::string tenant_id;
  bool admin = false;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, caller_identity& x) {
  return f(caf::meta::type_name("caller_identity"), x.tenant_id, x.admin);
}

using api_key_actor = caf::typed_actor<
  /// The caller behind an API key ("ak_<id>_<secret>"). Errors:
  /// unauthenticated (malformed, unknown, revoked or wrong secret; one
  /// sentence for all so keys cannot be probed). Idempotent.
  caf::replies_to<key_auth_atom, std::string>::with<caller_identity>,
  /// Creates an API key for tenant `tenant` (role tenant) and replies with its
  /// text, which is shown once. Errors: invalid_argument (tenant name), io_error.
  caf::replies_to<key_create_atom, std::string>::with<std::string>>;

/// `store` and `clock` outlive the actor.
api_key_actor spawn_api_key_actor(caf::actor_system& system, storage::kv_store& store,
                                  const wall_clock& clock);

} // namespace airlock::actors
