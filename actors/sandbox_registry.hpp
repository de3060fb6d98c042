#pragma once
// sandbox_registry: the control plane's own records, behind one actor so that
// HTTP handlers never touch the store: the sandbox records (what clients see
// through GET /v1/sandboxes) and the operation listing. Lifecycle procedures
// write sandbox state through it too, so every write to a sandbox record is
// serialized here, which is what lets it keep the per-state counts /metrics
// reads. API keys are api_key_actor's.
//
// Messages are local to the control plane (never cross hosts), but values all
// the same: each has an inspect().

#include <caf/atom.hpp>
#include <caf/typed_actor.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "actors/clock.hpp"
#include "actors/cluster_protocol.hpp" // inspect() of sandbox_record, egress_policy
#include "actors/inspect_fields.hpp"
#include "actors/messages.hpp" // inspect() of operation_record
#include "schema/operation.hpp"
#include "schema/sandbox.hpp"
#include "storage/kv_store.hpp"

namespace airlock::schema {

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, pool_settings& x) {
  return f(caf::meta::type_name("pool_settings"), x.size, x.cpu_millis, x.memory_mb, x.disk_mb);
}

} // namespace airlock::schema

namespace airlock::actors {

using rg_create_atom = caf::atom_constant<caf::atom("rgcreate")>;
using rg_get_atom = caf::atom_constant<caf::atom("rgget")>;
using rg_list_atom = caf::atom_constant<caf::atom("rglist")>;
using rg_patch_atom = caf::atom_constant<caf::atom("rgpatch")>;
using rg_save_atom = caf::atom_constant<caf::atom("rgsave")>;
using rg_verb_atom = caf::atom_constant<caf::atom("rgverb")>;
using rg_ops_atom = caf::atom_constant<caf::atom("rgops")>;
using rg_opkey_atom = caf::atom_constant<caf::atom("rgopkey")>;
using rg_count_atom = caf::atom_constant<caf::atom("rgcount")>;
using rg_snapsave_atom = caf::atom_constant<caf::atom("rgsnapsave")>;
using rg_snapget_atom = caf::atom_constant<caf::atom("rgsnapget")>;
using rg_snaplist_atom = caf::atom_constant<caf::atom("rgsnaplist")>;
using rg_snapdel_atom = caf::atom_constant<caf::atom("rgsnapdel")>;
using rg_touch_atom = caf::atom_constant<caf::atom("rgtouch")>;
using rg_attach_atom = caf::atom_constant<caf::atom("rgattach")>;
using rg_tget_atom = caf::atom_constant<caf::atom("rgtget")>;
using rg_tlist_atom = caf::atom_constant<caf::atom("rgtlist")>;
using rg_tnew_atom = caf::atom_constant<caf::atom("rgtnew")>;
using rg_tsave_atom = caf::atom_constant<caf::atom("rgtsave")>;
using rg_tusers_atom = caf::atom_constant<caf::atom("rgtusers")>;
using rg_tforget_atom = caf::atom_constant<caf::atom("rgtforget")>;
using rg_tpool_atom = caf::atom_constant<caf::atom("rgtpool")>;
using rg_claim_atom = caf::atom_constant<caf::atom("rgclaim")>;

struct sandbox_query {
  std::string tenant_id; ///< empty: every tenant (admin)
  std::optional<schema::sandbox_state> state;
  std::map<std::string, std::string> metadata;
  size_t limit = 100;
  std::string cursor;
};

struct sandbox_page {
  std::vector<schema::sandbox_record> items;
  std::string next_cursor;
};

/// PATCH /v1/sandboxes/{id}: the fields present change.
struct sandbox_patch {
  std::optional<std::map<std::string, std::string>> metadata;
  std::optional<schema::egress_policy> egress;
  std::optional<uint32_t> idle_timeout_s;
  std::optional<std::string> on_idle; ///< "suspend" or "delete" (checked by the API)
  std::optional<uint32_t> max_lifetime_s;
  std::optional<uint32_t> checkpoint_interval_s;
  std::optional<uint32_t> checkpoints_max;
};

struct operation_query {
  std::string tenant_id;
  std::string target_id;
  std::optional<schema::operation_state> state;
  size_t limit = 100;
  std::string cursor;
};

struct operation_page {
  std::vector<schema::operation_record> items;
  std::string next_cursor;
};

/// The lifecycle verbs a client asks for.
/// What a caller asks of a sandbox; rollback is restore with a checkpoint.
enum class sandbox_verb : uint8_t {
  pause,
  resume,
  destroy,
  checkpoint,
  suspend,
  restore,
  rollback,
  wake,
  fork
};

/// Whether `verb` may start from `state` (API: 409 otherwise).
bool verb_allowed(sandbox_verb verb, schema::sandbox_state state) noexcept;

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, sandbox_query& x) {
  auto state = optional_field{x.state};
  return f(caf::meta::type_name("sandbox_query"), x.tenant_id, state, x.metadata, x.limit,
           x.cursor);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, sandbox_page& x) {
  return f(caf::meta::type_name("sandbox_page"), x.items, x.next_cursor);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, sandbox_patch& x) {
  auto metadata = optional_field{x.metadata};
  auto egress = optional_field{x.egress};
  auto idle_timeout_s = optional_field{x.idle_timeout_s};
  auto on_idle = optional_field{x.on_idle};
  auto max_lifetime_s = optional_field{x.max_lifetime_s};
  auto checkpoint_interval_s = optional_field{x.checkpoint_interval_s};
  auto checkpoints_max = optional_field{x.checkpoints_max};
  return f(caf::meta::type_name("sandbox_patch"), metadata, egress, idle_timeout_s, on_idle,
           max_lifetime_s, checkpoint_interval_s, checkpoints_max);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, operation_query& x) {
  auto state = optional_field{x.state};
  return f(caf::meta::type_name("operation_query"), x.tenant_id, x.target_id, state, x.limit,
           x.cursor);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, operation_page& x) {
  return f(caf::meta::type_name("operation_page"), x.items, x.next_cursor);
}

using sandbox_registry_actor = caf::typed_actor<
  /// Stores a new record (state creating) unless one with its id exists, and
  /// replies with what is stored. Not synced: the caller's next operation
  /// write syncs it (same store, one WAL) before the client hears of it.
  /// Idempotent.
  caf::replies_to<rg_create_atom, schema::sandbox_record>::with<schema::sandbox_record>,
  /// A record. Errors: not_found (also another tenant's; tenant "" sees all).
  caf::replies_to<rg_get_atom, std::string, std::string>::with<schema::sandbox_record>,
  caf::replies_to<rg_list_atom, sandbox_query>::with<sandbox_page>,
  /// Applies a patch (id, tenant). Errors: not_found, wrong_state (destroyed).
  caf::replies_to<rg_patch_atom, std::string, std::string,
                  sandbox_patch>::with<schema::sandbox_record>,
  /// Replaces a record (lifecycle procedures). Stamps updated_at. Not synced:
  /// the step's synced operation transition follows before anyone is told.
  /// Idempotent.
  caf::replies_to<rg_save_atom, schema::sandbox_record>::with<schema::sandbox_record>,
  /// Checks that `verb` is allowed now (id, tenant, verb). Errors: not_found,
  /// wrong_state with a sentence naming the state. Idempotent, no effect.
  caf::replies_to<rg_verb_atom, std::string, std::string,
                  sandbox_verb>::with<schema::sandbox_record>,
  caf::replies_to<rg_ops_atom, operation_query>::with<operation_page>,
  /// The operation first created with (tenant, Idempotency-Key), or "".
  caf::replies_to<rg_opkey_atom, std::string, std::string>::with<std::string>,
  /// Sandboxes by state (states with none left out), for /metrics: kept as
  /// records are written, not counted per call.
  caf::replies_to<rg_count_atom>::with<std::map<std::string, uint64_t>>,
  /// Stores a snapshot record (docs/snapshots.md). Not synced, like rg_save.
  /// Idempotent.
  caf::replies_to<rg_snapsave_atom, schema::snapshot_record>::with<schema::snapshot_record>,
  /// A snapshot record (id, tenant). Errors: not_found (also another
  /// tenant's; tenant "" sees all).
  caf::replies_to<rg_snapget_atom, std::string, std::string>::with<schema::snapshot_record>,
  /// A sandbox's snapshots (sandbox id, tenant), oldest first, at most 1,000;
  /// sandbox id "": every sandbox's of the tenant.
  caf::replies_to<rg_snaplist_atom, std::string,
                  std::string>::with<std::vector<schema::snapshot_record>>,
  /// Forgets a snapshot record. Idempotent.
  caf::replies_to<rg_snapdel_atom, std::string>::with<bool>,
  /// Activity on a sandbox now (an API call on it, a process's output seen
  /// by the lifecycle policy). Coalesced: kept in memory and shown in every
  /// record read, written with the record's next save or when the stored
  /// time is over a minute old, never once per event.
  caf::reacts_to<rg_touch_atom, std::string>,
  /// Activity on a sandbox at a time (Unix ms) that the registry did not
  /// see: a worker's own listener served it. Coalesced the same way; a time
  /// after now counts as now.
  caf::reacts_to<rg_touch_atom, std::string, int64_t>,
  /// An attach stream on the sandbox opened (+1) or closed (-1): while one
  /// is open the sandbox counts as active now, whether output flows or not.
  caf::reacts_to<rg_attach_atom, std::string, int32_t>,
  // Template records (actors/template_records.hpp has the rules). Writes are
  // synced: a version number handed out is never handed out again.
  /// A template (name, tenant). Errors: not_found.
  caf::replies_to<rg_tget_atom, std::string, std::string>::with<schema::template_record>,
  /// Templates a tenant sees, by name, at most 1,000.
  caf::replies_to<rg_tlist_atom, std::string>::with<std::vector<schema::template_record>>,
  /// Adds the next version (name, tenant, draft). Errors: not_found,
  /// permission_denied, invalid_argument (a bad name).
  caf::replies_to<rg_tnew_atom, std::string, std::string,
                  schema::template_version>::with<schema::template_record>,
  /// Replaces a version (name, version). Errors: not_found.
  caf::replies_to<rg_tsave_atom, std::string,
                  schema::template_version>::with<schema::template_record>,
  /// Sandboxes and snapshots using (name, version; 0: any), at most 20.
  caf::replies_to<rg_tusers_atom, std::string, uint32_t>::with<std::vector<std::string>>,
  /// Forgets (name, version; 0: all). Idempotent.
  caf::replies_to<rg_tforget_atom, std::string, uint32_t>::with<bool>,
  /// Sets a template's warm pool (name, tenant, settings). Synced. Errors:
  /// not_found, permission_denied (a shared template's pool, not an admin).
  caf::replies_to<rg_tpool_atom, std::string, std::string,
                  schema::pool_settings>::with<schema::template_record>,
  /// A create claims a warm pool member (docs/pools.md): `record` replaces
  /// the member of its id, which must still be a running member (tenant
  /// pool_tenant) on the same worker. Not synced, like rg_create: the
  /// create's operation write carries it. A repeat of the same claim is
  /// answered with the stored record. Errors: wrong_state (no such member
  /// any more: create it the usual way).
  caf::replies_to<rg_claim_atom, schema::sandbox_record>::with<schema::sandbox_record>>;

/// `store` and `clock` outlive the actor.
sandbox_registry_actor spawn_sandbox_registry(caf::actor_system& system, storage::kv_store& store,
                                              const wall_clock& clock);

} // namespace airlock::actors
