#pragma once
// The first admin API key: created on the first start of an empty data
// directory, shown once, stored only as a hash.
//
// Key format: "ak_" + key id (16 hex digits, the lookup id) + "_" + secret
// (64 hex digits, 32 random bytes). The record stores SHA-256 of the whole key.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "schema/auth.hpp"
#include "schema/errc.hpp"
#include "storage/kv_store.hpp"

namespace airlock::airlockd {

struct api_key {
  std::string key_id;     ///< 16 hex digits
  std::string secret_hex; ///< 64 hex digits

  /// The text a client sends: ak_<key_id>_<secret_hex>.
  std::string text() const { return "ak_" + key_id + "_" + secret_hex; }
};

/// A fresh key from OpenSSL's CSPRNG; internal if the CSPRNG fails.
result<api_key> generate_api_key();

/// SHA-256 of `text` (32 raw bytes), through OpenSSL EVP.
std::string sha256(std::string_view text);

/// The stored record of an admin key for tenant "admin".
schema::api_key_record make_admin_record(const api_key& key, int64_t created_at_ms);

/// Writes {"url": URL, "api_key": KEY} to `path` with mode 0600, creating
/// missing parent directories with mode 0700 and keeping the other keys of an
/// existing JSON object there. Atomic: a reader sees the old or the new file.
status write_cli_config(const std::string& path, std::string_view url, std::string_view key);

/// On a store without any API key: creates an admin key, writes the CLI config
/// (first, so a key is never stored that nobody was told), stores its record
/// with a synced write and returns the key's text. nullopt when the store has
/// a key already: later starts create nothing.
result<std::optional<std::string>> bootstrap_admin_key(storage::kv_store& store,
                                                       const std::string& cli_config_path,
                                                       std::string_view url, int64_t now_ms);

} // namespace airlock::airlockd
