// The rules of template records on a real (in-memory) store: names, the
// NAME:VERSION form, version numbers that only grow, a version that becomes
// current only once ready, who uses a version, tenants, and forgetting.

#include <gtest/gtest.h>

#include "actors/template_records.hpp"
#include "schema/sandbox.hpp"
#include "storage/kv_store.hpp"
#include "storage/sandbox_store.hpp"
#include "storage/write_batch.hpp"

namespace airlock::actors {
namespace {

using schema::template_version;
using schema::template_version_state;

class template_records : public ::testing::Test {
protected:
  std::unique_ptr<storage::kv_store> store_ = storage::make_memory_store();

  template_version draft() {
    template_version v;
    v.worker_id = "wk_1";
    return v;
  }

  void put_sandbox(const std::string& id, const std::string& name, uint32_t version,
                   schema::sandbox_state state = schema::sandbox_state::running) {
    schema::sandbox_record record;
    record.id = id;
    record.state = state;
    record.spec.template_name = name;
    record.spec.template_version = version;
    storage::write_batch batch;
    storage::sandbox_store::stage_put(batch, record);
    ASSERT_TRUE(store_->write(batch));
  }
};

TEST_F(template_records, names_and_references_are_checked) {
  EXPECT_TRUE(is_valid_template_name("python-3"));
  EXPECT_FALSE(is_valid_template_name(""));
  EXPECT_FALSE(is_valid_template_name("-x"));
  EXPECT_FALSE(is_valid_template_name("Upper"));
  EXPECT_FALSE(is_valid_template_name("under_score")) << "'_' separates a worker's version name";
  EXPECT_FALSE(is_valid_template_name(std::string(64, 'a')));
  EXPECT_EQ(worker_template_name("py", 3), "py_v3");
  auto plain = parse_template_ref("base");
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->first, "base");
  EXPECT_EQ(plain->second, 0u);
  auto pinned = parse_template_ref("base:12");
  ASSERT_TRUE(pinned);
  EXPECT_EQ(pinned->second, 12u);
  for (const char* bad : {"base:", "base:0", "base:x", "base:1x", "base:-1"})
    EXPECT_EQ(parse_template_ref(bad).code(), errc::invalid_argument) << bad;
}

TEST_F(template_records, the_builtin_templates_are_seeded_once_as_shared_ready_versions) {
  ASSERT_TRUE(seed_builtin_templates(*store_, 1000));
  ASSERT_TRUE(seed_builtin_templates(*store_, 2000)) << "a second seed changes nothing";
  auto minimal = get_template(*store_, "minimal", "some-tenant");
  ASSERT_TRUE(minimal) << minimal.error().message;
  EXPECT_TRUE(minimal->tenant_id.empty());
  EXPECT_EQ(minimal->current_version, 1u);
  ASSERT_EQ(minimal->versions.size(), 1u);
  EXPECT_EQ(minimal->versions[0].worker_name, "minimal") << "every worker builds it";
  EXPECT_EQ(minimal->created_at_ms, 1000);
  auto listed = list_templates(*store_, "some-tenant", 100);
  ASSERT_TRUE(listed);
  EXPECT_EQ(listed->size(), 2u);
}

TEST_F(template_records, versions_count_up_and_only_a_ready_one_becomes_current) {
  auto first = add_template_version(*store_, "py", "t1", draft(), 10);
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_EQ(first->versions.back().version, 1u);
  EXPECT_EQ(first->versions.back().worker_name, "py_v1");
  EXPECT_EQ(first->current_version, 0u) << "building: nothing is current yet";
  auto second = add_template_version(*store_, "py", "t1", draft(), 20);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->versions.back().version, 2u);

  auto v2 = second->versions.back();
  v2.state = template_version_state::ready;
  auto saved = save_template_version(*store_, "py", v2, 30);
  ASSERT_TRUE(saved);
  EXPECT_EQ(saved->current_version, 2u);
  // An older version finishing later does not take over.
  auto v1 = saved->versions.front();
  v1.state = template_version_state::ready;
  saved = save_template_version(*store_, "py", v1, 40);
  ASSERT_TRUE(saved);
  EXPECT_EQ(saved->current_version, 2u);

  // Forgetting the current version makes the newest ready one current, and
  // numbers are never handed out twice while the record lives.
  ASSERT_TRUE(forget_template_version(*store_, "py", 2, 50));
  auto left = get_template(*store_, "py", "t1");
  ASSERT_TRUE(left);
  EXPECT_EQ(left->current_version, 1u);
  auto third = add_template_version(*store_, "py", "t1", draft(), 60);
  ASSERT_TRUE(third);
  EXPECT_EQ(third->versions.back().version, 2u)
    << "the highest number left is 1, so the next is 2 again";
  ASSERT_TRUE(forget_template_version(*store_, "py", 0, 70));
  EXPECT_EQ(get_template(*store_, "py", "t1").code(), errc::not_found);
  EXPECT_TRUE(forget_template_version(*store_, "py", 0, 80)) << "idempotent";
}

TEST_F(template_records, an_upload_cut_short_by_a_restart_fails_and_a_started_build_does_not) {
  ASSERT_TRUE(add_template_version(*store_, "cut", "t1", draft(), 10));
  auto building = add_template_version(*store_, "cut", "t1", draft(), 20);
  ASSERT_TRUE(building);
  auto started = building->versions.back();
  started.operation_id = "op_build"; // its build runs: the engine finishes it
  ASSERT_TRUE(save_template_version(*store_, "cut", started, 30));
  ASSERT_TRUE(fail_interrupted_uploads(*store_, 40));
  auto record = get_template(*store_, "cut", "t1");
  ASSERT_TRUE(record);
  EXPECT_EQ(record->find(1)->state, template_version_state::failed);
  ASSERT_TRUE(record->find(1)->error);
  EXPECT_NE(record->find(1)->error->message.find("upload the image again"), std::string::npos);
  EXPECT_EQ(record->find(2)->state, template_version_state::building);
  EXPECT_EQ(record->updated_at_ms, 40);
}

TEST_F(template_records, tenants_see_their_own_and_shared_templates_only) {
  ASSERT_TRUE(seed_builtin_templates(*store_, 1));
  ASSERT_TRUE(add_template_version(*store_, "mine", "t1", draft(), 10));
  EXPECT_TRUE(get_template(*store_, "mine", "t1"));
  EXPECT_TRUE(get_template(*store_, "mine", "")) << "an admin sees every tenant's";
  EXPECT_EQ(get_template(*store_, "mine", "t2").code(), errc::not_found);
  EXPECT_EQ(add_template_version(*store_, "mine", "t2", draft(), 20).code(), errc::not_found);
  EXPECT_EQ(add_template_version(*store_, "base", "t2", draft(), 20).code(),
            errc::permission_denied);
  auto admin = add_template_version(*store_, "base", "", draft(), 20);
  ASSERT_TRUE(admin);
  EXPECT_EQ(admin->versions.back().version, 2u);
  auto t2 = list_templates(*store_, "t2", 100);
  ASSERT_TRUE(t2);
  EXPECT_EQ(t2->size(), 2u) << "minimal and base, not t1's";
}

TEST_F(template_records, users_are_live_sandboxes_and_snapshots_of_that_version) {
  put_sandbox("sb_a", "py", 1);
  put_sandbox("sb_b", "py", 2);
  put_sandbox("sb_gone", "py", 1, schema::sandbox_state::destroyed);
  put_sandbox("sb_other", "node", 1);
  schema::snapshot_record checkpoint;
  checkpoint.id = "ckpt_1";
  checkpoint.template_name = "py";
  checkpoint.template_version = "3";
  storage::write_batch batch;
  storage::snapshot_store::stage_put(batch, checkpoint);
  ASSERT_TRUE(store_->write(batch));

  auto v1 = template_users(*store_, "py", 1, 20);
  ASSERT_TRUE(v1);
  EXPECT_EQ(*v1, std::vector<std::string>{"sb_a"});
  auto v3 = template_users(*store_, "py", 3, 20);
  ASSERT_TRUE(v3);
  EXPECT_EQ(*v3, std::vector<std::string>{"ckpt_1"});
  auto any = template_users(*store_, "py", 0, 20);
  ASSERT_TRUE(any);
  EXPECT_EQ(any->size(), 3u);
  auto bounded = template_users(*store_, "py", 0, 1);
  ASSERT_TRUE(bounded);
  EXPECT_EQ(bounded->size(), 1u);
  auto none = template_users(*store_, "node", 2, 20);
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->empty());
}

} // namespace
} // namespace airlock::actors
