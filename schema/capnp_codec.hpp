#pragma once
// Internal to schema/: the one place that turns Cap'n Proto messages into bytes
// and back, catching KJ exceptions at the edge so they never escape as such.

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>

#include <cstring>
#include <string>
#include <string_view>

#include "schema/errc.hpp"

namespace airlock::schema::detail {

/// Bounds on what a decoder will walk: a corrupt record cannot make it loop or
/// allocate without limit.
inline constexpr uint64_t decode_traversal_words_max = 8u * 1024 * 1024;
inline constexpr int decode_nesting_max = 32;

template <class Root, class Fill>
std::string to_bytes(Fill&& fill) {
  capnp::MallocMessageBuilder message;
  fill(message.initRoot<Root>());
  auto words = capnp::messageToFlatArray(message);
  auto bytes = words.asBytes();
  return std::string(reinterpret_cast<const char*>(bytes.begin()), bytes.size());
}

/// Decodes `bytes` as a `Root`, checks its schemaVersion against
/// [1, max_version] and hands the reader to `read`, which returns result<T>.
template <class Root, class T, class Read>
result<T> from_bytes(std::string_view bytes, uint16_t max_version, std::string_view what,
                     Read&& read) {
  if (bytes.empty() || bytes.size() % sizeof(capnp::word) != 0) {
    return make_status(errc::corrupt_record,
                       std::string(what) + " record has an invalid length of "
                         + std::to_string(bytes.size()) + " bytes");
  }
  // Copy into word-aligned memory: RocksDB values carry no alignment promise.
  auto words = kj::heapArray<capnp::word>(bytes.size() / sizeof(capnp::word));
  std::memcpy(words.begin(), bytes.data(), bytes.size());
  try {
    capnp::ReaderOptions options;
    options.traversalLimitInWords = decode_traversal_words_max;
    options.nestingLimit = decode_nesting_max;
    capnp::FlatArrayMessageReader message(words.asPtr(), options);
    auto root = message.getRoot<Root>();
    auto version = root.getSchemaVersion();
    if (version == 0) {
      return make_status(errc::corrupt_record,
                         std::string(what) + " record has no schema version");
    }
    if (version > max_version) {
      return make_status(errc::unsupported_version,
                         std::string(what) + " record has schema version "
                           + std::to_string(version) + " but this airlock reads up to "
                           + std::to_string(max_version) + "; upgrade airlock");
    }
    return read(root);
  } catch (const kj::Exception& e) {
    return make_status(errc::corrupt_record, std::string(what) + " record does not decode: "
                                               + e.getDescription().cStr());
  }
}

/// Cap'n Proto returns an out-of-range enumerant as is; callers treat it as
/// a record from a newer writer.
template <class Enum>
bool enum_in_range(Enum value, Enum last) {
  return static_cast<uint16_t>(value) <= static_cast<uint16_t>(last);
}

inline std::string text(capnp::Text::Reader reader) {
  return std::string(reader.cStr(), reader.size());
}

inline std::string data(capnp::Data::Reader reader) {
  return std::string(reinterpret_cast<const char*>(reader.begin()), reader.size());
}

inline capnp::Data::Reader as_data(const std::string& bytes) {
  return capnp::Data::Reader(reinterpret_cast<const kj::byte*>(bytes.data()), bytes.size());
}

inline status enum_too_new(std::string_view what) {
  return make_status(errc::unsupported_version,
                     std::string(what) + " record uses an enum value this airlock does not "
                                         "know; upgrade airlock");
}

} // namespace airlock::schema::detail
