#include "schema/auth.hpp"

#include "schema/auth.capnp.h"
#include "schema/capnp_codec.hpp"

namespace airlock::schema {

namespace cs = airlock::capnp_schema;

std::string encode(const api_key_record& r) {
  return detail::to_bytes<cs::ApiKeyRecord>([&r](cs::ApiKeyRecord::Builder b) {
    b.setSchemaVersion(api_key_schema_version);
    b.setKeyId(r.key_id);
    b.setTenantId(r.tenant_id);
    b.setSecretSha256(detail::as_data(r.secret_sha256));
    b.setRole(static_cast<cs::ApiKeyRole>(r.role));
    b.setCreatedAtMs(r.created_at_ms);
    b.setRevoked(r.revoked);
  });
}

result<api_key_record> decode_api_key(std::string_view bytes) {
  return detail::from_bytes<cs::ApiKeyRecord, api_key_record>(
    bytes, api_key_schema_version, "api key",
    [](cs::ApiKeyRecord::Reader b) -> result<api_key_record> {
      if (!detail::enum_in_range(b.getRole(), cs::ApiKeyRole::ADMIN))
        return detail::enum_too_new("api key");
      api_key_record r;
      r.key_id = detail::text(b.getKeyId());
      r.tenant_id = detail::text(b.getTenantId());
      r.secret_sha256 = detail::data(b.getSecretSha256());
      r.role = static_cast<api_key_role>(b.getRole());
      r.created_at_ms = b.getCreatedAtMs();
      r.revoked = b.getRevoked();
      return r;
    });
}

} // namespace airlock::schema
