#pragma once
// An atomic set of puts and deletes across keyspaces: one state transition.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "storage/keyspace.hpp"

namespace airlock::storage {

struct write_op {
  keyspace space;
  std::string key;
  std::optional<std::string> value; ///< nullopt deletes the key
};

/// A value type; cheap to move. Applied all-or-nothing by kv_store::write.
class write_batch {
public:
  void put(keyspace space, std::string_view key, std::string_view value) {
    ops_.push_back(write_op{space, std::string(key), std::string(value)});
    bytes_ += key.size() + value.size();
  }
  void erase(keyspace space, std::string_view key) {
    ops_.push_back(write_op{space, std::string(key), std::nullopt});
    bytes_ += key.size();
  }
  /// Appends every op of `other` after this batch's own (later ops win).
  void append(const write_batch& other) {
    ops_.insert(ops_.end(), other.ops_.begin(), other.ops_.end());
    bytes_ += other.bytes_;
  }
  const std::vector<write_op>& ops() const noexcept { return ops_; }
  bool empty() const noexcept { return ops_.empty(); }
  size_t size() const noexcept { return ops_.size(); }
  size_t bytes() const noexcept { return bytes_; }

private:
  std::vector<write_op> ops_;
  size_t bytes_ = 0;
};

} // namespace airlock::storage
