// The in-memory kv_store for unit tests and the simulator: one ordered map per
// keyspace under one mutex. Same contract as the RocksDB store, minus disk.

#include <algorithm>
#include <array>
#include <exception>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "storage/kv_store.hpp"

namespace airlock::storage {

namespace {

// std::less<> compares like memcmp (char_traits<char> orders bytes as
// unsigned), which is RocksDB's bytewise order: scans agree across stores.
using space_map = std::map<std::string, std::string, std::less<>>;
using space_maps = std::array<space_map, all_keyspaces.size()>;

/// A live scan copies at most this many entries under the lock, then visits
/// them without it, so a visitor may call back into the store.
constexpr size_t scan_chunk_entries = 64;

space_map& map_of(space_maps& maps, keyspace space) { return maps.at(static_cast<size_t>(space)); }
const space_map& map_of(const space_maps& maps, keyspace space) {
  return maps.at(static_cast<size_t>(space));
}

/// First entry with `prefix` that sorts strictly after `start_after`, or end.
space_map::const_iterator first_after(const space_map& map, std::string_view prefix,
                                      std::string_view start_after) {
  auto it = map.lower_bound(std::max(prefix, start_after));
  if (!start_after.empty() && it != map.end() && it->first == start_after)
    ++it;
  if (it != map.end() && !it->first.starts_with(prefix))
    return map.end();
  return it;
}

std::optional<std::string> find(const space_map& map, std::string_view key) {
  auto it = map.find(key);
  if (it == map.end())
    return std::nullopt;
  return it->second;
}

/// A full copy taken at snapshot() time: simple, and fine at test sizes.
class memory_snapshot final : public kv_snapshot {
public:
  explicit memory_snapshot(space_maps maps) : maps_(std::move(maps)) {}

  result<std::optional<std::string>> get(keyspace space, std::string_view key) const override {
    return find(map_of(maps_, space), key);
  }

  status scan(keyspace space, std::string_view prefix, std::string_view start_after,
              const scan_visitor& visit) const override {
    const auto& map = map_of(maps_, space);
    try {
      for (auto it = first_after(map, prefix, start_after);
           it != map.end() && it->first.starts_with(prefix); ++it) {
        if (!visit(it->first, it->second))
          break;
      }
    } catch (const std::exception& e) {
      return make_status(errc::internal, std::string("memory snapshot scan threw: ") + e.what());
    }
    return status::ok();
  }

private:
  space_maps maps_;
};

class memory_store final : public kv_store {
public:
  result<std::optional<std::string>> get(keyspace space, std::string_view key) const override {
    std::lock_guard lock(mutex_);
    return find(map_of(maps_, space), key);
  }

  status put(keyspace space, std::string_view key, std::string_view value,
             durability /*mode*/) override {
    std::lock_guard lock(mutex_);
    map_of(maps_, space).insert_or_assign(std::string(key), std::string(value));
    return status::ok();
  }

  status write(const write_batch& batch, durability /*mode*/) override {
    // One lock for the whole batch: readers see all of it or none of it.
    std::lock_guard lock(mutex_);
    for (const auto& op : batch.ops()) {
      auto& map = map_of(maps_, op.space);
      if (op.value)
        map.insert_or_assign(op.key, *op.value);
      else if (auto it = map.find(op.key); it != map.end())
        map.erase(it);
    }
    return status::ok();
  }

  /// Not a point-in-time view (take a snapshot() for that): entries written
  /// between chunks after the scan position are seen.
  status scan(keyspace space, std::string_view prefix, std::string_view start_after,
              const scan_visitor& visit) const override {
    // The visitor is caller code: like the RocksDB store, let no exception out.
    try {
      return scan_chunks(space, prefix, start_after, visit);
    } catch (const std::exception& e) {
      return make_status(errc::internal, std::string("memory store scan threw: ") + e.what());
    }
  }

  std::unique_ptr<kv_snapshot> snapshot() const override {
    std::lock_guard lock(mutex_);
    return std::make_unique<memory_snapshot>(maps_);
  }

private:
  status scan_chunks(keyspace space, std::string_view prefix, std::string_view start_after,
                     const scan_visitor& visit) const {
    std::string position(start_after);
    for (;;) {
      auto chunk = next_chunk(space, prefix, position);
      for (const auto& [key, value] : chunk) {
        if (!visit(key, value))
          return status::ok();
      }
      if (chunk.size() < scan_chunk_entries)
        return status::ok();
      position = chunk.back().first;
    }
  }

  std::vector<std::pair<std::string, std::string>>
  next_chunk(keyspace space, std::string_view prefix, std::string_view start_after) const {
    std::vector<std::pair<std::string, std::string>> chunk;
    std::lock_guard lock(mutex_);
    const auto& map = map_of(maps_, space);
    for (auto it = first_after(map, prefix, start_after);
         it != map.end() && it->first.starts_with(prefix) && chunk.size() < scan_chunk_entries;
         ++it)
      chunk.emplace_back(it->first, it->second);
    return chunk;
  }

  mutable std::mutex mutex_;
  space_maps maps_;
};

} // namespace

std::unique_ptr<kv_store> make_memory_store() { return std::make_unique<memory_store>(); }

} // namespace airlock::storage

namespace airlock::storage {

status kv_store::write_all(std::span<const write_batch* const> batches, durability mode) {
  write_batch merged;
  for (const auto* batch : batches)
    merged.append(*batch);
  return write(merged, mode);
}

} // namespace airlock::storage
