#include "actors/api_key_actor.hpp"

#include <caf/actor_system.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <openssl/crypto.h>

#include <cctype>

#include "actors/api_keys.hpp"
#include "actors/errors.hpp"
#include "storage/sandbox_store.hpp"
#include "storage/write_batch.hpp"

namespace airlock::actors {

namespace {

caf::error bad_key() {
  return make_error(errc::unauthenticated,
                    "the API key is not valid: send Authorization: Bearer ak_...");
}

struct api_key_state {
  static inline const char* name = "api_keys";
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
    if (digest.size() != record.secret_sha256.size()
        || CRYPTO_memcmp(digest.data(), record.secret_sha256.data(), digest.size()) != 0)
      return bad_key();
    return caller_identity{record.tenant_id, record.role == schema::api_key_role::admin};
  }

  caf::result<std::string> create_tenant_key(const std::string& tenant) const {
    // A leading '_' is the platform's own (pool_tenant).
    bool named = !tenant.empty() && tenant.size() <= 64 && tenant != "admin" && tenant[0] != '_';
    for (char c : tenant)
      named = named && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-');
    if (!named)
      return make_error(
        errc::invalid_argument,
        "tenant_id must be 1..64 of [A-Za-z0-9_-], not starting with '_', and not 'admin'");
    auto key = generate_api_key();
    if (!key)
      return make_error(key.error());
    storage::write_batch batch;
    storage::api_key_store::stage_put(
      batch, make_key_record(*key, tenant, schema::api_key_role::tenant, clock->now_ms()));
    if (auto stored = store->write(batch, storage::durability::synced); !stored.is_ok())
      return make_error(stored);
    return key->text();
  }
};

using api_key_pointer = api_key_actor::stateful_pointer<api_key_state>;

} // namespace

api_key_actor spawn_api_key_actor(caf::actor_system& system, storage::kv_store& store,
                                  const wall_clock& clock) {
  return system.spawn([&store, &clock](api_key_pointer self) -> api_key_actor::behavior_type {
    self->state.store = &store;
    self->state.clock = &clock;
    return {
      [self](key_auth_atom, const std::string& key) { return self->state.authenticate(key); },
      [self](key_create_atom, const std::string& tenant) {
        return self->state.create_tenant_key(tenant);
      },
    };
  });
}

} // namespace airlock::actors
