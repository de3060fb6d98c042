#pragma once
// The narrow store interface every durable component uses. No RocksDB type
// appears here: storage/rocksdb_store.cpp is the only file that sees RocksDB.

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "schema/errc.hpp"
#include "storage/keyspace.hpp"
#include "storage/write_batch.hpp"

namespace airlock::storage {

/// Whether a write returns before (`buffered`) or after (`synced`) its WAL
/// record reaches stable storage. Only synced writes may be acknowledged.
enum class durability : uint8_t { buffered, synced };

/// Called per key in order; return false to stop the scan early.
using scan_visitor = std::function<bool(std::string_view key, std::string_view value)>;

/// A consistent read-only view of the store at one point in time.
class kv_snapshot {
public:
  virtual ~kv_snapshot() = default;
  virtual result<std::optional<std::string>> get(keyspace space, std::string_view key) const = 0;
  /// Visits keys that start with `prefix` and sort after `start_after` (empty:
  /// from the first), in byte order.
  virtual status scan(keyspace space, std::string_view prefix, std::string_view start_after,
                      const scan_visitor& visit) const = 0;
};

/// Thread-safe: any thread may call any method concurrently.
class kv_store {
public:
  virtual ~kv_store() = default;
  virtual result<std::optional<std::string>> get(keyspace space, std::string_view key) const = 0;
  virtual status put(keyspace space, std::string_view key, std::string_view value,
                     durability mode = durability::synced) = 0;
  /// Applies every op of `batch` or none.
  virtual status write(const write_batch& batch, durability mode = durability::synced) = 0;
  /// Applies every op of every batch, in order, as one atomic write (group
  /// commit). The default merges copies; stores override it to avoid that.
  virtual status write_all(std::span<const write_batch* const> batches,
                           durability mode = durability::synced);
  /// Same contract as kv_snapshot::scan, over the live store.
  virtual status scan(keyspace space, std::string_view prefix, std::string_view start_after,
                      const scan_visitor& visit) const = 0;
  virtual std::unique_ptr<kv_snapshot> snapshot() const = 0;
};

/// Options for the RocksDB-backed store. Field names carry their unit.
struct rocksdb_options {
  /// Create the database and missing column families. Default: true.
  bool create_if_missing = true;
  /// Block cache size. Default: 32 MiB.
  size_t block_cache_bytes = 32u << 20;
  /// Memtable size per column family before a flush. Default: 16 MiB.
  size_t write_buffer_bytes = 16u << 20;
};

/// Opens (or creates) the RocksDB store in `directory`. Fails with io_error
/// (and RocksDB's reason) when the directory is unusable or locked by another
/// process.
result<std::unique_ptr<kv_store>> open_rocksdb_store(const std::string& directory,
                                                     const rocksdb_options& options = {});

/// An in-memory store for unit tests and the simulator: same contract,
/// nothing survives the object.
std::unique_ptr<kv_store> make_memory_store();

} // namespace airlock::storage
