#pragma once
// API keys: generated here, stored only as a SHA-256 hash.
//
// Key format: "ak_" + key id (16 hex digits, the lookup id) + "_" + secret
// (64 hex digits, 32 random bytes). The record stores SHA-256 of the whole key.

#include <cstdint>
#include <string>
#include <string_view>

#include "schema/auth.hpp"
#include "schema/errc.hpp"

namespace airlock::actors {

struct api_key {
  std::string key_id;     ///< 16 hex digits
  std::string secret_hex; ///< 64 hex digits

  /// The text a client sends: ak_<key_id>_<secret_hex>.
  std::string text() const { return "ak_" + key_id + "_" + secret_hex; }
};

/// A fresh key from OpenSSL's CSPRNG; internal if the CSPRNG fails.
result<api_key> generate_api_key();

/// `bytes` random bytes from OpenSSL's CSPRNG as lower-case hex (at most 64
/// bytes); internal if the CSPRNG fails.
result<std::string> random_hex(size_t bytes);

/// SHA-256 of `text` (32 raw bytes), through OpenSSL EVP.
std::string sha256(std::string_view text);

/// The stored record of `key` for `tenant_id`.
schema::api_key_record make_key_record(const api_key& key, std::string tenant_id,
                                       schema::api_key_role role, int64_t created_at_ms);

/// The key id of a well-formed key text; empty when `text` is not one.
std::string_view key_id_of(std::string_view text) noexcept;

} // namespace airlock::actors
