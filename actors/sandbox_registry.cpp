#include "actors/sandbox_registry.hpp"

#include <caf/actor_system.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <openssl/crypto.h>

#include <cctype>

#include "actors/api_keys.hpp"
#include "actors/cluster_protocol.hpp"
#include "actors/errors.hpp"
#include "actors/messages.hpp"
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
  }
  return false;
}

namespace {

caf::error bad_key() {
  return make_error(errc::unauthenticated,
                    "the API key is not valid: send Authorization: Bearer ak_...");
}

struct registry_state {
  static inline const char* name = "sandbox_registry";
  storage::kv_store* store = nullptr;
  const wall_clock* clock = nullptr;

  caf::result<caller_identity> authenticate(const std::string& key) const {
    auto key_id = key_id_of(key);
    if (key_id.empty())
      return bad_key();
    auto found = storage::api_key_store(*store).get(key_id);
    if (!found)
      return make_error(found.error());
    if (!found->has_value() || (*found)->revoked)
      return bad_key();
    const auto& record = **found;
    auto digest = sha256(key);
    if (digest.size() != record.secret_sha256.size() ||
        CRYPTO_memcmp(digest.data(), record.secret_sha256.data(), digest.size()) != 0)
      return bad_key();
    return caller_identity{record.tenant_id, record.role == schema::api_key_role::admin};
  }

  result<schema::sandbox_record> find(const std::string& id, const std::string& tenant) const {
    auto found = storage::sandbox_store(*store).get(id);
    if (!found)
      return found.error();
    if (!found->has_value() || (!tenant.empty() && (*found)->tenant_id != tenant))
      return make_status(errc::not_found, "no sandbox " + id);
    return std::move(**found);
  }

  /// Lifecycle writes (create, save) are followed by a synced operation
  /// transition in the same store before anyone is told of them, and that
  /// sync carries them to disk too (one WAL): they need no sync of their
  /// own. A write answered to a client directly (patch) is synced.
  status save(schema::sandbox_record& record,
              storage::durability mode = storage::durability::buffered) const {
    record.updated_at_ms = clock->now_ms();
    storage::write_batch batch;
    storage::sandbox_store::stage_put(batch, record);
    return store->write(batch, mode);
  }
};

using registry_pointer = sandbox_registry_actor::stateful_pointer<registry_state>;

caf::result<schema::sandbox_record> apply_patch(registry_pointer self, const std::string& id,
                                                const std::string& tenant,
                                                const sandbox_patch& patch) {
  auto record = self->state.find(id, tenant);
  if (!record)
    return make_error(record.error());
  if (record->state == schema::sandbox_state::destroyed ||
      record->state == schema::sandbox_state::destroying)
    return make_error(errc::wrong_state, "sandbox " + id + " is " +
                                           std::string(schema::to_string(record->state)));
  if (patch.metadata)
    record->spec.metadata = *patch.metadata;
  if (patch.egress)
    record->spec.egress = *patch.egress;
  if (patch.idle_timeout_s)
    record->spec.idle_timeout_s = *patch.idle_timeout_s;
  if (auto saved = self->state.save(*record, storage::durability::synced); !saved.is_ok())
    return make_error(saved);
  return std::move(*record);
}

sandbox_registry_actor::behavior_type registry_behavior(registry_pointer self) {
  return {
    [self](rg_auth_atom, const std::string& key) { return self->state.authenticate(key); },
    [self](rg_create_atom,
           schema::sandbox_record record) -> caf::result<schema::sandbox_record> {
      auto existing = storage::sandbox_store(*self->state.store).get(record.id);
      if (!existing)
        return make_error(existing.error());
      if (existing->has_value())
        return std::move(**existing);
      if (auto saved = self->state.save(record); !saved.is_ok())
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
      auto listed = storage::sandbox_store(*self->state.store)
                      .list(filter, query.limit, query.cursor);
      if (!listed)
        return make_error(listed.error());
      return sandbox_page{std::move(listed->items), std::move(listed->next_cursor)};
    },
    [self](rg_patch_atom, const std::string& id, const std::string& tenant,
           const sandbox_patch& patch) { return apply_patch(self, id, tenant, patch); },
    [self](rg_save_atom, schema::sandbox_record record) -> caf::result<schema::sandbox_record> {
      if (auto saved = self->state.save(record); !saved.is_ok())
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
                          "sandbox " + id + " is " +
                            std::string(schema::to_string(record->state)) +
                            ", which does not allow this; GET it to see its state");
      return std::move(*record);
    },
    [self](rg_ops_atom, const operation_query& query) -> caf::result<operation_page> {
      storage::operation_filter filter{query.tenant_id, query.target_id, query.state};
      auto listed = storage::operation_store(*self->state.store)
                      .list(filter, query.limit, query.cursor);
      if (!listed)
        return make_error(listed.error());
      return operation_page{std::move(listed->items), std::move(listed->next_cursor)};
    },
    [self](rg_opkey_atom, const std::string& tenant,
           const std::string& key) -> caf::result<std::string> {
      auto found = storage::operation_store(*self->state.store).find_by_idempotency_key(tenant, key);
      if (!found)
        return make_error(found.error());
      return found->value_or(std::string{});
    },
    [self](rg_newkey_atom, const std::string& tenant) -> caf::result<std::string> {
      bool named = !tenant.empty() && tenant.size() <= 64 && tenant != "admin";
      for (char c : tenant)
        named = named && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-');
      if (!named)
        return make_error(errc::invalid_argument,
                          "tenant_id must be 1..64 of [A-Za-z0-9_-] and not 'admin'");
      auto key = generate_api_key();
      if (!key)
        return make_error(key.error());
      storage::write_batch batch;
      storage::api_key_store::stage_put(
        batch, make_key_record(*key, tenant, schema::api_key_role::tenant,
                               self->state.clock->now_ms()));
      if (auto stored = self->state.store->write(batch, storage::durability::synced);
          !stored.is_ok())
        return make_error(stored);
      return key->text();
    },
    [self](rg_count_atom) -> caf::result<std::map<std::string, uint64_t>> {
      std::map<std::string, uint64_t> counts;
      std::string cursor;
      for (;;) {
        auto listed = storage::sandbox_store(*self->state.store).list({}, 1000, cursor);
        if (!listed)
          return make_error(listed.error());
        for (const auto& record : listed->items)
          ++counts[std::string(schema::to_string(record.state))];
        if (listed->next_cursor.empty())
          return counts;
        cursor = std::move(listed->next_cursor);
      }
    },
  };
}

} // namespace

sandbox_registry_actor spawn_sandbox_registry(caf::actor_system& system, storage::kv_store& store,
                                              const wall_clock& clock) {
  return system.spawn([&store, &clock](registry_pointer self) {
    self->state.store = &store;
    self->state.clock = &clock;
    return registry_behavior(self);
  });
}

} // namespace airlock::actors
