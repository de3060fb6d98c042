#pragma once
// Shared fixtures for the storage tests: sample records and a kv_store double whose writes can be
// held at a gate.

#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "schema/operation.hpp"
#include "schema/sandbox.hpp"
#include "storage/kv_store.hpp"
#include "tests/support/host.hpp"

namespace airlock::storage::test {

using airlock::test::temp_dir;

/// An operation record with every field set, about the size of a real one.
schema::operation_record sample_operation(std::string id, std::string tenant_id,
                                          schema::operation_state state);

schema::sandbox_record sample_sandbox(std::string id, std::string tenant_id,
                                      schema::sandbox_state state);

/// Forwards to `inner`, except that write() waits while the gate is closed
/// and fails any batch that touches the poison key. Lets journal tests decide
/// exactly what is queued while a sync is in progress, without sleeping.
class gated_store final : public kv_store {
public:
  explicit gated_store(kv_store& inner, bool open = true) : inner_(inner), open_(open) {}

  void open_gate();
  void close_gate();
  /// Blocks until at least `count` writes are waiting at the closed gate.
  void wait_until_blocked(size_t count);
  /// Batches containing a put or delete of `key` fail with io_error.
  void poison(std::string key);
  /// Number of ops in each write() that got past the gate, in order.
  std::vector<size_t> write_sizes() const;

  result<std::optional<std::string>> get(keyspace space, std::string_view key) const override {
    return inner_.get(space, key);
  }
  status put(keyspace space, std::string_view key, std::string_view value,
             durability mode) override {
    return inner_.put(space, key, value, mode);
  }
  status write(const write_batch& batch, durability mode) override;
  status scan(keyspace space, std::string_view prefix, std::string_view start_after,
              const scan_visitor& visit) const override {
    return inner_.scan(space, prefix, start_after, visit);
  }
  std::unique_ptr<kv_snapshot> snapshot() const override { return inner_.snapshot(); }

private:
  kv_store& inner_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  bool open_;
  size_t blocked_ = 0;
  std::string poison_;
  std::vector<size_t> write_sizes_;
};

} // namespace airlock::storage::test
