#pragma once
// The one place that turns Cap'n Proto messages into bytes and back, catching
// KJ exceptions at the edge so they never escape as such: schema/'s record
// codecs and the guest protocol (guest/protocol.cpp) both use it. Not part of
// schema's public API.

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "schema/common.capnp.h"
#include "schema/errc.hpp"
#include "schema/worker.hpp"

namespace airlock::schema::detail {

/// Bounds on what a decoder will walk: a corrupt record cannot make it loop or
/// allocate without limit.
inline constexpr uint64_t decode_traversal_words_max = 8u * 1024 * 1024;
inline constexpr int decode_nesting_max = 32;

/// The message as one flat byte string (segment table and segments).
inline std::string flat_bytes(capnp::MessageBuilder& message) {
  auto words = capnp::messageToFlatArray(message);
  auto bytes = words.asBytes();
  return std::string(reinterpret_cast<const char*>(bytes.begin()), bytes.size());
}

template <class Root, class Fill>
std::string to_bytes(Fill&& fill) {
  capnp::MallocMessageBuilder message;
  fill(message.initRoot<Root>());
  return flat_bytes(message);
}

/// What a decoder walks at the most.
struct decode_limits {
  uint64_t traversal_words_max = decode_traversal_words_max;
  int nesting_max = decode_nesting_max;
};

/// Decodes `bytes` (a flat message) as a `Root` within `limits` and hands the
/// reader to `read`, which returns result<T>; whatever `read` touches is
/// checked by Cap'n Proto inside the same guard. `subject` names the bytes in
/// errors ("sandbox record", "host frame"): corrupt_record when the length is
/// not whole words or the message does not decode. Reads in place when
/// `bytes` is word aligned, else from an aligned copy (RocksDB values and
/// frame payloads carry no alignment promise).
template <class Root, class T, class Read>
result<T> read_message(std::string_view bytes, std::string_view subject, decode_limits limits,
                       Read&& read) {
  if (bytes.empty() || bytes.size() % sizeof(capnp::word) != 0)
    return make_status(errc::corrupt_record, std::string(subject) + " has an invalid length of "
                                               + std::to_string(bytes.size()) + " bytes");
  kj::Array<capnp::word> copy;
  auto words = kj::ArrayPtr<const capnp::word>(reinterpret_cast<const capnp::word*>(bytes.data()),
                                               bytes.size() / sizeof(capnp::word));
  if (reinterpret_cast<uintptr_t>(bytes.data()) % alignof(capnp::word) != 0) {
    copy = kj::heapArray<capnp::word>(words.size());
    std::memcpy(copy.begin(), bytes.data(), bytes.size());
    words = copy.asPtr();
  }
  try {
    capnp::ReaderOptions options;
    options.traversalLimitInWords = limits.traversal_words_max;
    options.nestingLimit = limits.nesting_max;
    capnp::FlatArrayMessageReader message(words, options);
    return read(message.getRoot<Root>());
  } catch (const kj::Exception& e) {
    return make_status(errc::corrupt_record,
                       std::string(subject) + " does not decode: " + e.getDescription().cStr());
  }
}

/// Decodes `bytes` as a `Root` record, checks its schemaVersion against
/// [1, max_version] and hands the reader to `read`, which returns result<T>.
template <class Root, class T, class Read>
result<T> from_bytes(std::string_view bytes, uint16_t max_version, std::string_view what,
                     Read&& read) {
  std::string subject = std::string(what) + " record";
  return read_message<Root, T>(
    bytes, subject, {}, [&subject, max_version, &read](typename Root::Reader root) -> result<T> {
      auto version = root.getSchemaVersion();
      if (version == 0)
        return make_status(errc::corrupt_record, subject + " has no schema version");
      if (version > max_version)
        return make_status(errc::unsupported_version,
                           subject + " has schema version " + std::to_string(version)
                             + " but this airlock reads up to " + std::to_string(max_version)
                             + "; upgrade airlock");
      return read(root);
    });
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

inline capnp::Data::Reader as_data(std::string_view bytes) {
  return capnp::Data::Reader(reinterpret_cast<const kj::byte*>(bytes.data()), bytes.size());
}

/// A list length as Cap'n Proto's init functions take it.
inline unsigned count(size_t n) { return static_cast<unsigned>(n); }

/// Fills a text list made by `initX(count(values.size()))`. `as_text` turns
/// a string into what the list takes: by default the string itself, which
/// Cap'n Proto reads up to its first NUL; the guest protocol passes one that
/// keeps every byte.
template <class ListBuilder, class AsText = std::identity>
void fill_texts(ListBuilder list, const std::vector<std::string>& values, AsText as_text = {}) {
  for (unsigned i = 0; i < values.size(); ++i)
    list.set(i, as_text(values[i]));
}

inline std::vector<std::string> read_texts(capnp::List<capnp::Text>::Reader list) {
  std::vector<std::string> out;
  out.reserve(list.size());
  for (auto value : list)
    out.push_back(text(value));
  return out;
}

/// Fills a KeyValue list made by `initX(count(pairs.size()))` from a map or
/// a vector of pairs, in their order; `as_text` as for fill_texts.
template <class Pairs, class AsText = std::identity>
void fill_pairs(capnp::List<capnp_schema::KeyValue>::Builder list, const Pairs& pairs,
                AsText as_text = {}) {
  unsigned i = 0;
  for (const auto& [key, value] : pairs) {
    list[i].setKey(as_text(key));
    list[i].setValue(as_text(value));
    ++i;
  }
}

/// A KeyValue list as a map (a repeated key: the last wins) or a vector of
/// pairs (in order).
template <class Pairs>
Pairs read_pairs(capnp::List<capnp_schema::KeyValue>::Reader list) {
  Pairs out;
  for (auto kv : list) {
    if constexpr (requires { out.insert_or_assign(text(kv.getKey()), text(kv.getValue())); })
      out.insert_or_assign(text(kv.getKey()), text(kv.getValue()));
    else
      out.emplace_back(text(kv.getKey()), text(kv.getValue()));
  }
  return out;
}

/// Resources (common.capnp), shared by the worker and cluster records.
inline void fill_resources(capnp_schema::Resources::Builder b, const resources& r) {
  b.setCpuMillis(r.cpu_millis);
  b.setMemoryMb(r.memory_mb);
  b.setDiskMb(r.disk_mb);
  b.setSandboxes(r.sandboxes);
}

inline resources read_resources(capnp_schema::Resources::Reader b) {
  return resources{b.getCpuMillis(), b.getMemoryMb(), b.getDiskMb(), b.getSandboxes()};
}

inline status enum_too_new(std::string_view what) {
  return make_status(errc::unsupported_version,
                     std::string(what)
                       + " record uses an enum value this airlock does not "
                         "know; upgrade airlock");
}

} // namespace airlock::schema::detail
