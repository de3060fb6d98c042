// Warm pools through the API with the real daemon: a pool fills, a create
// that matches claims a member (the member's id becomes the sandbox's, its
// hostname already is; the creator's tenant, env, metadata, egress and
// limits apply), the pool refills, creates that do not fit are misses, the
// figures show in /metrics, a pooled template cannot be deleted, and a pool
// survives a kill -9 of the daemon.

#include <set>
#include <string>

#include "tests/api/api_fixture.hpp"
#include "tests/support/wait.hpp"

namespace airlock::test {
namespace {

using nlohmann::json;

class api_pools : public api_suite {
protected:
  static json pool(const api_client& api) {
    auto got = api.get("/v1/templates/minimal/pool");
    EXPECT_EQ(got.status, 200) << got.body;
    return got.json;
  }

  /// Waits (bounded) until the pool has `ready` members ready.
  static bool ready(const api_client& api, uint64_t want) {
    return wait_for([&] { return pool(api)["ready"].get<uint64_t>() == want; }, wait_max,
                    milliseconds(100));
  }

  /// The ids of the pool's running members, as an admin lists them.
  static std::set<std::string> members(const api_client& api) {
    auto listed = api.get("/v1/sandboxes?state=running&metadata.airlock.pool=minimal");
    EXPECT_EQ(listed.status, 200) << listed.body;
    std::set<std::string> ids;
    for (const auto& item : listed.json["items"])
      ids.insert(item["id"].get<std::string>());
    return ids;
  }

  static api_client tenant(const std::string& name) {
    auto key = admin().post("/v1/api-keys", {{"tenant_id", name}});
    EXPECT_EQ(key.status, 201) << key.body;
    return as(key.json["api_key"].get<std::string>());
  }

  static json set_pool(const api_client& api, const json& body) {
    auto set = api.call("PUT", "/v1/templates/minimal/pool", body.dump());
    EXPECT_EQ(set.status, 200) << set.body;
    return set.json;
  }
};

TEST_F(api_pools, a_matching_create_claims_a_warm_member_and_the_pool_refills) {
  auto api = admin();
  auto set = set_pool(api, {{"size", 2}, {"cpu_millis", 100}, {"memory_mb", 128}});
  EXPECT_EQ(set["size"], 2);
  EXPECT_EQ(set["memory_mb"], 128);
  ASSERT_TRUE(ready(api, 2)) << pool(api).dump();
  auto warm = members(api);
  ASSERT_EQ(warm.size(), 2u);
  EXPECT_EQ(api.get("/v1/templates/minimal").json["pool"]["ready"], 2);

  auto user = tenant("pool-user");
  auto created = user.create(small_spec({{"memory_mb", 256},
                                         {"env", {{"WHO", "pool-user"}}},
                                         {"metadata", {{"team", "blue"}}},
                                         {"egress", {{"profile", "none"}}}}));
  ASSERT_EQ(created.status, 202) << created.body;
  const auto id = created.json["sandbox_id"].get<std::string>();
  EXPECT_EQ(warm.count(id), 1u) << id << " is not one of the warm members";
  auto done = user.wait_operation(created.json["operation_id"]);
  ASSERT_EQ(done["state"], "succeeded") << done.dump();

  auto sandbox = user.get("/v1/sandboxes/" + id);
  ASSERT_EQ(sandbox.status, 200) << sandbox.body;
  EXPECT_EQ(sandbox.json["state"], "running");
  EXPECT_EQ(sandbox.json["memory_mb"], 256);
  EXPECT_EQ(sandbox.json["metadata"], json({{"team", "blue"}})) << "no pool metadata is left";
  EXPECT_EQ(user.run(id, "hostname").stdout_bytes, id + "\n");
  EXPECT_EQ(user.run(id, "echo $WHO").stdout_bytes, "pool-user\n")
    << "env applies to processes started after the claim";
  // Another tenant cannot see it; the pool no longer counts it.
  EXPECT_EQ(tenant("someone-else").get("/v1/sandboxes/" + id).status, 404);
  EXPECT_EQ(members(api).count(id), 0u);

  ASSERT_TRUE(ready(api, 2)) << "the pool refills: " << pool(api).dump();
  auto figures = pool(api);
  EXPECT_EQ(figures["hits_total"], 1);
  auto metrics = api.get("/metrics");
  EXPECT_NE(metrics.body.find("airlock_pool_hits_total{template=\"minimal\"} 1"),
            std::string::npos);
  EXPECT_NE(metrics.body.find("airlock_pool_ready{template=\"minimal\"} 2"), std::string::npos);
  EXPECT_NE(metrics.body.find("airlock_pool_refill_seconds_count"), std::string::npos);

  // A create the members do not fit (another disk limit) starts its own.
  auto other = user.create(small_spec({{"disk_mb", 256}}));
  ASSERT_EQ(other.status, 202) << other.body;
  EXPECT_EQ(members(api).count(other.json["sandbox_id"].get<std::string>()), 0u);
  EXPECT_EQ(user.wait_operation(other.json["operation_id"])["state"], "succeeded");
  EXPECT_EQ(pool(api)["misses_total"], 1);
}

TEST_F(api_pools, a_pooled_template_is_not_deleted_and_a_shrunk_pool_lets_its_members_go) {
  auto api = admin();
  set_pool(api, {{"size", 1}, {"cpu_millis", 100}, {"memory_mb", 128}});
  ASSERT_TRUE(ready(api, 1));
  auto refused = api.call("DELETE", "/v1/templates/minimal");
  EXPECT_EQ(refused.status, 409) << refused.body;
  EXPECT_NE(refused.body.find("size to 0"), std::string::npos) << refused.body;
  set_pool(api, {{"size", 0}});
  ASSERT_TRUE(wait_for([&] { return members(api).empty(); }, wait_max, milliseconds(100)));
  EXPECT_EQ(pool(api)["ready"], 0);
}

TEST_F(api_pools, a_tenant_sets_no_pool_on_a_shared_template_and_bad_sizes_are_refused) {
  auto user = tenant("pool-tenant");
  auto refused = user.call("PUT", "/v1/templates/minimal/pool", R"({"size": 1})");
  EXPECT_EQ(refused.status, 403) << refused.body;
  auto api = admin();
  EXPECT_EQ(api.call("PUT", "/v1/templates/minimal/pool", R"({"size": 65})").status, 400);
  EXPECT_EQ(api.call("PUT", "/v1/templates/minimal/pool", R"({})").status, 400);
  EXPECT_EQ(api.call("PUT", "/v1/templates/minimal/pool", R"({"size": 1, "memory_mb": 1})").status,
            400);
  EXPECT_EQ(api.call("PUT", "/v1/templates/no-such/pool", R"({"size": 1})").status, 404);
  EXPECT_EQ(api.get("/v1/templates/no-such/pool").status, 404);
  // '_' starts the platform's own tenants: no key is made for one.
  EXPECT_EQ(api.post("/v1/api-keys", {{"tenant_id", "_pool"}}).status, 400);
}

TEST_F(api_pools, a_pool_survives_a_kill_of_the_daemon) {
  auto api = admin();
  set_pool(api, {{"size", 2}, {"cpu_millis", 100}, {"memory_mb", 128}});
  ASSERT_TRUE(ready(api, 2));
  std::string error;
  ASSERT_TRUE(restart_server(serve_process::stop_kind::sigkill, error)) << error;
  auto again = admin();
  EXPECT_EQ(pool(again)["size"], 2);
  ASSERT_TRUE(ready(again, 2)) << pool(again).dump();
  auto created = again.create(small_spec());
  ASSERT_EQ(created.status, 202) << created.body;
  auto done = again.wait_operation(created.json["operation_id"]);
  ASSERT_EQ(done["state"], "succeeded") << done.dump();
  EXPECT_EQ(pool(again)["hits_total"], 1);
  const auto id = created.json["sandbox_id"].get<std::string>();
  EXPECT_EQ(again.run(id, "echo alive").stdout_bytes, "alive\n");
}

} // namespace
} // namespace airlock::test
