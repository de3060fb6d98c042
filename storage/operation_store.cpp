#include "storage/operation_store.hpp"

#include "storage/typed_records.hpp"

#include <utility>

namespace airlock::storage {

namespace {

bool matches(const operation_filter& filter, const schema::operation_record& record) {
  return (filter.tenant_id.empty() || record.tenant_id == filter.tenant_id)
         && (filter.target_id.empty() || record.target_id == filter.target_id)
         && (!filter.state || record.state == *filter.state);
}

/// Ids in the active index, collected before any record is read so that no
/// read happens inside a scan visitor.
result<std::vector<std::string>> active_ids(const kv_snapshot& view) {
  std::vector<std::string> ids;
  auto scanned = view.scan(keyspace::active_ops, "", "",
                           [&ids](std::string_view key, std::string_view /*value*/) {
                             ids.emplace_back(key);
                             return true;
                           });
  if (!scanned)
    return scanned;
  return ids;
}

} // namespace

result<std::optional<schema::operation_record>> operation_store::get(std::string_view id) const {
  return detail::get_record<schema::operation_record>(store_, keyspace::operations, "operation", id,
                                                      schema::decode_operation);
}

void operation_store::stage_put(write_batch& batch, const schema::operation_record& record) {
  batch.put(keyspace::operations, record.id, schema::encode(record));
  // The active index is what recovery reads: it must change in the same
  // batch as the state, never after it.
  if (schema::is_terminal(record.state))
    batch.erase(keyspace::active_ops, record.id);
  else
    batch.put(keyspace::active_ops, record.id, "");
  // Re-putting the same mapping on every transition is harmless and saves a
  // read to learn whether this is the first write.
  if (!record.idempotency_key.empty())
    batch.put(keyspace::idempotency_keys,
              idempotency_index_key(record.tenant_id, record.idempotency_key), record.id);
}

result<std::optional<std::string>>
operation_store::find_by_idempotency_key(std::string_view tenant_id, std::string_view key) const {
  return store_.get(keyspace::idempotency_keys, idempotency_index_key(tenant_id, key));
}

result<std::vector<schema::operation_record>> operation_store::load_active(
  const std::function<void(std::string_view id, const status&)>& on_bad) const {
  // One snapshot: the index and the records agree even while transitions run.
  const auto view = store_.snapshot();
  auto ids = active_ids(*view);
  if (!ids)
    return ids.error();
  std::vector<schema::operation_record> records;
  for (const auto& id : *ids) {
    auto found = view->get(keyspace::operations, id);
    if (!found)
      return found.error(); // the store failed: recovery cannot go on
    if (!found->has_value()) {
      if (on_bad)
        on_bad(id, make_status(errc::not_found,
                               "operation " + id + " is in the active index but has no record"));
      continue;
    }
    auto record = schema::decode_operation(**found);
    if (!record) {
      if (on_bad)
        on_bad(id, detail::about_record("operation", id, record.error()));
      continue;
    }
    records.push_back(std::move(*record));
  }
  return records;
}

result<page<schema::operation_record>>
operation_store::list(const operation_filter& filter, size_t limit, std::string_view cursor) const {
  return detail::list_records<schema::operation_record>(
    store_, keyspace::operations, "operation", schema::decode_operation,
    [&filter](const schema::operation_record& record) { return matches(filter, record); }, limit,
    cursor);
}

std::string operation_store::idempotency_index_key(std::string_view tenant_id,
                                                   std::string_view key) {
  // Tenant ids are printable, so the '\0' separator keeps (tenant, key)
  // pairs from colliding and groups a tenant's keys under one prefix.
  std::string index_key;
  index_key.reserve(tenant_id.size() + 1 + key.size());
  index_key.append(tenant_id);
  index_key.push_back('\0');
  index_key.append(key);
  return index_key;
}

} // namespace airlock::storage
