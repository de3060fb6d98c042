#include "storage/sandbox_store.hpp"

#include "storage/typed_records.hpp"

#include <utility>

namespace airlock::storage {

namespace {

bool matches(const sandbox_filter& filter, const schema::sandbox_record& record) {
  if (!filter.tenant_id.empty() && record.tenant_id != filter.tenant_id)
    return false;
  if (filter.state && record.state != *filter.state)
    return false;
  const auto& metadata = record.spec.metadata;
  for (const auto& [key, value] : filter.metadata) {
    auto it = metadata.find(key);
    if (it == metadata.end() || it->second != value)
      return false;
  }
  return true;
}

} // namespace

result<std::optional<schema::sandbox_record>> sandbox_store::get(std::string_view id) const {
  return detail::get_record<schema::sandbox_record>(store_, keyspace::sandboxes, "sandbox", id,
                                                    schema::decode_sandbox);
}

void sandbox_store::stage_put(write_batch& batch, const schema::sandbox_record& record) {
  batch.put(keyspace::sandboxes, record.id, schema::encode(record));
}

void sandbox_store::stage_erase(write_batch& batch, std::string_view id) {
  batch.erase(keyspace::sandboxes, id);
}

result<page<schema::sandbox_record>> sandbox_store::list(const sandbox_filter& filter, size_t limit,
                                                         std::string_view cursor) const {
  return detail::list_records<schema::sandbox_record>(
    store_, keyspace::sandboxes, "sandbox", schema::decode_sandbox,
    [&filter](const schema::sandbox_record& record) { return matches(filter, record); }, limit,
    cursor);
}

result<std::optional<schema::snapshot_record>> snapshot_store::get(std::string_view id) const {
  return detail::get_record<schema::snapshot_record>(store_, keyspace::snapshots, "snapshot", id,
                                                     schema::decode_snapshot);
}

void snapshot_store::stage_put(write_batch& batch, const schema::snapshot_record& record) {
  batch.put(keyspace::snapshots, record.id, schema::encode(record));
}

void snapshot_store::stage_erase(write_batch& batch, std::string_view id) {
  batch.erase(keyspace::snapshots, id);
}

result<page<schema::snapshot_record>> snapshot_store::list_of(std::string_view sandbox_id,
                                                              std::string_view tenant_id,
                                                              size_t limit,
                                                              std::string_view cursor) const {
  return detail::list_records<schema::snapshot_record>(
    store_, keyspace::snapshots, "snapshot", schema::decode_snapshot,
    [sandbox_id, tenant_id](const schema::snapshot_record& record) {
      return (sandbox_id.empty() || record.sandbox_id == sandbox_id)
             && (tenant_id.empty() || record.tenant_id == tenant_id);
    },
    limit, cursor);
}

result<std::optional<schema::api_key_record>> api_key_store::get(std::string_view key_id) const {
  return detail::get_record<schema::api_key_record>(store_, keyspace::api_keys, "api key", key_id,
                                                    schema::decode_api_key);
}

void api_key_store::stage_put(write_batch& batch, const schema::api_key_record& record) {
  batch.put(keyspace::api_keys, record.key_id, schema::encode(record));
}

result<bool> api_key_store::any() const {
  bool found = false;
  auto scanned = store_.scan(keyspace::api_keys, "", "",
                             [&found](std::string_view /*key*/, std::string_view /*value*/) {
                               found = true;
                               return false; // one is enough
                             });
  if (!scanned)
    return scanned;
  return found;
}

} // namespace airlock::storage
