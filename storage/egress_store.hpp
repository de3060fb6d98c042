#pragma once
// Typed access to the egress control's records: credentials (sealed
// secrets, keyspace "credentials") and audit records (keyspace "audit").

#include <atomic>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "schema/egress.hpp"
#include "storage/kv_store.hpp"
#include "storage/operation_store.hpp"

namespace airlock::storage {

/// Credentials by id (cred_..., sorting by creation time). Listing by tenant
/// scans every credential: they are few (an operator's list, not traffic).
class credential_store {
public:
  explicit credential_store(kv_store& store) : store_(store) {}

  result<std::optional<schema::credential_record>> get(std::string_view id) const;
  /// Synced: a 201 is answered only once the credential is durable.
  status put(const schema::credential_record& record);
  /// Synced. Idempotent: ok for an unknown id.
  status erase(std::string_view id);
  /// Credentials of `tenant_id` (empty: every tenant) in creation order.
  result<page<schema::credential_record>> list(std::string_view tenant_id, size_t limit,
                                               std::string_view cursor) const;

private:
  kv_store& store_;
};

/// Audit records keyed by (big-endian at_ms, big-endian sequence), so a scan
/// is in time order and a time bound is a key bound. Thread-safe.
class audit_store {
public:
  /// `sequence_seed` starts the per-key sequence; seed it above any earlier
  /// run's (e.g. from the start time) so keys of the same millisecond never
  /// collide across restarts.
  audit_store(kv_store& store, uint64_t sequence_seed) : store_(store), sequence_(sequence_seed) {}

  /// Appends `records` in one atomic write, buffered (not synced): audit is
  /// not worth an fsync per connection; the next synced write or a clean
  /// shutdown persists it.
  status append(std::span<const schema::audit_record> records);
  /// Matching records in time order, at most `limit`; next_cursor is empty
  /// at the end. Errors: invalid_argument (limit 0, bad cursor).
  result<page<schema::audit_record>> query(const schema::audit_query& query) const;
  /// Deletes at most `max_records` records older than `cutoff_ms` (oldest
  /// first) and returns how many it deleted; call again while it returns
  /// max_records.
  result<uint64_t> delete_older_than(int64_t cutoff_ms, size_t max_records = 10'000);

  /// The key of a record (exposed for tests and docs).
  static std::string key_of(int64_t at_ms, uint64_t sequence);

private:
  kv_store& store_;
  std::atomic<uint64_t> sequence_;
};

} // namespace airlock::storage
