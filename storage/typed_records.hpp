#pragma once
// Internal to storage/: the shared mechanics of the typed record stores
// (decode with the record named in errors, paged listing with a filter).

#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "storage/kv_store.hpp"
#include "storage/operation_store.hpp"

namespace airlock::storage::detail {

/// Names the record in a decode failure so an operator can find it.
inline status about_record(std::string_view what, std::string_view id, const status& failure) {
  return make_status(failure.code,
                     std::string(what) + " " + std::string(id) + ": " + failure.message);
}

/// Decodes what a get returned: nullopt when absent.
template <class Record, class Decode>
result<std::optional<Record>> decode_found(std::string_view what, std::string_view id,
                                           const result<std::optional<std::string>>& found,
                                           Decode&& decode) {
  if (!found)
    return found.error();
  if (!found->has_value())
    return std::optional<Record>{};
  auto record = decode(**found);
  if (!record)
    return about_record(what, id, record.error());
  return std::optional<Record>(std::move(*record));
}

template <class Record, class Decode>
result<std::optional<Record>> get_record(const kv_store& store, keyspace space,
                                         std::string_view what, std::string_view id,
                                         Decode&& decode) {
  return decode_found<Record>(what, id, store.get(space, id), std::forward<Decode>(decode));
}

/// Records of `space` in key order after `cursor` that satisfy `keep`, at
/// most `limit`. A record that does not decode fails the whole listing, with
/// its id, rather than hiding it.
template <class Record, class Decode, class Keep>
result<page<Record>> list_records(const kv_store& store, keyspace space, std::string_view what,
                                  Decode&& decode, Keep&& keep, size_t limit,
                                  std::string_view cursor) {
  if (limit == 0)
    return make_status(errc::invalid_argument, "list limit must be at least 1");
  page<Record> out;
  status failure;
  bool more = false;
  auto scanned = store.scan(space, "", cursor, [&](std::string_view key, std::string_view value) {
    auto record = decode(value);
    if (!record) {
      failure = about_record(what, key, record.error());
      return false;
    }
    if (!keep(*record))
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

} // namespace airlock::storage::detail
