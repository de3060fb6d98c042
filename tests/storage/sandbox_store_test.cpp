#include <gtest/gtest.h>

#include "schema/auth.hpp"
#include "storage/sandbox_store.hpp"
#include "tests/storage/test_support.hpp"

namespace airlock::storage {
namespace {

using schema::sandbox_state;

class sandbox_store_test : public ::testing::Test {
protected:
  void save(const schema::sandbox_record& record) {
    write_batch batch;
    sandbox_store::stage_put(batch, record);
    ASSERT_TRUE(kv_->write(batch));
  }

  std::vector<std::string> list_all(const sandbox_filter& filter, size_t limit) {
    std::vector<std::string> ids;
    std::string cursor;
    for (size_t pages = 0; pages < 100; ++pages) {
      auto listed = sandboxes_.list(filter, limit, cursor);
      EXPECT_TRUE(listed) << listed.error().message;
      if (!listed)
        break;
      for (const auto& record : listed->items)
        ids.push_back(record.id);
      cursor = listed->next_cursor;
      if (cursor.empty())
        break;
    }
    return ids;
  }

  std::unique_ptr<kv_store> kv_ = make_memory_store();
  sandbox_store sandboxes_{*kv_};
};

TEST_F(sandbox_store_test, a_staged_record_reads_back_equal_and_erase_removes_it) {
  auto record = test::sample_sandbox("sb_1", "t1", sandbox_state::running);
  record.spec.metadata = {{"team", "search"}};
  save(record);
  auto found = sandboxes_.get("sb_1");
  ASSERT_TRUE(found) << found.error().message;
  ASSERT_TRUE(found->has_value());
  EXPECT_EQ(**found, record);

  write_batch batch;
  sandbox_store::stage_erase(batch, "sb_1");
  ASSERT_TRUE(kv_->write(batch));
  EXPECT_FALSE(sandboxes_.get("sb_1")->has_value());
}

TEST_F(sandbox_store_test, corrupt_bytes_give_corrupt_record_naming_the_sandbox) {
  ASSERT_TRUE(kv_->put(keyspace::sandboxes, "sb_bad", std::string(16, '\x7f')));
  auto found = sandboxes_.get("sb_bad");
  ASSERT_FALSE(found);
  EXPECT_EQ(found.code(), errc::corrupt_record);
  EXPECT_NE(found.error().message.find("sb_bad"), std::string::npos);
}

TEST_F(sandbox_store_test, list_matches_tenant_state_and_every_metadata_pair) {
  auto a = test::sample_sandbox("sb_a", "t1", sandbox_state::running);
  a.spec.metadata = {{"team", "search"}, {"env", "prod"}};
  auto b = test::sample_sandbox("sb_b", "t1", sandbox_state::running);
  b.spec.metadata = {{"team", "search"}};
  auto c = test::sample_sandbox("sb_c", "t1", sandbox_state::paused);
  c.spec.metadata = {{"team", "search"}, {"env", "prod"}};
  auto d = test::sample_sandbox("sb_d", "t2", sandbox_state::running);
  d.spec.metadata = {{"team", "search"}, {"env", "prod"}};
  for (const auto& record : {a, b, c, d})
    save(record);

  using ids = std::vector<std::string>;
  EXPECT_EQ(list_all({"t1", std::nullopt, {}}, 10), (ids{"sb_a", "sb_b", "sb_c"}));
  EXPECT_EQ(list_all({"t1", sandbox_state::running, {}}, 10), (ids{"sb_a", "sb_b"}));
  EXPECT_EQ(list_all({"", std::nullopt, {{"team", "search"}, {"env", "prod"}}}, 10),
            (ids{"sb_a", "sb_c", "sb_d"}));
  EXPECT_EQ(list_all({"t1", sandbox_state::running, {{"env", "prod"}}}, 10), ids{"sb_a"});
  EXPECT_EQ(list_all({"", std::nullopt, {{"env", "dev"}}}, 10), ids{});
}

TEST_F(sandbox_store_test, list_pages_without_gaps_or_duplicates) {
  std::vector<std::string> expected;
  for (int i = 0; i < 25; ++i) {
    const std::string id = "sb_" + std::to_string(100 + i);
    save(test::sample_sandbox(id, i % 2 == 0 ? "t1" : "t2", sandbox_state::running));
    if (i % 2 == 0)
      expected.push_back(id);
  }
  EXPECT_EQ(list_all({"t1", std::nullopt, {}}, 4), expected);
  EXPECT_EQ(list_all({"t1", std::nullopt, {}}, 1), expected);
  EXPECT_EQ(list_all({"t1", std::nullopt, {}}, 13), expected);
}

TEST_F(sandbox_store_test, list_rejects_a_zero_limit) {
  EXPECT_EQ(sandboxes_.list({}, 0, "").code(), errc::invalid_argument);
}

TEST(api_key_store, any_is_false_on_an_empty_store_and_true_once_a_key_exists) {
  auto kv = make_memory_store();
  api_key_store keys(*kv);
  auto before = keys.any();
  ASSERT_TRUE(before);
  EXPECT_FALSE(*before);

  schema::api_key_record record;
  record.key_id = "key_1";
  record.tenant_id = "t1";
  record.secret_sha256 = std::string(32, '\x11');
  record.role = schema::api_key_role::admin;
  record.created_at_ms = 1'717'000'000'000;
  write_batch batch;
  api_key_store::stage_put(batch, record);
  ASSERT_TRUE(kv->write(batch));

  auto after = keys.any();
  ASSERT_TRUE(after);
  EXPECT_TRUE(*after);
  auto found = keys.get("key_1");
  ASSERT_TRUE(found) << found.error().message;
  ASSERT_TRUE(found->has_value());
  EXPECT_EQ(**found, record);
  EXPECT_FALSE(keys.get("key_2")->has_value());
}

} // namespace
} // namespace airlock::storage
