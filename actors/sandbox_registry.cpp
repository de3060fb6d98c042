#include "actors/sandbox_registry.hpp"
#include "actors/template_records.hpp"

#include <caf/actor_system.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <algorithm>
#include <map>
#include <optional>
#include <utility>

#include "actors/cluster_protocol.hpp"
#include "actors/errors.hpp"
#include "actors/messages.hpp"
#include "actors/runtime_choice.hpp"
#include "storage/operation_store.hpp"
#include "storage/sandbox_store.hpp"
#include "storage/write_batch.hpp"

namespace airlock::actors {

bool verb_allowed(sandbox_verb verb, schema::sandbox_state state) noexcept {
  using schema::sandbox_state;
  switch (verb) {
    case sandbox_verb::pause: return state == sandbox_state::running;
    case sandbox_verb::resume: return state == sandbox_state::paused;
    case sandbox_verb::destroy:
      return state != sandbox_state::destroying && state != sandbox_state::destroyed;
    case sandbox_verb::checkpoint:
    case sandbox_verb::suspend:
    case sandbox_verb::fork:
      return state == sandbox_state::running || state == sandbox_state::paused;
    case sandbox_verb::restore: return state == sandbox_state::suspended;
    case sandbox_verb::rollback:
    case sandbox_verb::wake:
      return state == sandbox_state::running || state == sandbox_state::paused
             || state == sandbox_state::suspended;
  }
  return false;
}

namespace {

/// Records a page at a time while counting at start.
constexpr size_t count_page_size = 1000;
/// How stale a sandbox's stored last_active_at may get while it is active.
constexpr int64_t activity_write_interval_ms = 60'000;
/// Most snapshots one listing of a sandbox returns.
constexpr size_t snapshots_listed_max = 1000;
constexpr size_t templates_listed_max = 1000;
constexpr size_t template_users_max = 20;

using state_counts = std::map<schema::sandbox_state, uint64_t>;

/// Counts every record once; records are then counted as they are written.
result<state_counts> count_by_state(storage::kv_store& store) {
  state_counts counted;
  std::string cursor;
  for (;;) {
    auto listed = storage::sandbox_store(store).list({}, count_page_size, cursor);
    if (!listed)
      return listed.error();
    for (const auto& record : listed->items)
      ++counted[record.state];
    if (listed->next_cursor.empty())
      return counted;
    cursor = std::move(listed->next_cursor);
  }
}

struct registry_state {
  static inline const char* name = "sandbox_registry";
  storage::kv_store* store = nullptr;
  const wall_clock* clock = nullptr;

  /// Sandboxes per state, kept by save(). Empty until the first full count
  /// succeeds (at start, or else at the next rg_count).
  std::optional<state_counts> counts;

  /// Activity newer than the stored last_active_at, by sandbox id.
  std::map<std::string, int64_t> active;
  /// Open attach streams, by sandbox id (none: no entry).
  std::map<std::string, uint32_t> attached;
  /// last_active_at as last written, by sandbox id (learned on a write or on
  /// a sandbox's first touch): a touch reads the store only when this is
  /// unknown or a write is due, not once per API call.
  std::map<std::string, int64_t> stored_active;

  /// Activity on sandbox `id` at `at` (Unix ms, not after now).
  void touch(const std::string& id, int64_t at) {
    // The stored record, read only when needed; nothing for a sandbox that
    // is gone.
    auto read = [this, &id]() -> std::optional<schema::sandbox_record> {
      auto stored = storage::sandbox_store(*store).get(id);
      if (!stored || !stored->has_value() || (*stored)->state == schema::sandbox_state::destroyed) {
        active.erase(id);
        return std::nullopt;
      }
      return std::move(**stored);
    };
    auto known = stored_active.find(id);
    if (known == stored_active.end()) {
      auto record = read();
      if (!record)
        return;
      known = stored_active.emplace(id, record->last_active_at_ms).first;
    }
    auto& latest = active[id];
    latest = std::max(latest, at);
    // Coalesced: the stored time is refreshed at most once a minute, so a
    // control-plane restart loses at most that much activity.
    if (latest - known->second >= activity_write_interval_ms) {
      if (auto record = read()) {
        auto state = record->state;
        (void)save(*record, state);
      }
    }
  }

  /// The record with the activity not written yet; with a stream open, now.
  void merge_activity(schema::sandbox_record& record) const {
    if (auto it = active.find(record.id); it != active.end())
      record.last_active_at_ms = std::max(record.last_active_at_ms, it->second);
    if (attached.count(record.id) != 0)
      record.last_active_at_ms = std::max(record.last_active_at_ms, clock->now_ms());
  }

  /// Running time is counted in stretches: paused and suspended time do not
  /// count against max_lifetime_s.
  void account_lifetime(schema::sandbox_record& record, int64_t now) const {
    const bool running = record.state == schema::sandbox_state::running;
    if (running && record.running_since_ms == 0)
      record.running_since_ms = now;
    if (!running && record.running_since_ms != 0) {
      record.lifetime_used_ms += std::max<int64_t>(0, now - record.running_since_ms);
      record.running_since_ms = 0;
    }
  }

  /// Moves one record from `before` (none: a new record) to `after`.
  void recount(std::optional<schema::sandbox_state> before, schema::sandbox_state after) {
    if (!counts || before == after)
      return;
    if (before) {
      if (auto it = counts->find(*before); it != counts->end() && --it->second == 0)
        counts->erase(it);
    }
    ++(*counts)[after];
  }

  result<schema::sandbox_record> find(const std::string& id, const std::string& tenant) const {
    auto found = storage::sandbox_store(*store).get(id);
    if (!found)
      return found.error();
    if (!found->has_value() || (!tenant.empty() && (*found)->tenant_id != tenant))
      return make_status(errc::not_found, "no sandbox " + id);
    merge_activity(**found);
    return std::move(**found);
  }

  /// Lifecycle writes (create, save) are followed by a synced operation
  /// transition in the same store before anyone is told of them, and that
  /// sync carries them to disk too (one WAL): they need no sync of their
  /// own. A write answered to a client directly (patch) is synced.
  /// `before` is the stored record's state (none: there is no record yet).
  status save(schema::sandbox_record& record, std::optional<schema::sandbox_state> before,
              storage::durability mode = storage::durability::buffered) {
    record.updated_at_ms = clock->now_ms();
    merge_activity(record);
    account_lifetime(record, record.updated_at_ms);
    storage::write_batch batch;
    storage::sandbox_store::stage_put(batch, record);
    auto written = store->write(batch, mode);
    if (written.is_ok()) {
      recount(before, record.state);
      active.erase(record.id);
      if (record.state == schema::sandbox_state::destroyed)
        stored_active.erase(record.id);
      else
        stored_active[record.id] = record.last_active_at_ms;
    }
    return written;
  }

  /// save() of a record whose stored state the caller has not read.
  status replace(schema::sandbox_record& record) {
    std::optional<schema::sandbox_state> before;
    if (counts) {
      auto stored = storage::sandbox_store(*store).get(record.id);
      if (!stored)
        return stored.error();
      if (stored->has_value())
        before = (*stored)->state;
    }
    return save(record, before);
  }
};

using registry_pointer = sandbox_registry_actor::stateful_pointer<registry_state>;

caf::result<schema::sandbox_record> apply_patch(registry_pointer self, const std::string& id,
                                                const std::string& tenant,
                                                const sandbox_patch& patch) {
  auto record = self->state.find(id, tenant);
  if (!record)
    return make_error(record.error());
  if (record->state == schema::sandbox_state::destroyed
      || record->state == schema::sandbox_state::destroying)
    return make_error(errc::wrong_state,
                      "sandbox " + id + " is " + std::string(schema::to_string(record->state)));
  if (patch.metadata) {
    // The runtime is the sandbox's, not the caller's metadata: kept as it was.
    const auto runtime = runtime_of(record->spec);
    record->spec.metadata = *patch.metadata;
    set_runtime(record->spec, runtime);
  }
  if (patch.egress)
    record->spec.egress = *patch.egress;
  if (patch.idle_timeout_s)
    record->spec.idle_timeout_s = *patch.idle_timeout_s;
  if (patch.on_idle) {
    auto action = schema::parse_idle_action(*patch.on_idle);
    if (!action)
      return make_error(errc::invalid_argument, "on_idle must be \"suspend\" or \"delete\"");
    record->spec.on_idle = *action;
  }
  if (patch.max_lifetime_s)
    record->spec.max_lifetime_s = *patch.max_lifetime_s;
  if (patch.checkpoint_interval_s)
    record->spec.checkpoint_interval_s = *patch.checkpoint_interval_s;
  if (patch.checkpoints_max)
    record->spec.checkpoints_max = *patch.checkpoints_max;
  if (auto saved = self->state.save(*record, record->state, storage::durability::synced);
      !saved.is_ok())
    return make_error(saved);
  return std::move(*record);
}

sandbox_registry_actor::behavior_type registry_behavior(registry_pointer self) {
  return {
    [self](rg_create_atom, schema::sandbox_record record) -> caf::result<schema::sandbox_record> {
      auto existing = storage::sandbox_store(*self->state.store).get(record.id);
      if (!existing)
        return make_error(existing.error());
      if (existing->has_value())
        return std::move(**existing);
      if (auto saved = self->state.save(record, std::nullopt); !saved.is_ok())
        return make_error(saved);
      return record;
    },
    [self](rg_get_atom, const std::string& id,
           const std::string& tenant) -> caf::result<schema::sandbox_record> {
      auto record = self->state.find(id, tenant);
      if (!record)
        return make_error(record.error());
      return std::move(*record);
    },
    [self](rg_list_atom, const sandbox_query& query) -> caf::result<sandbox_page> {
      storage::sandbox_filter filter{query.tenant_id, query.state, query.metadata};
      auto listed =
        storage::sandbox_store(*self->state.store).list(filter, query.limit, query.cursor);
      if (!listed)
        return make_error(listed.error());
      for (auto& record : listed->items)
        self->state.merge_activity(record);
      return sandbox_page{std::move(listed->items), std::move(listed->next_cursor)};
    },
    [self](rg_patch_atom, const std::string& id, const std::string& tenant,
           const sandbox_patch& patch) { return apply_patch(self, id, tenant, patch); },
    [self](rg_save_atom, schema::sandbox_record record) -> caf::result<schema::sandbox_record> {
      if (auto saved = self->state.replace(record); !saved.is_ok())
        return make_error(saved);
      return record;
    },
    [self](rg_verb_atom, const std::string& id, const std::string& tenant,
           sandbox_verb verb) -> caf::result<schema::sandbox_record> {
      auto record = self->state.find(id, tenant);
      if (!record)
        return make_error(record.error());
      if (!verb_allowed(verb, record->state))
        return make_error(errc::wrong_state,
                          "sandbox " + id + " is " + std::string(schema::to_string(record->state))
                            + ", which does not allow this; GET it to see its state");
      return std::move(*record);
    },
    [self](rg_ops_atom, const operation_query& query) -> caf::result<operation_page> {
      storage::operation_filter filter{query.tenant_id, query.target_id, query.state};
      auto listed =
        storage::operation_store(*self->state.store).list(filter, query.limit, query.cursor);
      if (!listed)
        return make_error(listed.error());
      return operation_page{std::move(listed->items), std::move(listed->next_cursor)};
    },
    [self](rg_opkey_atom, const std::string& tenant,
           const std::string& key) -> caf::result<std::string> {
      auto found =
        storage::operation_store(*self->state.store).find_by_idempotency_key(tenant, key);
      if (!found)
        return make_error(found.error());
      return found->value_or(std::string{});
    },
    [self](rg_snapsave_atom,
           schema::snapshot_record record) -> caf::result<schema::snapshot_record> {
      storage::write_batch batch;
      storage::snapshot_store::stage_put(batch, record);
      if (auto written = self->state.store->write(batch, storage::durability::buffered);
          !written.is_ok())
        return make_error(written);
      return record;
    },
    [self](rg_snapget_atom, const std::string& id,
           const std::string& tenant) -> caf::result<schema::snapshot_record> {
      auto found = storage::snapshot_store(*self->state.store).get(id);
      if (!found)
        return make_error(found.error());
      if (!found->has_value() || (!tenant.empty() && (*found)->tenant_id != tenant))
        return make_error(errc::not_found, "no checkpoint " + id);
      return std::move(**found);
    },
    [self](rg_snaplist_atom, const std::string& sandbox_id,
           const std::string& tenant) -> caf::result<std::vector<schema::snapshot_record>> {
      auto listed = storage::snapshot_store(*self->state.store)
                      .list_of(sandbox_id, tenant, snapshots_listed_max, {});
      if (!listed)
        return make_error(listed.error());
      return std::move(listed->items);
    },
    [self](rg_snapdel_atom, const std::string& id) -> caf::result<bool> {
      storage::write_batch batch;
      storage::snapshot_store::stage_erase(batch, id);
      if (auto written = self->state.store->write(batch, storage::durability::synced);
          !written.is_ok())
        return make_error(written);
      return true;
    },
    [self](rg_touch_atom, const std::string& id) {
      self->state.touch(id, self->state.clock->now_ms());
    },
    [self](rg_touch_atom, const std::string& id, int64_t at_ms) {
      self->state.touch(id, std::min(at_ms, self->state.clock->now_ms()));
    },
    [self](rg_tget_atom, const std::string& name,
           const std::string& tenant) -> caf::result<schema::template_record> {
      auto found = get_template(*self->state.store, name, tenant);
      if (!found)
        return make_error(found.error());
      return std::move(*found);
    },
    [self](rg_tlist_atom,
           const std::string& tenant) -> caf::result<std::vector<schema::template_record>> {
      auto listed = list_templates(*self->state.store, tenant, templates_listed_max);
      if (!listed)
        return make_error(listed.error());
      return std::move(*listed);
    },
    [self](rg_tnew_atom, const std::string& name, const std::string& tenant,
           schema::template_version& draft) -> caf::result<schema::template_record> {
      if (!is_valid_template_name(name))
        return make_error(errc::invalid_argument,
                          "template name \"" + name
                            + "\" is not 1 to 63 of [a-z0-9-] starting with a letter or digit");
      auto added = add_template_version(*self->state.store, name, tenant, std::move(draft),
                                        self->state.clock->now_ms());
      if (!added)
        return make_error(added.error());
      return std::move(*added);
    },
    [self](rg_tsave_atom, const std::string& name,
           const schema::template_version& version) -> caf::result<schema::template_record> {
      auto saved =
        save_template_version(*self->state.store, name, version, self->state.clock->now_ms());
      if (!saved)
        return make_error(saved.error());
      return std::move(*saved);
    },
    [self](rg_tusers_atom, const std::string& name,
           uint32_t version) -> caf::result<std::vector<std::string>> {
      auto users = template_users(*self->state.store, name, version, template_users_max);
      if (!users)
        return make_error(users.error());
      return std::move(*users);
    },
    [self](rg_tforget_atom, const std::string& name, uint32_t version) -> caf::result<bool> {
      if (auto forgotten =
            forget_template_version(*self->state.store, name, version, self->state.clock->now_ms());
          !forgotten)
        return make_error(forgotten);
      return true;
    },
    [self](rg_tpool_atom, const std::string& name, const std::string& tenant,
           const schema::pool_settings& pool) -> caf::result<schema::template_record> {
      auto set =
        set_template_pool(*self->state.store, name, tenant, pool, self->state.clock->now_ms());
      if (!set)
        return make_error(set.error());
      return std::move(*set);
    },
    [self](rg_claim_atom, schema::sandbox_record claim) -> caf::result<schema::sandbox_record> {
      auto stored = storage::sandbox_store(*self->state.store).get(claim.id);
      if (!stored)
        return make_error(stored.error());
      const bool present = stored->has_value();
      if (present && (*stored)->tenant_id == claim.tenant_id && (*stored)->spec.from_pool)
        return std::move(**stored); // this claim, stored already
      if (!present || (*stored)->tenant_id != pool_tenant
          || (*stored)->state != schema::sandbox_state::running
          || (*stored)->worker_id != claim.worker_id)
        return make_error(errc::wrong_state,
                          "warm pool member " + claim.id + " is no longer there to claim");
      claim.data_url = (*stored)->data_url;
      if (auto saved = self->state.save(claim, (*stored)->state); !saved.is_ok())
        return make_error(saved);
      return claim;
    },
    [self](rg_attach_atom, const std::string& id, int32_t delta) {
      auto& open = self->state.attached;
      if (delta > 0) {
        open[id] += static_cast<uint32_t>(delta);
        return;
      }
      auto it = open.find(id);
      if (it == open.end())
        return;
      const auto closing = static_cast<uint32_t>(-delta);
      if (it->second <= closing)
        open.erase(it);
      else
        it->second -= closing;
      // The stream's end is the last activity it brings.
      self->state.active[id] = std::max(self->state.active[id], self->state.clock->now_ms());
    },
    [self](rg_count_atom) -> caf::result<std::map<std::string, uint64_t>> {
      auto& state = self->state;
      if (!state.counts) {
        auto counted = count_by_state(*state.store);
        if (!counted)
          return make_error(counted.error());
        state.counts = std::move(*counted);
      }
      std::map<std::string, uint64_t> by_name;
      for (const auto& [sandbox_state, count] : *state.counts)
        by_name.emplace(schema::to_string(sandbox_state), count);
      return by_name;
    },
  };
}

} // namespace

sandbox_registry_actor spawn_sandbox_registry(caf::actor_system& system, storage::kv_store& store,
                                              const wall_clock& clock) {
  // Counted here, on the caller's thread, while `store` is known to live: the
  // actor's own start may run after its owner has already let the store go.
  // A failed count is retried by the first rg_count; saves until then are
  // covered by that count.
  std::optional<state_counts> counts;
  if (auto counted = count_by_state(store))
    counts = std::move(*counted);
  // The built-in templates are records like any other, and an upload the
  // last stop cut short is failed; a failure here shows again, with its
  // reason, on the first template call.
  (void)seed_builtin_templates(store, clock.now_ms());
  (void)fail_interrupted_uploads(store, clock.now_ms());
  return system.spawn([&store, &clock, counts = std::move(counts)](registry_pointer self) mutable {
    self->state.store = &store;
    self->state.clock = &clock;
    self->state.counts = std::move(counts);
    return registry_behavior(self);
  });
}

} // namespace airlock::actors
