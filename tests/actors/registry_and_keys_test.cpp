// The sandbox registry's per-state counts (kept as records are written,
// counted once at start) and the API-key actor that authenticates requests
// apart from the registry.
#include <caf/all.hpp>
#include <gtest/gtest.h>

#include "actors/api_key_actor.hpp"
#include "actors/cluster_protocol.hpp"
#include "actors/errors.hpp"
#include "actors/messages.hpp"
#include "actors/runtime_choice.hpp"
#include "actors/sandbox_registry.hpp"
#include "actors/system_config.hpp"
#include "storage/kv_store.hpp"
#include "storage/sandbox_store.hpp"
#include "storage/write_batch.hpp"
#include "tests/actors/live_actors_fixture.hpp"

namespace airlock::actors {
namespace {

using counts = std::map<std::string, uint64_t>;
using schema::sandbox_state;

schema::sandbox_record sandbox(std::string id, sandbox_state state = sandbox_state::creating) {
  schema::sandbox_record record;
  record.id = std::move(id);
  record.tenant_id = "acme";
  record.state = state;
  return record;
}

class registry_and_keys : public live_actors_test {
protected:
  void spawn() {
    registry = own(spawn_sandbox_registry(system, *store, clock));
    keys = own(spawn_api_key_actor(system, *store, clock));
  }

  counts count() {
    auto counted = ask<counts>(registry, rg_count_atom::value);
    EXPECT_TRUE(counted) << counted.error().message;
    return counted ? *counted : counts{};
  }

  sandbox_registry_actor registry;
  api_key_actor keys;
};

TEST_F(registry_and_keys, counts_start_from_the_stored_records_and_follow_every_write) {
  storage::write_batch batch;
  storage::sandbox_store::stage_put(batch, sandbox("sb_a", sandbox_state::running));
  storage::sandbox_store::stage_put(batch, sandbox("sb_b", sandbox_state::running));
  storage::sandbox_store::stage_put(batch, sandbox("sb_c", sandbox_state::paused));
  ASSERT_TRUE(store->write(batch, storage::durability::synced).is_ok());
  spawn();
  EXPECT_EQ(count(), (counts{{"paused", 1}, {"running", 2}}));

  ASSERT_TRUE(ask<schema::sandbox_record>(registry, rg_create_atom::value, sandbox("sb_d")));
  // A second create of the same id changes nothing.
  ASSERT_TRUE(ask<schema::sandbox_record>(registry, rg_create_atom::value, sandbox("sb_d")));
  EXPECT_EQ(count(), (counts{{"creating", 1}, {"paused", 1}, {"running", 2}}));

  ASSERT_TRUE(ask<schema::sandbox_record>(registry, rg_save_atom::value,
                                          sandbox("sb_d", sandbox_state::running)));
  ASSERT_TRUE(ask<schema::sandbox_record>(registry, rg_save_atom::value,
                                          sandbox("sb_c", sandbox_state::destroyed)));
  // A state left empty drops out of the reply, as a scan would leave it out.
  EXPECT_EQ(count(), (counts{{"destroyed", 1}, {"running", 3}}));

  sandbox_patch patch;
  patch.idle_timeout_s = 60;
  ASSERT_TRUE(ask<schema::sandbox_record>(registry, rg_patch_atom::value, std::string("sb_a"),
                                          std::string("acme"), patch));
  EXPECT_EQ(count(), (counts{{"destroyed", 1}, {"running", 3}}));
}

TEST_F(registry_and_keys, a_metadata_patch_keeps_the_sandboxs_runtime) {
  spawn();
  auto vm = sandbox("sb_vm", sandbox_state::running);
  vm.spec.metadata = {{"owner", "ann"}};
  set_runtime(vm.spec, microvm_runtime_name);
  ASSERT_TRUE(ask<schema::sandbox_record>(registry, rg_create_atom::value, vm));
  auto patch_metadata = [this](std::string id, std::map<std::string, std::string> metadata) {
    sandbox_patch patch;
    patch.metadata = std::move(metadata);
    return ask<schema::sandbox_record>(registry, rg_patch_atom::value, std::move(id),
                                       std::string("acme"), patch);
  };
  // The caller's map replaces the rest; the runtime is not the caller's to drop.
  auto patched = patch_metadata("sb_vm", {{"owner", "bob"}});
  ASSERT_TRUE(patched) << patched.error().message;
  EXPECT_EQ(runtime_of(patched->spec), "microvm");
  EXPECT_EQ(patched->spec.metadata.at("owner"), "bob");
  // Nor to give one to a namespace sandbox.
  ASSERT_TRUE(ask<schema::sandbox_record>(registry, rg_create_atom::value,
                                          sandbox("sb_ns", sandbox_state::running)));
  patched = patch_metadata("sb_ns", {{runtime_metadata_key, "microvm"}});
  ASSERT_TRUE(patched) << patched.error().message;
  EXPECT_EQ(runtime_of(patched->spec), "namespace");
  EXPECT_TRUE(patched->spec.metadata.empty());
}

TEST_F(registry_and_keys, a_created_key_authenticates_its_tenant_and_a_wrong_one_does_not) {
  spawn();
  auto key = ask<std::string>(keys, key_create_atom::value, std::string("acme"));
  ASSERT_TRUE(key) << key.error().message;
  auto who = ask<caller_identity>(keys, key_auth_atom::value, *key);
  ASSERT_TRUE(who) << who.error().message;
  EXPECT_EQ(who->tenant_id, "acme");
  EXPECT_FALSE(who->admin);

  auto wrong = *key;
  wrong.back() = wrong.back() == '0' ? '1' : '0';
  EXPECT_EQ(ask<caller_identity>(keys, key_auth_atom::value, wrong).code(), errc::unauthenticated);
  EXPECT_EQ(ask<caller_identity>(keys, key_auth_atom::value, std::string("nonsense")).code(),
            errc::unauthenticated);
  EXPECT_EQ(ask<std::string>(keys, key_create_atom::value, std::string("admin")).code(),
            errc::invalid_argument);
}

} // namespace
} // namespace airlock::actors
