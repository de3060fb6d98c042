// The RocksDB-backed kv_store: the only file in airlock that sees RocksDB.
// One column family per keyspace; every failure becomes an airlock::status.

#include <rocksdb/cache.h>
#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/table.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <array>
#include <exception>
#include <new>
#include <vector>

#include "storage/kv_store.hpp"

namespace airlock::storage {

namespace {

rocksdb::Slice to_slice(std::string_view bytes) { return {bytes.data(), bytes.size()}; }

std::string_view to_view(const rocksdb::Slice& bytes) { return {bytes.data(), bytes.size()}; }

/// One column family handle per keyspace, indexed by the keyspace's value.
using family_array = std::array<rocksdb::ColumnFamilyHandle*, all_keyspaces.size()>;

/// NotFound and Corruption keep their meaning; anything else is the disk or
/// the store failing, which a caller can only report or retry later.
status to_status(const rocksdb::Status& s, std::string_view what) {
  if (s.ok())
    return status::ok();
  errc code = errc::io_error;
  if (s.IsNotFound())
    code = errc::not_found;
  else if (s.IsCorruption())
    code = errc::corrupt_record;
  return make_status(code, "rocksdb " + std::string(what) + " failed: " + s.ToString());
}

/// Runs `body`, turning an exception (an allocation failure, a bug in a
/// visitor) into a status so that none crosses the kv_store interface.
template <class Body>
auto guarded(std::string_view what, Body&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return make_status(errc::resource_exhausted,
                       "rocksdb " + std::string(what) + " ran out of memory");
  } catch (const std::exception& e) {
    return make_status(errc::internal, "rocksdb " + std::string(what) + " threw: " + e.what());
  }
}

/// The smallest key greater than every key starting with `prefix`; empty when
/// there is none (empty prefix or all 0xff bytes), meaning "no upper bound".
std::string prefix_successor(std::string_view prefix) {
  std::string bound(prefix);
  while (!bound.empty()) {
    auto& last = reinterpret_cast<unsigned char&>(bound.back());
    if (last != 0xff) {
      ++last;
      return bound;
    }
    bound.pop_back();
  }
  return bound;
}

result<std::optional<std::string>> get_with(rocksdb::DB& db, const rocksdb::ReadOptions& read,
                                            rocksdb::ColumnFamilyHandle* family,
                                            std::string_view key) {
  std::string value;
  auto s = db.Get(read, family, to_slice(key), &value);
  if (s.IsNotFound())
    return std::optional<std::string>{};
  if (!s.ok())
    return to_status(s, "get");
  return std::optional<std::string>(std::move(value));
}

/// Shared by the live store and snapshots: `read` carries the snapshot, if any.
status scan_with(rocksdb::DB& db, rocksdb::ReadOptions read, rocksdb::ColumnFamilyHandle* family,
                 std::string_view prefix, std::string_view start_after, const scan_visitor& visit) {
  // The upper bound lets RocksDB stop at the end of the prefix instead of
  // walking tombstones beyond it.
  const std::string upper = prefix_successor(prefix);
  const rocksdb::Slice upper_slice = to_slice(upper);
  if (!upper.empty())
    read.iterate_upper_bound = &upper_slice;
  std::unique_ptr<rocksdb::Iterator> it(db.NewIterator(read, family));
  it->Seek(to_slice(std::max(prefix, start_after)));
  if (!start_after.empty() && it->Valid() && to_view(it->key()) == start_after)
    it->Next();
  for (; it->Valid(); it->Next()) {
    if (!it->key().starts_with(to_slice(prefix)))
      break;
    if (!visit(to_view(it->key()), to_view(it->value())))
      return status::ok();
  }
  return to_status(it->status(), "scan");
}

bool is_lock_failure(const rocksdb::Status& s) {
  // RocksDB reports both "While lock file: <dir>/LOCK" (another process) and
  // "lock hold by current process" as IOError without a dedicated subcode.
  const std::string text = s.ToString();
  return s.IsIOError()
         && (text.find("/LOCK") != std::string::npos || text.find("lock ") != std::string::npos);
}

status open_failure(const rocksdb::Status& s, const std::string& directory) {
  if (is_lock_failure(s)) {
    return make_status(errc::io_error, "data directory " + directory
                                         + " is locked: another airlockd may be using the data "
                                           "directory (rocksdb: "
                                         + s.ToString() + ")");
  }
  auto failure = to_status(s, "open of " + directory);
  if (failure.code == errc::not_found)
    failure.code = errc::io_error; // a missing directory is an unusable one
  return failure;
}

class rocksdb_snapshot final : public kv_snapshot {
public:
  /// Must not outlive the store that owns `db`.
  rocksdb_snapshot(rocksdb::DB& db, const family_array& families)
      : db_(db), families_(families), snapshot_(db.GetSnapshot()) {}
  ~rocksdb_snapshot() override { db_.ReleaseSnapshot(snapshot_); }
  rocksdb_snapshot(const rocksdb_snapshot&) = delete;
  rocksdb_snapshot& operator=(const rocksdb_snapshot&) = delete;

  result<std::optional<std::string>> get(keyspace space, std::string_view key) const override {
    return guarded("snapshot get", [&] { return get_with(db_, read(), family(space), key); });
  }

  status scan(keyspace space, std::string_view prefix, std::string_view start_after,
              const scan_visitor& visit) const override {
    return guarded("snapshot scan", [&] {
      return scan_with(db_, read(), family(space), prefix, start_after, visit);
    });
  }

private:
  rocksdb::ReadOptions read() const {
    rocksdb::ReadOptions options;
    options.snapshot = snapshot_;
    return options;
  }
  rocksdb::ColumnFamilyHandle* family(keyspace space) const {
    return families_.at(static_cast<size_t>(space));
  }

  rocksdb::DB& db_;
  family_array families_;
  const rocksdb::Snapshot* snapshot_;
};

class rocksdb_store final : public kv_store {
public:
  /// Takes ownership of `db` and of every handle in `handles`; `families`
  /// points into `handles`, one per keyspace.
  rocksdb_store(std::unique_ptr<rocksdb::DB> db, std::vector<rocksdb::ColumnFamilyHandle*> handles,
                family_array families)
      : db_(std::move(db)), handles_(std::move(handles)), families_(families) {}

  ~rocksdb_store() override {
    for (auto* handle : handles_)
      db_->DestroyColumnFamilyHandle(handle);
    // Close reports errors a destructor cannot act on; every acknowledged
    // write is already synced to the WAL, so nothing acknowledged is lost.
    db_->Close().PermitUncheckedError();
  }
  rocksdb_store(const rocksdb_store&) = delete;
  rocksdb_store& operator=(const rocksdb_store&) = delete;

  result<std::optional<std::string>> get(keyspace space, std::string_view key) const override {
    return guarded("get", [&] { return get_with(*db_, {}, family(space), key); });
  }

  status put(keyspace space, std::string_view key, std::string_view value,
             durability mode) override {
    return guarded("put", [&] {
      return to_status(db_->Put(write_options(mode), family(space), to_slice(key), to_slice(value)),
                       "put");
    });
  }

  status write(const write_batch& batch, durability mode) override {
    const write_batch* one[] = {&batch};
    return guarded("write", [&] { return write_unguarded(one, mode); });
  }

  status write_all(std::span<const write_batch* const> batches, durability mode) override {
    return guarded("write", [&] { return write_unguarded(batches, mode); });
  }

  status scan(keyspace space, std::string_view prefix, std::string_view start_after,
              const scan_visitor& visit) const override {
    return guarded("scan",
                   [&] { return scan_with(*db_, {}, family(space), prefix, start_after, visit); });
  }

  std::unique_ptr<kv_snapshot> snapshot() const override {
    return std::make_unique<rocksdb_snapshot>(*db_, families_);
  }

private:
  static rocksdb::WriteOptions write_options(durability mode) {
    rocksdb::WriteOptions options;
    options.sync = mode == durability::synced;
    return options;
  }

  rocksdb::ColumnFamilyHandle* family(keyspace space) const {
    return families_.at(static_cast<size_t>(space));
  }

  /// One native batch straight from every op: group commit copies nothing twice.
  status write_unguarded(std::span<const write_batch* const> batches, durability mode) {
    rocksdb::WriteBatch native;
    for (const auto* batch : batches) {
      for (const auto& op : batch->ops()) {
        auto s = op.value ? native.Put(family(op.space), op.key, *op.value)
                          : native.Delete(family(op.space), op.key);
        if (!s.ok())
          return to_status(s, "write");
      }
    }
    return to_status(db_->Write(write_options(mode), &native), "write");
  }

  std::unique_ptr<rocksdb::DB> db_;
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;
  family_array families_;
};

rocksdb::ColumnFamilyOptions family_options(const rocksdb_options& options,
                                            const std::shared_ptr<rocksdb::Cache>& cache) {
  rocksdb::ColumnFamilyOptions family;
  family.write_buffer_size = options.write_buffer_bytes;
  rocksdb::BlockBasedTableOptions table;
  table.block_cache = cache; // one cache shared by every keyspace
  family.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  return family;
}

/// Every keyspace, "default" (RocksDB requires it) and any family already on
/// disk that this build does not know (RocksDB refuses to open without them).
std::vector<rocksdb::ColumnFamilyDescriptor>
family_descriptors(const rocksdb::DBOptions& db_options, const std::string& directory,
                   const rocksdb::ColumnFamilyOptions& family) {
  std::vector<std::string> names{rocksdb::kDefaultColumnFamilyName};
  for (auto space : all_keyspaces)
    names.emplace_back(to_string(space));
  std::vector<std::string> existing;
  // Fails when the database does not exist yet: then there is nothing extra.
  if (rocksdb::DB::ListColumnFamilies(db_options, directory, &existing).ok()) {
    for (auto& name : existing)
      if (std::find(names.begin(), names.end(), name) == names.end())
        names.push_back(std::move(name));
  }
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  descriptors.reserve(names.size());
  for (auto& name : names)
    descriptors.emplace_back(std::move(name), family);
  return descriptors;
}

result<std::unique_ptr<kv_store>> open_unguarded(const std::string& directory,
                                                 const rocksdb_options& options) {
  rocksdb::DBOptions db_options;
  db_options.create_if_missing = options.create_if_missing;
  db_options.create_missing_column_families = options.create_if_missing;
  // The WAL stays on (the default): synced writes are what acknowledges.
  const auto family = family_options(options, rocksdb::NewLRUCache(options.block_cache_bytes));
  const auto descriptors = family_descriptors(db_options, directory, family);

  rocksdb::DB* raw = nullptr;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  auto s = rocksdb::DB::Open(db_options, directory, descriptors, &handles, &raw);
  if (!s.ok())
    return open_failure(s, directory);
  std::unique_ptr<rocksdb::DB> db(raw);

  // Descriptors list "default" first, then the keyspaces in enum order.
  family_array families{};
  for (size_t i = 0; i < families.size(); ++i)
    families[i] = handles.at(i + 1);
  return std::unique_ptr<kv_store>(
    std::make_unique<rocksdb_store>(std::move(db), std::move(handles), families));
}

} // namespace

result<std::unique_ptr<kv_store>> open_rocksdb_store(const std::string& directory,
                                                     const rocksdb_options& options) {
  return guarded("open", [&] { return open_unguarded(directory, options); });
}

} // namespace airlock::storage
