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

} // namespace airlock::schema
