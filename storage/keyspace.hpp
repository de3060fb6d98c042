#pragma once
// The keyspaces of airlock's durable state. Each is one RocksDB column family;
// the key layout of each is documented in docs/storage.md.

#include <array>
#include <cstdint>
#include <string_view>

namespace airlock::storage {

enum class keyspace : uint8_t {
  meta,             ///< store-wide facts: format version, cluster id
  operations,       ///< op id -> schema::operation_record
  active_ops,       ///< op id -> "" for every non-terminal operation (recovery index)
  idempotency_keys, ///< tenant '\0' key -> op id
  sandboxes,        ///< sandbox id -> schema::sandbox_record
  api_keys,         ///< key id -> schema::api_key_record
  workers,          ///< worker id -> schema::worker_registration
  credentials,      ///< credential id -> schema::credential_record (secret sealed)
  audit,            ///< big-endian at_ms, big-endian sequence -> schema::audit_record
  snapshots,        ///< snapshot id -> schema::snapshot_record
  templates,        ///< template name -> schema::template_record
  join_tokens,      ///< token id -> schema::join_token_record
  revoked_workers,  ///< worker id -> schema::revoked_worker_record
};

inline constexpr std::array<keyspace, 13> all_keyspaces{
  keyspace::meta,           keyspace::operations, keyspace::active_ops, keyspace::idempotency_keys,
  keyspace::sandboxes,      keyspace::api_keys,   keyspace::workers,    keyspace::credentials,
  keyspace::audit,          keyspace::snapshots,  keyspace::templates,  keyspace::join_tokens,
  keyspace::revoked_workers};

/// Column family name; never rename one (it is the on-disk name).
std::string_view to_string(keyspace space) noexcept;

} // namespace airlock::storage
