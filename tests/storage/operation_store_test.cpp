#include <gtest/gtest.h>

#include <capnp/message.h>
#include <capnp/serialize.h>

#include <string>
#include <vector>

#include "schema/operation.capnp.h"
#include "storage/operation_store.hpp"
#include "tests/storage/test_support.hpp"

namespace airlock::storage {
namespace {

using schema::operation_state;

class operation_store_test : public ::testing::Test {
protected:
  void save(const schema::operation_record& record) {
    write_batch batch;
    operation_store::stage_put(batch, record);
    ASSERT_TRUE(kv_->write(batch));
  }

  bool is_active(std::string_view id) const {
    auto found = kv_->get(keyspace::active_ops, id);
    EXPECT_TRUE(found);
    return found && found->has_value();
  }

  std::unique_ptr<kv_store> kv_ = make_memory_store();
  operation_store ops_{*kv_};
};

/// Bytes of an operation record that claims `version`, built with Cap'n
/// Proto directly as a newer airlock would write them.
std::string record_bytes_with_version(uint16_t version) {
  capnp::MallocMessageBuilder message;
  auto root = message.initRoot<capnp_schema::OperationRecord>();
  root.setSchemaVersion(version);
  root.setId("op_future");
  auto words = capnp::messageToFlatArray(message);
  auto bytes = words.asBytes();
  return {reinterpret_cast<const char*>(bytes.begin()), bytes.size()};
}

TEST_F(operation_store_test, a_staged_record_reads_back_equal) {
  const auto record = test::sample_operation("op_1", "t1", operation_state::running);
  save(record);
  auto found = ops_.get("op_1");
  ASSERT_TRUE(found) << found.error().message;
  ASSERT_TRUE(found->has_value());
  EXPECT_EQ(**found, record);
}

TEST_F(operation_store_test, get_of_an_unknown_id_is_nullopt) {
  auto found = ops_.get("op_missing");
  ASSERT_TRUE(found);
  EXPECT_FALSE(found->has_value());
}

TEST_F(operation_store_test, corrupt_value_bytes_give_corrupt_record_instead_of_a_crash) {
  const auto good = schema::encode(test::sample_operation("op_1", "t1", operation_state::pending));
  const std::vector<std::string> bad{
    "",                              // nothing
    "1234567",                       // not a whole word
    std::string(8, '\xff'),          // absurd segment count
    std::string(64, '\x5a'),         // noise
    good.substr(0, good.size() / 2), // truncated record
    std::string(good.size(), '\0'),  // all zero: no schema version
  };
  for (size_t i = 0; i < bad.size(); ++i) {
    ASSERT_TRUE(kv_->put(keyspace::operations, "op_bad", bad[i]));
    auto found = ops_.get("op_bad");
    ASSERT_FALSE(found) << "case " << i;
    EXPECT_EQ(found.code(), errc::corrupt_record) << "case " << i << ": " << found.error().message;
    EXPECT_NE(found.error().message.find("op_bad"), std::string::npos);
  }
}

TEST_F(operation_store_test, a_record_from_a_newer_schema_version_gives_unsupported_version) {
  ASSERT_TRUE(kv_->put(keyspace::operations, "op_future", record_bytes_with_version(999)));
  auto found = ops_.get("op_future");
  ASSERT_FALSE(found);
  EXPECT_EQ(found.code(), errc::unsupported_version) << found.error().message;
  // The current version, built the same way, reads fine: the test bytes are sound.
  ASSERT_TRUE(kv_->put(keyspace::operations, "op_now",
                       record_bytes_with_version(schema::operation_schema_version)));
  EXPECT_TRUE(ops_.get("op_now"));
}

TEST_F(operation_store_test, the_active_index_follows_the_state_in_the_same_batch) {
  auto record = test::sample_operation("op_1", "t1", operation_state::pending);
  save(record);
  EXPECT_TRUE(is_active("op_1"));
  record.state = operation_state::running;
  save(record);
  EXPECT_TRUE(is_active("op_1"));
  record.state = operation_state::succeeded;
  save(record);
  EXPECT_FALSE(is_active("op_1"));
  EXPECT_EQ(ops_.get("op_1")->value().state, operation_state::succeeded);
}

TEST_F(operation_store_test, load_active_returns_exactly_the_non_terminal_operations) {
  save(test::sample_operation("op_1", "t1", operation_state::pending));
  save(test::sample_operation("op_2", "t1", operation_state::succeeded));
  save(test::sample_operation("op_3", "t2", operation_state::running));
  save(test::sample_operation("op_4", "t2", operation_state::failed));
  save(test::sample_operation("op_5", "t2", operation_state::cancelled));
  size_t bad = 0;
  auto active = ops_.load_active([&bad](std::string_view, const status&) { ++bad; });
  ASSERT_TRUE(active) << active.error().message;
  ASSERT_EQ(active->size(), 2u);
  EXPECT_EQ((*active)[0].id, "op_1");
  EXPECT_EQ((*active)[1].id, "op_3");
  EXPECT_EQ(bad, 0u);
}

TEST_F(operation_store_test, load_active_reports_and_skips_undecodable_and_missing_records) {
  save(test::sample_operation("op_1", "t1", operation_state::running));
  save(test::sample_operation("op_2", "t1", operation_state::running));
  ASSERT_TRUE(kv_->put(keyspace::operations, "op_2", "garbage!"));
  ASSERT_TRUE(kv_->put(keyspace::active_ops, "op_3", "")); // index entry, no record
  std::vector<std::pair<std::string, errc>> reported;
  auto active = ops_.load_active([&reported](std::string_view id, const status& why) {
    reported.emplace_back(std::string(id), why.code);
  });
  ASSERT_TRUE(active) << active.error().message;
  ASSERT_EQ(active->size(), 1u);
  EXPECT_EQ(active->front().id, "op_1");
  EXPECT_EQ(reported, (std::vector<std::pair<std::string, errc>>{{"op_2", errc::corrupt_record},
                                                                 {"op_3", errc::not_found}}));
}

TEST_F(operation_store_test, an_idempotency_key_finds_the_operation_of_its_own_tenant_only) {
  auto record = test::sample_operation("op_1", "t1", operation_state::pending);
  record.idempotency_key = "create-42";
  save(record);
  record.state = operation_state::succeeded; // later transitions keep the mapping
  save(record);
  save(test::sample_operation("op_2", "t1", operation_state::pending)); // no key: no mapping

  EXPECT_EQ(ops_.find_by_idempotency_key("t1", "create-42")->value_or(""), "op_1");
  EXPECT_FALSE(ops_.find_by_idempotency_key("t2", "create-42")->has_value());
  EXPECT_FALSE(ops_.find_by_idempotency_key("t1", "create-43")->has_value());
  EXPECT_FALSE(ops_.find_by_idempotency_key("t1", "")->has_value());
}

TEST_F(operation_store_test, idempotency_index_keys_of_different_pairs_never_collide) {
  EXPECT_NE(operation_store::idempotency_index_key("t1", "2k"),
            operation_store::idempotency_index_key("t12", "k"));
  EXPECT_EQ(operation_store::idempotency_index_key("t1", "k"), std::string("t1\0k", 4));
}

TEST_F(operation_store_test, list_pages_through_filtered_operations_without_gaps_or_duplicates) {
  std::vector<std::string> expected;
  for (int i = 0; i < 60; ++i) {
    const std::string id = "op_" + std::to_string(1000 + i);
    const std::string tenant = i % 3 == 0 ? "t1" : "t2";
    const auto state = i % 2 == 0 ? operation_state::running : operation_state::succeeded;
    save(test::sample_operation(id, tenant, state));
    if (tenant == "t1" && state == operation_state::running)
      expected.push_back(id);
  }
  operation_filter filter{"t1", "", operation_state::running};
  std::vector<std::string> seen;
  std::string cursor;
  size_t pages = 0;
  do {
    auto listed = ops_.list(filter, 3, cursor);
    ASSERT_TRUE(listed) << listed.error().message;
    ASSERT_LE(listed->items.size(), 3u);
    for (const auto& record : listed->items) {
      EXPECT_EQ(record.tenant_id, "t1");
      seen.push_back(record.id);
    }
    cursor = listed->next_cursor;
    ASSERT_LT(++pages, 100u) << "pagination does not terminate";
  } while (!cursor.empty());
  EXPECT_EQ(seen, expected); // in id order, each once
  EXPECT_EQ(pages, (expected.size() + 2) / 3);
}

TEST_F(operation_store_test, list_gives_no_cursor_when_the_last_page_is_exactly_full) {
  for (int i = 0; i < 4; ++i)
    save(test::sample_operation("op_" + std::to_string(i), "t1", operation_state::pending));
  auto first = ops_.list({}, 2, "");
  ASSERT_TRUE(first);
  EXPECT_EQ(first->next_cursor, "op_1");
  auto second = ops_.list({}, 2, first->next_cursor);
  ASSERT_TRUE(second);
  ASSERT_EQ(second->items.size(), 2u);
  EXPECT_EQ(second->items[0].id, "op_2");
  EXPECT_TRUE(second->next_cursor.empty());
}

TEST_F(operation_store_test, list_filters_by_target) {
  auto record = test::sample_operation("op_1", "t1", operation_state::pending);
  record.target_id = "sb_other";
  save(record);
  save(test::sample_operation("op_2", "t1", operation_state::pending));
  auto listed = ops_.list({"", "sb_other", std::nullopt}, 10, "");
  ASSERT_TRUE(listed);
  ASSERT_EQ(listed->items.size(), 1u);
  EXPECT_EQ(listed->items[0].id, "op_1");
  EXPECT_TRUE(listed->next_cursor.empty());
}

TEST_F(operation_store_test, list_rejects_a_zero_limit) {
  EXPECT_EQ(ops_.list({}, 0, "").code(), errc::invalid_argument);
}

TEST_F(operation_store_test, list_reports_a_corrupt_record_by_id) {
  save(test::sample_operation("op_1", "t1", operation_state::pending));
  ASSERT_TRUE(kv_->put(keyspace::operations, "op_2", "garbage!"));
  auto listed = ops_.list({}, 10, "");
  ASSERT_FALSE(listed);
  EXPECT_EQ(listed.code(), errc::corrupt_record);
  EXPECT_NE(listed.error().message.find("op_2"), std::string::npos);
}

} // namespace
} // namespace airlock::storage
