#pragma once
// C++ value type for stored API keys (schema/auth.capnp).

#include <cstdint>
#include <string>
#include <string_view>

#include "schema/errc.hpp"

namespace airlock::schema {

inline constexpr uint16_t api_key_schema_version = 1;

enum class api_key_role : uint8_t { tenant, admin };

struct api_key_record {
  std::string key_id;
  std::string tenant_id;
  std::string secret_sha256; ///< 32 raw bytes
  api_key_role role = api_key_role::tenant;
  int64_t created_at_ms = 0;
  bool revoked = false;
  bool operator==(const api_key_record&) const = default;
};

std::string encode(const api_key_record& record);
result<api_key_record> decode_api_key(std::string_view bytes);

inline constexpr uint16_t join_token_schema_version = 1;

/// A worker's single-use join token as stored (schema/auth.capnp).
struct join_token_record {
  std::string token_id;
  std::string mac_key; ///< 32 raw bytes: SHA-256 of the secret
  std::string name;
  int64_t created_at_ms = 0;
  int64_t expires_at_ms = 0;
  int64_t used_at_ms = 0; ///< 0 while unused
  std::string used_by;
  bool operator==(const join_token_record&) const = default;
};

std::string encode(const join_token_record& record);
result<join_token_record> decode_join_token(std::string_view bytes);

inline constexpr uint16_t revoked_worker_schema_version = 1;

/// A removed worker whose certificate is refused (schema/auth.capnp).
struct revoked_worker_record {
  std::string worker_id;
  int64_t revoked_at_ms = 0;
  bool operator==(const revoked_worker_record&) const = default;
};

std::string encode(const revoked_worker_record& record);
result<revoked_worker_record> decode_revoked_worker(std::string_view bytes);

} // namespace airlock::schema
