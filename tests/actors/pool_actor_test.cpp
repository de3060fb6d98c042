// Warm pools (actors/pool_actor.hpp) with the real engine, registry,
// scheduler and create procedure, against the scripted node: members are
// made per worker, a claim hands one out once and the create that claims it
// goes through nd_claim, the pool refills, shrinks and survives a restart of
// its actor.

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <string>

#include "actors/pool_actor.hpp"
#include "actors/runtime_choice.hpp"
#include "actors/template_records.hpp"
#include "lifecycle_fixture.hpp"
#include "tests/support/wait.hpp"

namespace airlock::actors::test {
namespace {

using std::chrono::milliseconds;

class pool_actor_test : public lifecycle {
protected:
  pool_actor_test() {
    EXPECT_TRUE(seed_builtin_templates(*store_, clock_.now_ms()).is_ok());
    register_worker();
    pools_ = start_pools();
  }

  ~pool_actor_test() override { stop_pools(); }

  pool_actor start_pools() {
    pool_actor_deps deps;
    deps.registry = registry_;
    deps.scheduler = scheduler_;
    deps.engine = engine_;
    deps.clock = &clock_;
    deps.entropy = &entropy_;
    pool_actor_options options;
    options.tick_ms = 20;
    return spawn_pool_actor(system_, std::move(deps), options);
  }

  void stop_pools() {
    if (!pools_)
      return;
    caf::anon_send_exit(pools_, caf::exit_reason::user_shutdown);
    self_->wait_for(pools_);
    pools_ = nullptr;
  }

  pool_view set_pool(uint32_t size, uint32_t disk_mb = 0) {
    pool_view view;
    self_
      ->request(pools_, seconds(5), pl_set_atom::value, std::string("minimal"), std::string{},
                schema::pool_settings{size, 1000, 512, disk_mb})
      .receive([&view](pool_view& got) { view = got; },
               [](caf::error& error) { FAIL() << to_status(error).message; });
    return view;
  }

  pool_view pool() {
    pool_view view;
    self_->request(pools_, seconds(5), pl_get_atom::value, std::string("minimal"), std::string{})
      .receive([&view](pool_view& got) { view = got; },
               [](caf::error& error) { FAIL() << to_status(error).message; });
    return view;
  }

  /// Asks until `done` holds (a few pool passes apart) or the test's wait
  /// bound passes; whether it held.
  bool eventually(const std::function<bool(const pool_view&)>& done) {
    return airlock::test::wait_for([&] { return done(pool()); }, airlock::test::default_wait,
                                   milliseconds(20));
  }

  /// A create of tenant "t" of minimal's current version, as the API
  /// resolves it.
  schema::sandbox_record wanted(uint32_t disk_mb = 0) {
    schema::sandbox_record record;
    record.id = "sb_wanted";
    record.tenant_id = "t";
    record.state = schema::sandbox_state::creating;
    record.spec.template_name = "minimal";
    record.spec.template_version = 1;
    record.spec.template_worker_name = "minimal";
    record.spec.cpu_millis = 500;
    record.spec.memory_mb = 256;
    record.spec.disk_mb = disk_mb;
    record.spec.env = {{"MODE", "claimed"}};
    return record;
  }

  result<schema::sandbox_record> claim(const schema::sandbox_record& want) {
    result<schema::sandbox_record> out = make_status(errc::internal, "no answer");
    self_->request(pools_, seconds(5), pl_claim_atom::value, want)
      .receive([&out](schema::sandbox_record& member) { out = member; },
               [&out](caf::error& error) { out = to_status(error); });
    return out;
  }

  /// What the API does on a hit: the claim record replaces the member.
  schema::sandbox_record store_claim(const schema::sandbox_record& member) {
    auto record = wanted();
    record.id = member.id;
    record.worker_id = member.worker_id;
    record.spec.from_pool = true;
    record.spec.template_worker_id = member.spec.template_worker_id;
    schema::sandbox_record stored;
    self_->request(registry_, seconds(5), rg_claim_atom::value, record)
      .receive([&stored](schema::sandbox_record& got) { stored = got; },
               [](caf::error& error) { FAIL() << to_status(error).message; });
    return stored;
  }

  bool called(const std::string& call) {
    std::lock_guard<std::mutex> lock(script_->mutex);
    return std::find(script_->calls.begin(), script_->calls.end(), call) != script_->calls.end();
  }

  pool_actor pools_;
};

TEST_F(pool_actor_test, a_pool_fills_its_worker_and_a_claimed_member_becomes_the_creators) {
  auto set = set_pool(2);
  EXPECT_EQ(set.settings.size, 2u);
  ASSERT_TRUE(eventually([](const pool_view& v) { return v.ready == 2; }));
  EXPECT_EQ(script_->creates.load(), 2);

  auto member = claim(wanted());
  ASSERT_TRUE(member) << member.error().message;
  EXPECT_EQ(member->tenant_id, pool_tenant);
  EXPECT_EQ(member->state, schema::sandbox_state::running);
  EXPECT_EQ(member->worker_id, "wk_1");
  EXPECT_EQ(member->spec.metadata.at(pool_metadata_key), "minimal");
  EXPECT_EQ(member->spec.egress.profile, schema::egress_profile::none);
  EXPECT_EQ(member->spec.idle_timeout_s, 0u);

  auto stored = store_claim(*member);
  EXPECT_EQ(stored.tenant_id, "t");
  auto done = run(kind_sandbox_create, member->id);
  EXPECT_EQ(done.state, schema::operation_state::succeeded);
  EXPECT_TRUE(called("claim " + member->id + " for t"));
  auto now = sandbox(member->id);
  EXPECT_EQ(now.state, schema::sandbox_state::running);
  EXPECT_EQ(now.tenant_id, "t");
  EXPECT_EQ(now.spec.env.at("MODE"), "claimed");
  EXPECT_EQ(now.spec.memory_mb, 256u);

  // Handed out once; the pool makes a third member to stay at two.
  ASSERT_TRUE(eventually([](const pool_view& v) { return v.ready == 2 && v.hits_total == 1; }));
  EXPECT_EQ(script_->creates.load(), 3);
  auto again = claim(wanted());
  ASSERT_TRUE(again);
  EXPECT_NE(again->id, member->id);
}

TEST_F(pool_actor_test, a_create_that_no_member_fits_is_a_miss) {
  set_pool(1);
  ASSERT_TRUE(eventually([](const pool_view& v) { return v.ready == 1; }));
  auto other_disk = claim(wanted(2048));
  ASSERT_FALSE(other_disk);
  EXPECT_EQ(other_disk.code(), errc::not_found);
  auto older = wanted();
  older.spec.template_version = 7;
  EXPECT_FALSE(claim(older));
  auto view = pool();
  EXPECT_EQ(view.misses_total, 2u);
  EXPECT_EQ(view.hits_total, 0u);
  EXPECT_EQ(view.ready, 1u);
}

TEST_F(pool_actor_test, a_template_without_a_pool_is_neither_hit_nor_miss) {
  auto base = wanted();
  base.spec.template_name = "base";
  auto missed = claim(base);
  ASSERT_FALSE(missed);
  EXPECT_EQ(missed.code(), errc::not_found);
  EXPECT_EQ(pool().misses_total, 0u);
}

TEST_F(pool_actor_test, members_no_pool_wants_are_deleted) {
  set_pool(2);
  ASSERT_TRUE(eventually([](const pool_view& v) { return v.ready == 2; }));
  set_pool(0);
  ASSERT_TRUE(eventually([this](const pool_view& v) {
    return v.ready == 0 && v.creating == 0 && script_->destroys.load() == 2;
  }));
  EXPECT_EQ(script_->creates.load(), 2);
}

TEST_F(pool_actor_test, a_restarted_pool_actor_takes_its_members_back) {
  set_pool(2);
  ASSERT_TRUE(eventually([](const pool_view& v) { return v.ready == 2; }));
  stop_pools();
  pools_ = start_pools();
  // The settings come from the template record, the members from the
  // registry: nothing new is created.
  ASSERT_TRUE(eventually([](const pool_view& v) { return v.ready == 2; }));
  EXPECT_EQ(pool().settings.size, 2u);
  EXPECT_EQ(script_->creates.load(), 2);
  EXPECT_TRUE(claim(wanted()));
}

TEST_F(pool_actor_test, a_refused_claim_fails_the_create_and_removes_the_member) {
  set_pool(1);
  ASSERT_TRUE(eventually([](const pool_view& v) { return v.ready == 1; }));
  auto member = claim(wanted());
  ASSERT_TRUE(member);
  store_claim(*member);
  script_->claim_error = errc::wrong_state;
  auto done = run(kind_sandbox_create, member->id);
  EXPECT_EQ(done.state, schema::operation_state::failed);
  ASSERT_TRUE(done.error.has_value());
  EXPECT_NE(done.error->message.find("create the sandbox again"), std::string::npos)
    << done.error->message;
  EXPECT_TRUE(called("destroy " + member->id));
  EXPECT_EQ(sandbox(member->id).state, schema::sandbox_state::destroyed);
}

TEST_F(pool_actor_test, a_member_a_restarted_worker_no_longer_runs_is_brought_back_as_the_claim) {
  set_pool(1);
  ASSERT_TRUE(eventually([](const pool_view& v) { return v.ready == 1; }));
  auto member = claim(wanted());
  ASSERT_TRUE(member);
  store_claim(*member);
  script_->claim_error = errc::not_found;
  script_->recreate_error = errc::none;
  auto done = run(kind_sandbox_create, member->id);
  EXPECT_EQ(done.state, schema::operation_state::succeeded);
  EXPECT_TRUE(called("recreate " + member->id));
  EXPECT_EQ(sandbox(member->id).tenant_id, "t");
  // Its root gone too: the create fails and says what to do.
  ASSERT_TRUE(eventually([](const pool_view& v) { return v.ready == 1; }));
  auto lost = claim(wanted());
  ASSERT_TRUE(lost);
  store_claim(*lost);
  script_->recreate_error = errc::not_found;
  auto failed = run(kind_sandbox_create, lost->id);
  EXPECT_EQ(failed.state, schema::operation_state::failed);
  ASSERT_TRUE(failed.error.has_value());
  EXPECT_NE(failed.error->message.find("create the sandbox again"), std::string::npos);
}

TEST_F(pool_actor_test, only_a_running_member_can_be_claimed_in_the_registry) {
  add_sandbox("sb_someone");
  auto record = wanted();
  record.id = "sb_someone";
  record.spec.from_pool = true;
  errc code = errc::none;
  self_->request(registry_, seconds(5), rg_claim_atom::value, record)
    .receive([](schema::sandbox_record&) {},
             [&code](caf::error& error) { code = to_status(error).code; });
  EXPECT_EQ(code, errc::wrong_state);
}

TEST(pool_member_fits, version_disk_and_requests_must_match_limits_may_differ) {
  schema::sandbox_record member;
  member.worker_id = "wk_1";
  member.spec.template_name = "base";
  member.spec.template_version = 3;
  member.spec.disk_mb = 1024;
  member.spec.cpu_request_millis = 2;
  member.spec.memory_request_mb = 16;
  member.spec.cpu_millis = 1000;
  member.spec.memory_mb = 512;
  auto want = member;
  want.spec.cpu_request_millis = 0; // the default a member got
  want.spec.memory_request_mb = 0;
  want.spec.cpu_millis = 2000;
  want.spec.memory_mb = 128;
  EXPECT_TRUE(member_fits(member, want));
  auto other = want;
  other.spec.template_version = 2;
  EXPECT_FALSE(member_fits(member, other));
  other = want;
  other.spec.disk_mb = 2048;
  EXPECT_FALSE(member_fits(member, other));
  other = want;
  other.spec.memory_request_mb = 64;
  EXPECT_FALSE(member_fits(member, other));
  other = want;
  other.spec.from_checkpoint = "ckpt_x";
  EXPECT_FALSE(member_fits(member, other));
  other = want;
  other.spec.template_worker_id = "wk_2";
  EXPECT_FALSE(member_fits(member, other));
  other = want;
  set_runtime(other.spec, microvm_runtime_name);
  EXPECT_FALSE(member_fits(member, other)) << "a VM is not a namespace member";
}

TEST(pool_member_fits, a_vm_member_fits_only_its_memory_and_vcpus) {
  schema::sandbox_record member;
  member.spec.template_name = "vm";
  member.spec.template_version = 1;
  member.spec.cpu_millis = 1000;
  member.spec.memory_mb = 256;
  set_runtime(member.spec, microvm_runtime_name);
  auto want = member;
  want.spec.cpu_millis = 500; // one vCPU still, less of its time
  EXPECT_TRUE(member_fits(member, want));
  auto other = want;
  other.spec.memory_mb = 512;
  EXPECT_FALSE(member_fits(member, other)) << "a VM's memory is fixed at boot";
  other = want;
  other.spec.cpu_millis = 2000;
  EXPECT_FALSE(member_fits(member, other)) << "and so are its vCPUs";
  other = want;
  set_runtime(other.spec, namespace_runtime_name);
  EXPECT_FALSE(member_fits(member, other));
}

} // namespace
} // namespace airlock::actors::test
