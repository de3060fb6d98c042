// The kv_store contract, run over both the RocksDB and the in-memory store so
// that the simulator's store cannot drift from the real one.

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "storage/kv_store.hpp"
#include "tests/storage/test_support.hpp"

namespace airlock::storage {
namespace {

using entries = std::vector<std::pair<std::string, std::string>>;

class kv_store_contract : public ::testing::TestWithParam<std::string> {
protected:
  void SetUp() override {
    if (GetParam() == "memory") {
      store_ = make_memory_store();
      return;
    }
    dir_ = std::make_unique<test::temp_dir>();
    auto opened = open_rocksdb_store(dir_->path());
    ASSERT_TRUE(opened) << opened.error().message;
    store_ = std::move(*opened);
  }

  void TearDown() override {
    store_.reset(); // close the database before its directory goes
    dir_.reset();
  }

  void put_all(keyspace space, const std::vector<std::string>& keys) {
    write_batch batch;
    for (const auto& key : keys)
      batch.put(space, key, "v:" + key);
    ASSERT_TRUE(store_->write(batch));
  }

  static entries collect(const auto& source, keyspace space, std::string_view prefix,
                         std::string_view start_after, size_t stop_after = SIZE_MAX) {
    entries seen;
    auto scanned = source.scan(space, prefix, start_after,
                               [&seen, stop_after](std::string_view key, std::string_view value) {
                                 seen.emplace_back(key, value);
                                 return seen.size() < stop_after;
                               });
    EXPECT_TRUE(scanned) << scanned.message;
    return seen;
  }

  static std::vector<std::string> keys_of(const entries& seen) {
    std::vector<std::string> keys;
    for (const auto& entry : seen)
      keys.push_back(entry.first);
    return keys;
  }

  std::unique_ptr<test::temp_dir> dir_;
  std::unique_ptr<kv_store> store_;
};

using strings = std::vector<std::string>;

TEST_P(kv_store_contract, get_of_a_missing_key_is_empty_not_an_error) {
  auto found = store_->get(keyspace::operations, "op_missing");
  ASSERT_TRUE(found);
  EXPECT_FALSE(found->has_value());
}

TEST_P(kv_store_contract, put_then_get_returns_the_value_and_a_second_put_replaces_it) {
  ASSERT_TRUE(store_->put(keyspace::operations, "op_1", "first"));
  EXPECT_EQ(store_->get(keyspace::operations, "op_1")->value_or(""), "first");
  ASSERT_TRUE(store_->put(keyspace::operations, "op_1", "second", durability::buffered));
  EXPECT_EQ(store_->get(keyspace::operations, "op_1")->value_or(""), "second");
}

TEST_P(kv_store_contract, binary_keys_and_values_round_trip) {
  const std::string key("k\0\xff", 3);
  const std::string value("\0\x01\xfe\0", 4);
  ASSERT_TRUE(store_->put(keyspace::meta, key, value));
  EXPECT_EQ(store_->get(keyspace::meta, key)->value_or(""), value);
}

TEST_P(kv_store_contract, the_same_key_in_two_keyspaces_holds_two_values) {
  ASSERT_TRUE(store_->put(keyspace::sandboxes, "id", "sandbox"));
  ASSERT_TRUE(store_->put(keyspace::workers, "id", "worker"));
  EXPECT_EQ(store_->get(keyspace::sandboxes, "id")->value_or(""), "sandbox");
  EXPECT_EQ(store_->get(keyspace::workers, "id")->value_or(""), "worker");
  EXPECT_FALSE(store_->get(keyspace::api_keys, "id")->has_value());
}

TEST_P(kv_store_contract, batch_erase_deletes_and_erasing_a_missing_key_is_fine) {
  ASSERT_TRUE(store_->put(keyspace::active_ops, "op_1", ""));
  write_batch batch;
  batch.erase(keyspace::active_ops, "op_1");
  batch.erase(keyspace::active_ops, "op_never_written");
  ASSERT_TRUE(store_->write(batch));
  EXPECT_FALSE(store_->get(keyspace::active_ops, "op_1")->has_value());
}

TEST_P(kv_store_contract, write_all_applies_every_batch_in_order_as_one_write) {
  write_batch first, second;
  first.put(keyspace::operations, "op_1", "v1");
  first.put(keyspace::meta, "shared", "from-first");
  second.put(keyspace::active_ops, "op_2", "");
  second.put(keyspace::meta, "shared", "from-second");
  const write_batch* batches[] = {&first, &second};
  ASSERT_TRUE(store_->write_all(batches));
  EXPECT_EQ(store_->get(keyspace::operations, "op_1")->value_or(""), "v1");
  EXPECT_TRUE(store_->get(keyspace::active_ops, "op_2")->has_value());
  EXPECT_EQ(store_->get(keyspace::meta, "shared")->value_or(""), "from-second");
}

TEST_P(kv_store_contract, later_ops_in_a_batch_win_over_earlier_ones) {
  write_batch batch;
  batch.put(keyspace::meta, "a", "1");
  batch.put(keyspace::meta, "a", "2");
  batch.put(keyspace::meta, "b", "1");
  batch.erase(keyspace::meta, "b");
  ASSERT_TRUE(store_->write(batch));
  EXPECT_EQ(store_->get(keyspace::meta, "a")->value_or(""), "2");
  EXPECT_FALSE(store_->get(keyspace::meta, "b")->has_value());
}

TEST_P(kv_store_contract, an_empty_batch_succeeds) { EXPECT_TRUE(store_->write(write_batch{})); }

TEST_P(kv_store_contract, readers_never_see_half_of_a_batch_across_keyspaces) {
  // The writer moves a counter in two keyspaces per batch; every snapshot
  // must show both at the same value. A torn batch shows them apart.
  constexpr int rounds = 300;
  std::atomic<bool> done{false};
  std::thread writer([this, &done] {
    for (int i = 1; i <= rounds; ++i) {
      write_batch batch;
      batch.put(keyspace::operations, "counter", std::to_string(i));
      batch.put(keyspace::active_ops, "counter", std::to_string(i));
      EXPECT_TRUE(store_->write(batch, durability::buffered));
    }
    done = true;
  });
  int checks = 0;
  while (!done || checks == 0) {
    auto view = store_->snapshot();
    auto left = view->get(keyspace::operations, "counter");
    auto right = view->get(keyspace::active_ops, "counter");
    ASSERT_TRUE(left && right);
    EXPECT_EQ(left->value_or("none"), right->value_or("none"));
    ++checks;
  }
  writer.join();
  EXPECT_EQ(store_->get(keyspace::active_ops, "counter")->value_or(""), std::to_string(rounds));
}

TEST_P(kv_store_contract, scan_visits_only_keys_with_the_prefix_in_byte_order) {
  put_all(keyspace::sandboxes,
          {"`", "a", std::string("a\0", 2), "a\x7f", "a\x80", "a\xff", "ab", "b", "sb_1"});
  auto seen = collect(*store_, keyspace::sandboxes, "a", "");
  // Bytes compare unsigned: 0x80 and 0xff sort after 'b' (0x62).
  EXPECT_EQ(keys_of(seen), (strings{"a", std::string("a\0", 2), "ab", "a\x7f", "a\x80", "a\xff"}));
  EXPECT_EQ(seen.front().second, "v:a");
}

TEST_P(kv_store_contract, scan_with_an_empty_prefix_visits_every_key_of_the_keyspace_only) {
  put_all(keyspace::sandboxes, {"b", "a", "c"});
  put_all(keyspace::workers, {"w"});
  EXPECT_EQ(keys_of(collect(*store_, keyspace::sandboxes, "", "")), (strings{"a", "b", "c"}));
}

TEST_P(kv_store_contract, scan_of_an_all_0xff_prefix_reaches_the_end_of_the_keyspace) {
  const std::string last("\xff\xff\x00", 3);
  put_all(keyspace::meta, {"\xfe", "\xff", "\xff\x01", "\xff\xff", last});
  EXPECT_EQ(keys_of(collect(*store_, keyspace::meta, "\xff", "")),
            (strings{"\xff", "\xff\x01", "\xff\xff", last}));
}

TEST_P(kv_store_contract, scan_starts_strictly_after_start_after) {
  put_all(keyspace::operations, {"op_1", "op_2", "op_3", "op_4", "zz"});
  // An existing key is itself skipped.
  EXPECT_EQ(keys_of(collect(*store_, keyspace::operations, "op_", "op_2")),
            (strings{"op_3", "op_4"}));
  // A key that is not stored: the scan starts at the next one.
  EXPECT_EQ(keys_of(collect(*store_, keyspace::operations, "op_", "op_25")),
            (strings{"op_3", "op_4"}));
  // start_after before the prefix: the whole prefix.
  EXPECT_EQ(keys_of(collect(*store_, keyspace::operations, "op_", "a")),
            (strings{"op_1", "op_2", "op_3", "op_4"}));
  // start_after past the prefix: nothing, not the keys after the prefix.
  EXPECT_TRUE(collect(*store_, keyspace::operations, "op_", "op_4").empty());
  EXPECT_TRUE(collect(*store_, keyspace::operations, "op_", "p").empty());
}

TEST_P(kv_store_contract, scan_stops_when_the_visitor_returns_false) {
  put_all(keyspace::operations, {"op_1", "op_2", "op_3"});
  EXPECT_EQ(keys_of(collect(*store_, keyspace::operations, "", "", 2)), (strings{"op_1", "op_2"}));
}

TEST_P(kv_store_contract, a_long_scan_is_complete_and_ordered) {
  // More keys than the memory store copies per chunk.
  std::vector<std::string> keys;
  keys.reserve(1000);
  for (int i = 0; i < 1000; ++i)
    keys.push_back("k" + std::to_string(100000 + i));
  put_all(keyspace::operations, keys);
  EXPECT_EQ(keys_of(collect(*store_, keyspace::operations, "k", "")), keys);
  EXPECT_EQ(keys_of(collect(*store_, keyspace::operations, "k", "k100499")),
            strings(keys.begin() + 500, keys.end()));
}

TEST_P(kv_store_contract, a_visitor_may_read_and_write_the_store) {
  put_all(keyspace::active_ops, {"op_1", "op_2"});
  ASSERT_TRUE(store_->put(keyspace::operations, "op_1", "record"));
  int visited = 0;
  auto scanned = store_->scan(keyspace::active_ops, "", "",
                              [this, &visited](std::string_view key, std::string_view) {
                                auto found = store_->get(keyspace::operations, key);
                                EXPECT_TRUE(found);
                                EXPECT_TRUE(store_->put(keyspace::meta, key, "seen"));
                                ++visited;
                                return true;
                              });
  ASSERT_TRUE(scanned);
  EXPECT_EQ(visited, 2);
  EXPECT_EQ(store_->get(keyspace::meta, "op_2")->value_or(""), "seen");
}

TEST_P(kv_store_contract, a_visitor_that_throws_gives_internal_instead_of_an_exception) {
  put_all(keyspace::operations, {"op_1"});
  const scan_visitor throwing = [](std::string_view, std::string_view) -> bool {
    throw std::runtime_error("visitor bug");
  };
  auto live = store_->scan(keyspace::operations, "", "", throwing);
  EXPECT_EQ(live.code, errc::internal);
  EXPECT_NE(live.message.find("visitor bug"), std::string::npos);
  EXPECT_EQ(store_->snapshot()->scan(keyspace::operations, "", "", throwing).code, errc::internal);
}

TEST_P(kv_store_contract, a_snapshot_does_not_see_writes_made_after_it) {
  put_all(keyspace::operations, {"op_1", "op_2"});
  auto view = store_->snapshot();

  write_batch later;
  later.put(keyspace::operations, "op_1", "changed");
  later.erase(keyspace::operations, "op_2");
  later.put(keyspace::operations, "op_3", "new");
  ASSERT_TRUE(store_->write(later));

  EXPECT_EQ(view->get(keyspace::operations, "op_1")->value_or(""), "v:op_1");
  EXPECT_EQ(view->get(keyspace::operations, "op_2")->value_or(""), "v:op_2");
  EXPECT_FALSE(view->get(keyspace::operations, "op_3")->has_value());
  EXPECT_EQ(collect(*view, keyspace::operations, "op_", ""),
            (entries{{"op_1", "v:op_1"}, {"op_2", "v:op_2"}}));
  EXPECT_EQ(keys_of(collect(*view, keyspace::operations, "op_", "op_1")), strings{"op_2"});
  // The live store has moved on.
  EXPECT_EQ(keys_of(collect(*store_, keyspace::operations, "op_", "")), (strings{"op_1", "op_3"}));
}

INSTANTIATE_TEST_SUITE_P(stores, kv_store_contract, ::testing::Values("rocksdb", "memory"),
                         [](const auto& param_info) { return param_info.param; });

} // namespace
} // namespace airlock::storage
