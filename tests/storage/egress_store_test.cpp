// The credential and audit stores over the in-memory store (the kv_store
// contract tests cover RocksDB's equivalence).
#include <gtest/gtest.h>

#include "storage/egress_store.hpp"

namespace airlock::storage {
namespace {

schema::credential_record credential(std::string id, std::string tenant) {
  schema::credential_record r;
  r.id = std::move(id);
  r.tenant_id = std::move(tenant);
  r.name = "n";
  r.hosts = {"api.example.com"};
  r.header = "Authorization";
  r.value_template = "Bearer {secret}";
  r.sealed_secret = "sealed";
  return r;
}

schema::audit_record audit(int64_t at_ms, std::string tenant, std::string sandbox,
                           std::string kind) {
  return schema::audit_record{
    at_ms, std::move(tenant), std::move(sandbox), std::move(kind), "allowed", "r", "t", "d"};
}

TEST(credential_store, puts_gets_lists_by_tenant_and_erases) {
  auto kv = make_memory_store();
  credential_store store(*kv);
  ASSERT_TRUE(store.put(credential("cred_1", "a")));
  ASSERT_TRUE(store.put(credential("cred_2", "b")));
  ASSERT_TRUE(store.put(credential("cred_3", "a")));
  auto got = store.get("cred_2");
  ASSERT_TRUE(got && got->has_value());
  EXPECT_EQ((*got)->tenant_id, "b");
  auto first = store.list("a", 1, "");
  ASSERT_TRUE(first);
  ASSERT_EQ(first->items.size(), 1u);
  EXPECT_EQ(first->items[0].id, "cred_1");
  auto second = store.list("a", 1, first->next_cursor);
  ASSERT_TRUE(second);
  ASSERT_EQ(second->items.size(), 1u);
  EXPECT_EQ(second->items[0].id, "cred_3");
  EXPECT_TRUE(second->next_cursor.empty());
  EXPECT_EQ(store.list("", 10, "")->items.size(), 3u);
  ASSERT_TRUE(store.erase("cred_2"));
  ASSERT_TRUE(store.erase("cred_2")); // idempotent
  EXPECT_FALSE(store.get("cred_2")->has_value());
}

class audit_store_test : public ::testing::Test {
protected:
  std::vector<int64_t> times(const schema::audit_query& q) {
    std::vector<int64_t> out;
    auto cursor = q.cursor;
    for (int pages = 0; pages < 100; ++pages) {
      auto query = q;
      query.cursor = cursor;
      auto found = store_.query(query);
      EXPECT_TRUE(found) << found.error().message;
      if (!found)
        break;
      for (const auto& r : found->items)
        out.push_back(r.at_ms);
      cursor = found->next_cursor;
      if (cursor.empty())
        break;
    }
    return out;
  }

  std::unique_ptr<kv_store> kv_ = make_memory_store();
  audit_store store_{*kv_, 1};
};

TEST_F(audit_store_test, scans_in_time_order_whatever_the_append_order) {
  std::vector<schema::audit_record> records = {
    audit(300, "a", "sb_1", "egress"), audit(100, "a", "sb_1", "egress"),
    audit(100, "a", "sb_2", "dns"), audit(70000, "b", "sb_3", "lifecycle")};
  ASSERT_TRUE(store_.append(records));
  EXPECT_EQ(times({}), (std::vector<int64_t>{100, 100, 300, 70000}));
  // Big-endian keys: 256 ms sorts after 255 ms (a little-endian key would not).
  ASSERT_LT(audit_store::key_of(255, 9), audit_store::key_of(256, 0));
}

TEST_F(audit_store_test, filters_by_tenant_sandbox_kind_and_since) {
  std::vector<schema::audit_record> records = {
    audit(10, "a", "sb_1", "egress"), audit(20, "a", "sb_2", "dns"),
    audit(30, "b", "sb_3", "egress"), audit(40, "a", "sb_1", "credential"),
    audit(50, "a", "sb_1", "egress")};
  ASSERT_TRUE(store_.append(records));
  schema::audit_query q;
  q.tenant_id = "a";
  EXPECT_EQ(times(q), (std::vector<int64_t>{10, 20, 40, 50}));
  q.sandbox_id = "sb_1";
  EXPECT_EQ(times(q), (std::vector<int64_t>{10, 40, 50}));
  q.kind = "egress";
  EXPECT_EQ(times(q), (std::vector<int64_t>{10, 50}));
  q = {};
  q.since_ms = 30;
  EXPECT_EQ(times(q), (std::vector<int64_t>{30, 40, 50}));
}

TEST_F(audit_store_test, pages_with_a_cursor_never_overlap_and_end_with_an_empty_cursor) {
  std::vector<schema::audit_record> records;
  for (int64_t t = 1; t <= 7; ++t)
    records.push_back(audit(t, "a", "sb", "egress"));
  ASSERT_TRUE(store_.append(records));
  schema::audit_query q;
  q.limit = 3;
  auto first = store_.query(q);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->items.size(), 3u);
  EXPECT_FALSE(first->next_cursor.empty());
  EXPECT_EQ(times(q), (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7}));
  q.limit = 7;
  EXPECT_TRUE(store_.query(q)->next_cursor.empty()); // an exactly full page is the last
  q.cursor = "zz";
  EXPECT_EQ(store_.query(q).code(), errc::invalid_argument);
}

TEST_F(audit_store_test, a_scan_bound_ends_the_page_early_with_a_cursor_that_continues) {
  std::vector<schema::audit_record> records;
  for (int64_t t = 1; t <= 10; ++t)
    records.push_back(audit(t, t == 9 ? "b" : "a", "sb", "egress"));
  ASSERT_TRUE(store_.append(records));
  schema::audit_query q;
  q.tenant_id = "b";
  q.scan_max = 4;
  auto first = store_.query(q);
  ASSERT_TRUE(first);
  EXPECT_TRUE(first->items.empty());
  EXPECT_FALSE(first->next_cursor.empty());
  EXPECT_EQ(times(q), (std::vector<int64_t>{9}));
}

TEST_F(audit_store_test, retention_deletes_only_older_records_in_bounded_steps) {
  std::vector<schema::audit_record> records;
  for (int64_t t = 1; t <= 10; ++t)
    records.push_back(audit(t * 1000, "a", "sb", "egress"));
  ASSERT_TRUE(store_.append(records));
  auto step = store_.delete_older_than(6000, 3);
  ASSERT_TRUE(step);
  EXPECT_EQ(*step, 3u);
  auto rest = store_.delete_older_than(6000, 3);
  ASSERT_TRUE(rest);
  EXPECT_EQ(*rest, 2u);
  EXPECT_EQ(*store_.delete_older_than(6000), 0u);
  EXPECT_EQ(times({}), (std::vector<int64_t>{6000, 7000, 8000, 9000, 10000}));
}

} // namespace
} // namespace airlock::storage
