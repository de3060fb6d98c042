#include "storage/egress_store.hpp"

#include <algorithm>

#include "schema/hex.hpp"
#include "storage/typed_records.hpp"

namespace airlock::storage {

namespace {

void put_be64(std::string& out, uint64_t value) {
  for (int shift = 56; shift >= 0; shift -= 8)
    out.push_back(static_cast<char>((value >> shift) & 0xff));
}

uint64_t get_be64(std::string_view bytes) {
  uint64_t value = 0;
  for (size_t i = 0; i < 8; ++i)
    value = (value << 8) | static_cast<unsigned char>(bytes[i]);
  return value;
}

std::optional<std::string> from_hex(std::string_view text) {
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9')
      return c - '0';
    if (c >= 'a' && c <= 'f')
      return c - 'a' + 10;
    return -1;
  };
  if (text.size() % 2 != 0)
    return std::nullopt;
  std::string out;
  for (size_t i = 0; i < text.size(); i += 2) {
    int high = nibble(text[i]);
    int low = nibble(text[i + 1]);
    if (high < 0 || low < 0)
      return std::nullopt;
    out.push_back(static_cast<char>(high * 16 + low));
  }
  return out;
}

uint64_t time_part(int64_t at_ms) { return at_ms < 0 ? 0 : static_cast<uint64_t>(at_ms); }

bool matches(const schema::audit_query& q, const schema::audit_record& r) {
  return (q.tenant_id.empty() || r.tenant_id == q.tenant_id)
         && (q.sandbox_id.empty() || r.sandbox_id == q.sandbox_id)
         && (q.kind.empty() || r.kind == q.kind);
}

/// Where a query's scan starts (exclusive): after the cursor, and never
/// before since_ms (an 8-byte key sorts before every key of that millisecond).
result<std::string> start_after(const schema::audit_query& q) {
  std::string since;
  if (q.since_ms > 0)
    put_be64(since, time_part(q.since_ms));
  if (q.cursor.empty())
    return since;
  auto cursor = from_hex(q.cursor);
  if (!cursor || cursor->size() != 16)
    return make_status(errc::invalid_argument,
                       "the audit cursor is not one this server returned; start again without it");
  return std::max(since, *cursor);
}

} // namespace

result<std::optional<schema::credential_record>> credential_store::get(std::string_view id) const {
  return detail::get_record<schema::credential_record>(store_, keyspace::credentials, "credential",
                                                       id, schema::decode_credential);
}

status credential_store::put(const schema::credential_record& record) {
  return store_.put(keyspace::credentials, record.id, schema::encode(record), durability::synced);
}

status credential_store::erase(std::string_view id) {
  write_batch batch;
  batch.erase(keyspace::credentials, id);
  return store_.write(batch, durability::synced);
}

result<page<schema::credential_record>>
credential_store::list(std::string_view tenant_id, size_t limit, std::string_view cursor) const {
  return detail::list_records<schema::credential_record>(
    store_, keyspace::credentials, "credential", schema::decode_credential,
    [tenant_id](const schema::credential_record& r) {
      return tenant_id.empty() || r.tenant_id == tenant_id;
    },
    limit, cursor);
}

std::string audit_store::key_of(int64_t at_ms, uint64_t sequence) {
  std::string key;
  key.reserve(16);
  put_be64(key, time_part(at_ms));
  put_be64(key, sequence);
  return key;
}

status audit_store::append(std::span<const schema::audit_record> records) {
  if (records.empty())
    return status::ok();
  write_batch batch;
  for (const auto& record : records)
    batch.put(keyspace::audit, key_of(record.at_ms, sequence_.fetch_add(1)),
              schema::encode(record));
  return store_.write(batch, durability::buffered);
}

result<page<schema::audit_record>> audit_store::query(const schema::audit_query& q) const {
  if (q.limit == 0)
    return make_status(errc::invalid_argument, "audit limit must be at least 1");
  auto from = start_after(q);
  if (!from)
    return from.error();
  detail::list_bounds bounds{q.scan_max, [](std::string_view key) { return schema::to_hex(key); }};
  return detail::list_records<schema::audit_record>(
    store_, keyspace::audit, "audit record", schema::decode_audit_record,
    [&q](const schema::audit_record& r) { return matches(q, r); }, q.limit, *from, bounds);
}

result<uint64_t> audit_store::delete_older_than(int64_t cutoff_ms, size_t max_records) {
  write_batch batch;
  uint64_t cutoff = time_part(cutoff_ms);
  auto scanned = store_.scan(keyspace::audit, "", "", [&](std::string_view key, std::string_view) {
    if (key.size() < 8 || get_be64(key) >= cutoff || batch.size() == max_records)
      return false;
    batch.erase(keyspace::audit, key);
    return true;
  });
  if (!scanned)
    return scanned;
  if (batch.empty())
    return uint64_t{0};
  if (auto written = store_.write(batch, durability::buffered); !written)
    return written;
  return static_cast<uint64_t>(batch.size());
}

} // namespace airlock::storage
