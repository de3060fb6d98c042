#pragma once
// Typed access to sandbox records; writes are staged into a write_batch.

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "schema/auth.hpp"
#include "schema/sandbox.hpp"
#include "storage/kv_store.hpp"
#include "storage/operation_store.hpp"

namespace airlock::storage {

struct sandbox_filter {
  std::string tenant_id;                       ///< empty: any tenant
  std::optional<schema::sandbox_state> state;  ///< nullopt: any state
  std::map<std::string, std::string> metadata; ///< every pair must match
};

class sandbox_store {
public:
  explicit sandbox_store(kv_store& store) : store_(store) {}

  result<std::optional<schema::sandbox_record>> get(std::string_view id) const;
  static void stage_put(write_batch& batch, const schema::sandbox_record& record);
  static void stage_erase(write_batch& batch, std::string_view id);
  result<page<schema::sandbox_record>> list(const sandbox_filter& filter, size_t limit,
                                            std::string_view cursor) const;

private:
  kv_store& store_;
};

/// Typed access to snapshot records (checkpoints and suspend snapshots).
class snapshot_store {
public:
  explicit snapshot_store(kv_store& store) : store_(store) {}

  result<std::optional<schema::snapshot_record>> get(std::string_view id) const;
  static void stage_put(write_batch& batch, const schema::snapshot_record& record);
  static void stage_erase(write_batch& batch, std::string_view id);
  /// A sandbox's snapshots (every sandbox's when `sandbox_id` is empty) of
  /// tenant `tenant_id` (any when empty), oldest id first: a scan of the
  /// keyspace, bounded by `limit`.
  result<page<schema::snapshot_record>> list_of(std::string_view sandbox_id,
                                                std::string_view tenant_id, size_t limit,
                                                std::string_view cursor) const;

private:
  kv_store& store_;
};

/// Typed access to hashed API keys.
class api_key_store {
public:
  explicit api_key_store(kv_store& store) : store_(store) {}

  result<std::optional<schema::api_key_record>> get(std::string_view key_id) const;
  static void stage_put(write_batch& batch, const schema::api_key_record& record);
  /// True when at least one key exists (first-start detection).
  result<bool> any() const;

private:
  kv_store& store_;
};

} // namespace airlock::storage
