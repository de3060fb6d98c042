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

std::string encode(const join_token_record& r) {
  return detail::to_bytes<cs::JoinTokenRecord>([&r](cs::JoinTokenRecord::Builder b) {
    b.setSchemaVersion(join_token_schema_version);
    b.setTokenId(r.token_id);
    b.setMacKey(detail::as_data(r.mac_key));
    b.setName(r.name);
    b.setCreatedAtMs(r.created_at_ms);
    b.setExpiresAtMs(r.expires_at_ms);
    b.setUsedAtMs(r.used_at_ms);
    b.setUsedBy(r.used_by);
  });
}

result<join_token_record> decode_join_token(std::string_view bytes) {
  return detail::from_bytes<cs::JoinTokenRecord, join_token_record>(
    bytes, join_token_schema_version, "join token",
    [](cs::JoinTokenRecord::Reader b) -> result<join_token_record> {
      join_token_record r;
      r.token_id = detail::text(b.getTokenId());
      r.mac_key = detail::data(b.getMacKey());
      r.name = detail::text(b.getName());
      r.created_at_ms = b.getCreatedAtMs();
      r.expires_at_ms = b.getExpiresAtMs();
      r.used_at_ms = b.getUsedAtMs();
      r.used_by = detail::text(b.getUsedBy());
      return r;
    });
}

std::string encode(const revoked_worker_record& r) {
  return detail::to_bytes<cs::RevokedWorker>([&r](cs::RevokedWorker::Builder b) {
    b.setSchemaVersion(revoked_worker_schema_version);
    b.setWorkerId(r.worker_id);
    b.setRevokedAtMs(r.revoked_at_ms);
  });
}

result<revoked_worker_record> decode_revoked_worker(std::string_view bytes) {
  return detail::from_bytes<cs::RevokedWorker, revoked_worker_record>(
    bytes, revoked_worker_schema_version, "revoked worker",
    [](cs::RevokedWorker::Reader b) -> result<revoked_worker_record> {
      revoked_worker_record r;
      r.worker_id = detail::text(b.getWorkerId());
      r.revoked_at_ms = b.getRevokedAtMs();
      return r;
    });
}

} // namespace airlock::schema
