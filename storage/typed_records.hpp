#pragma once
// Internal to storage/: the shared mechanics of the typed record stores
// (decode with the record named in errors, paged listing with a filter).

#include <functional>
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

/// How far list_records reads and how it names keys.
template <class KeyText = std::identity>
struct list_bounds {
  /// Keys examined at most before the page ends (0: no bound). A page the
  /// bound cuts short carries the last examined key as its cursor, so that a
  /// sparse filter cannot make one request read the whole keyspace.
  size_t scan_max = 0;
  /// Turns a raw key into the text of a cursor and of an error (the audit
  /// log's binary keys are shown in hex). Default: the key itself.
  KeyText key_text{};
};

/// Records of `space` in key order after `start_after` (a raw key) that
/// satisfy `keep`, at most `limit`. A record that does not decode fails the
/// whole listing, with its key, rather than hiding it.
template <class Record, class Decode, class Keep, class KeyText = std::identity>
result<page<Record>> list_records(const kv_store& store, keyspace space, std::string_view what,
                                  Decode&& decode, Keep&& keep, size_t limit,
                                  std::string_view start_after,
                                  const list_bounds<KeyText>& bounds = {}) {
  if (limit == 0)
    return make_status(errc::invalid_argument, "list limit must be at least 1");
  page<Record> out;
  status failure;
  bool more = false;
  size_t examined = 0;
  std::string last_examined;
  auto visit = [&](std::string_view key, std::string_view value) {
    if (bounds.scan_max != 0 && examined++ == bounds.scan_max) {
      more = true; // bounded: the client continues from the last examined key
      return false;
    }
    last_examined = key;
    auto record = decode(value);
    if (!record) {
      failure = about_record(what, bounds.key_text(key), record.error());
      return false;
    }
    if (!keep(*record))
      return true;
    if (out.items.size() == limit) {
      more = true; // one match beyond the page: there is a next page
      return false;
    }
    out.items.push_back(std::move(*record));
    out.next_cursor = bounds.key_text(key);
    return true;
  };
  if (auto scanned = store.scan(space, "", start_after, visit); !scanned)
    return scanned;
  if (!failure)
    return failure;
  if (!more)
    out.next_cursor.clear();
  else if (out.items.size() < limit)
    out.next_cursor = bounds.key_text(last_examined); // the scan bound ended the page
  return out;
}

} // namespace airlock::storage::detail
