#pragma once
// The first admin API key: created on the first start of an empty data
// directory, shown once, stored only as a hash.
//
// Key format and generation: actors/api_keys.hpp.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "actors/api_keys.hpp"
#include "schema/auth.hpp"
#include "schema/errc.hpp"
#include "storage/kv_store.hpp"

namespace airlock::airlockd {

using actors::api_key;
using actors::generate_api_key;
using actors::sha256;

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
