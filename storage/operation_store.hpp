#pragma once
// Typed access to operation records. Reads go straight to the store; writes
// are staged into a write_batch so that a transition (record, active index,
// idempotency key) is one atomic, journaled write.

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "schema/operation.hpp"
#include "schema/page.hpp"
#include "storage/kv_store.hpp"

namespace airlock::storage {

struct operation_filter {
  std::string tenant_id;                        ///< empty: any tenant
  std::string target_id;                        ///< empty: any target
  std::optional<schema::operation_state> state; ///< nullopt: any state
};

/// The stores' pages are schema's (schema/page.hpp), which messages carry.
using schema::page;

class operation_store {
public:
  /// `store` must outlive this object. Thread-safe like kv_store.
  explicit operation_store(kv_store& store) : store_(store) {}

  /// nullopt when no such operation; corrupt_record / unsupported_version for
  /// bad bytes.
  result<std::optional<schema::operation_record>> get(std::string_view id) const;

  /// Stages the record, keeps the active index in step with its state and, on
  /// first write with an idempotency key, the key -> id mapping.
  static void stage_put(write_batch& batch, const schema::operation_record& record);

  /// The operation id first created for (tenant, key), if any.
  result<std::optional<std::string>> find_by_idempotency_key(std::string_view tenant_id,
                                                             std::string_view key) const;

  /// Every non-terminal operation (for recovery after a restart). Records that
  /// fail to decode are reported through `on_bad` and skipped.
  result<std::vector<schema::operation_record>>
  load_active(const std::function<void(std::string_view id, const status&)>& on_bad = {}) const;

  /// Operations in id order (ids sort by creation time), `limit` at most,
  /// after `cursor` (a previous page's next_cursor).
  result<page<schema::operation_record>> list(const operation_filter& filter, size_t limit,
                                              std::string_view cursor) const;

  /// Key layout: the idempotency keyspace key for (tenant, key).
  static std::string idempotency_index_key(std::string_view tenant_id, std::string_view key);

private:
  kv_store& store_;
};

} // namespace airlock::storage
