#pragma once
// Typed access to template records; writes are staged into a write_batch.

#include <optional>
#include <string_view>

#include "schema/template_record.hpp"
#include "storage/kv_store.hpp"
#include "storage/operation_store.hpp"

namespace airlock::storage {

class template_store {
public:
  explicit template_store(kv_store& store) : store_(store) {}

  result<std::optional<schema::template_record>> get(std::string_view name) const;
  static void stage_put(write_batch& batch, const schema::template_record& record);
  static void stage_erase(write_batch& batch, std::string_view name);
  /// Templates a tenant sees (its own and the shared ones; every one when
  /// `tenant_id` is empty), in name order after `cursor`.
  result<page<schema::template_record>> list(std::string_view tenant_id, size_t limit,
                                             std::string_view cursor) const;

private:
  kv_store& store_;
};

} // namespace airlock::storage
