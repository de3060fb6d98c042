#include "storage/sandbox_store.hpp"

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

/// Names the record in a decode failure so an operator can find it.
status about_record(std::string_view what, std::string_view id, const status& failure) {
  return make_status(failure.code,
                     std::string(what) + " " + std::string(id) + ": " + failure.message);
}

/// Looks `id` up in `space` and decodes it with `decode`.
template <class Record, class Decode>
result<std::optional<Record>> get_record(const kv_store& store, keyspace space,
                                         std::string_view what, std::string_view id,
                                         Decode&& decode) {
  auto found = store.get(space, id);
  if (!found)
    return found.error();
  if (!found->has_value())
    return std::optional<Record>{};
  auto record = decode(**found);
  if (!record)
    return about_record(what, id, record.error());
  return std::optional<Record>(std::move(*record));
}

} // namespace

result<std::optional<schema::sandbox_record>> sandbox_store::get(std::string_view id) const {
  return get_record<schema::sandbox_record>(store_, keyspace::sandboxes, "sandbox", id,
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
  if (limit == 0)
    return make_status(errc::invalid_argument, "list limit must be at least 1");
  page<schema::sandbox_record> out;
  status failure;
  bool more = false;
  auto scanned =
    store_.scan(keyspace::sandboxes, "", cursor, [&](std::string_view key, std::string_view value) {
      auto record = schema::decode_sandbox(value);
      if (!record) {
        failure = about_record("sandbox", key, record.error());
        return false;
      }
      if (!matches(filter, *record))
        return true;
      if (out.items.size() == limit) {
        more = true; // one match beyond the page: there is a next page
        return false;
      }
      out.items.push_back(std::move(*record));
      out.next_cursor = key;
      return true;
    });
  if (!scanned)
    return scanned;
  if (!failure)
    return failure;
  if (!more)
    out.next_cursor.clear();
  return out;
}

result<std::optional<schema::api_key_record>> api_key_store::get(std::string_view key_id) const {
  return get_record<schema::api_key_record>(store_, keyspace::api_keys, "api key", key_id,
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
