// The E2B REST surface (/e2b/) against the real daemon, with the requests
// the e2b SDK sends (docs/e2b.md): X-API-Key auth, create with metadata and
// env, get, list with the SDK's metadata filter and paging, setTimeout ending
// the sandbox, pause (airlock's suspend) and connect bringing it back with its
// files, kill, snapshots, fork, metrics, E2B's error shape ({"code": status,
// "message"}).

#include <set>
#include <string>
#include <thread>

#include "schema/base64.hpp"
#include "tests/api/e2b_fixture.hpp"
#include "tests/support/wait.hpp"

namespace airlock::test {
namespace {

TEST_F(api_e2b, create_answers_the_running_sandbox_with_metadata_and_env_applied) {
  auto created = e2b("POST", "/v2/sandboxes",
                     {{"templateID", "minimal"},
                      {"timeout", 600},
                      {"metadata", {{"suite", "e2b-create"}}},
                      {"envVars", {{"GREETING", "hello from e2b"}}}});
  ASSERT_EQ(created.status, 201) << created.body;
  const auto id = created.json.value("sandboxID", "");
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(created.json["templateID"], "minimal");
  EXPECT_EQ(created.json["envdVersion"], "0.6.4");
  EXPECT_EQ(created.json["domain"], e2b_test_domain)
    << "the daemon's --e2b-domain, never one of E2B's (the SDK would send envd traffic there)";

  auto api = admin();
  auto mine = api.get("/v1/sandboxes/" + id);
  EXPECT_EQ(mine.json["state"], "running") << "201 comes once it runs";
  EXPECT_EQ(mine.json["metadata"]["suite"], "e2b-create");
  EXPECT_EQ(mine.json["max_lifetime_s"], 600) << "E2B's timeout is the sandbox's lifetime";
  auto greeting = api.run(id, "echo \"$GREETING\"");
  EXPECT_EQ(greeting.stdout_bytes, "hello from e2b\n");

  auto detail = e2b("GET", "/sandboxes/" + id);
  ASSERT_EQ(detail.status, 200) << detail.body;
  EXPECT_EQ(detail.json["state"], "running");
  EXPECT_EQ(detail.json["metadata"]["suite"], "e2b-create");
  EXPECT_EQ(detail.json["lifecycle"]["onTimeout"], "kill");
  EXPECT_FALSE(detail.json.value("startedAt", "").empty());
  EXPECT_GT(detail.json.value("endAt", ""), detail.json.value("startedAt", ""));
  EXPECT_EQ(e2b("DELETE", "/sandboxes/" + id).status, 204);
}

TEST_F(api_e2b, errors_have_e2b_shape_and_say_what_to_do) {
  auto no_key = as("").call("GET", "/e2b/sandboxes/sb_nope");
  expect_e2b_error(no_key, 401);
  expect_e2b_error(e2b("GET", "/sandboxes/sb_nope", nullptr, "ak_wrong"), 401);
  expect_e2b_error(e2b("GET", "/sandboxes/sb_nope"), 404);
  expect_e2b_error(e2b("DELETE", "/sandboxes/sb_nope"), 404);
  expect_e2b_error(e2b("POST", "/v2/sandboxes", json{{"timeout", 60}}), 400);
  expect_e2b_error(e2b("POST", "/v2/sandboxes", json{{"templateID", "minimal"}, {"timeout", 0}}),
                   400);
  auto volumes =
    e2b("POST", "/v2/sandboxes",
        {{"templateID", "minimal"}, {"volumeMounts", {{{"name", "v"}, {"path", "/v"}}}}});
  expect_e2b_error(volumes, 400);
  EXPECT_NE(volumes.json.value("message", "").find("volumeMounts"), std::string::npos);
  expect_e2b_error(e2b("POST", "/v2/sandboxes", json{{"templateID", "no-such-template"}}), 404);
}

TEST_F(api_e2b, list_filters_by_metadata_as_the_sdk_encodes_it_and_pages) {
  const json tag = {{"suite", "e2b list"}, {"run", "a&b=c"}};
  std::set<std::string> made;
  for (int i = 0; i < 2; ++i)
    made.insert(create({{"templateID", "minimal"}, {"metadata", tag}}));
  auto other = create({{"templateID", "minimal"}, {"metadata", {{"suite", "other"}}}});
  // The SDK percent-encodes each key and value, joins them as a form and
  // sends the form as one value: metadata=run%3Da%2526b%253Dc%26suite%3De2b%2520list.
  const std::string filter = "run%3Da%2526b%253Dc%26suite%3De2b%2520list";
  std::set<std::string> listed;
  std::string token;
  for (int page = 0; page < 5; ++page) {
    auto reply = e2b("GET", "/v2/sandboxes?metadata=" + filter + "&state=running&limit=1"
                              + (token.empty() ? "" : "&nextToken=" + token));
    ASSERT_EQ(reply.status, 200) << reply.body;
    for (const auto& item : reply.json) {
      listed.insert(item["sandboxID"].get<std::string>());
      EXPECT_EQ(item["state"], "running");
      EXPECT_EQ(item["metadata"], tag);
    }
    token = reply.headers["x-next-token"];
    if (token.empty())
      break;
  }
  EXPECT_EQ(listed, made) << "both of ours, over pages of one, and not the other";
  for (const auto& id : made)
    EXPECT_EQ(e2b("DELETE", "/sandboxes/" + id).status, 204);
  EXPECT_EQ(e2b("DELETE", "/sandboxes/" + other).status, 204);
}

TEST_F(api_e2b, set_timeout_ends_the_sandbox_when_it_passes) {
  auto id = create({{"templateID", "minimal"}, {"timeout", 3600}});
  ASSERT_FALSE(id.empty());
  expect_e2b_error(e2b("POST", "/sandboxes/" + id + "/timeout", json::object()), 400);
  ASSERT_EQ(e2b("POST", "/sandboxes/" + id + "/timeout", json{{"timeout", 2}}).status, 204);
  auto api = admin();
  EXPECT_LT(api.get("/v1/sandboxes/" + id).json.value("max_lifetime_s", 0), 3600);
  EXPECT_TRUE(wait_for([&] { return e2b("GET", "/sandboxes/" + id).status == 404; },
                       std::chrono::seconds(90), std::chrono::milliseconds(200)))
    << "gone once its new timeout passed";
  // E2B stops showing it when its delete starts; /v1 shows the delete end.
  EXPECT_TRUE(wait_for([&] { return api.get("/v1/sandboxes/" + id).json["state"] == "destroyed"; },
                       std::chrono::seconds(60), std::chrono::milliseconds(100)))
    << api.get("/v1/sandboxes/" + id).body;
}

TEST_F(api_e2b, refresh_keeps_a_sandbox_alive_at_least_that_long_and_never_shortens_it) {
  auto api = admin();
  auto long_lived = create({{"templateID", "minimal"}, {"timeout", 3600}});
  ASSERT_FALSE(long_lived.empty());
  EXPECT_EQ(e2b("POST", "/sandboxes/" + long_lived + "/refreshes", json{{"duration", 60}}).status,
            204);
  EXPECT_EQ(api.get("/v1/sandboxes/" + long_lived).json.value("max_lifetime_s", 0), 3600)
    << "a later end stays";
  auto short_lived = create({{"templateID", "minimal"}, {"timeout", 30}});
  ASSERT_FALSE(short_lived.empty());
  EXPECT_EQ(e2b("POST", "/sandboxes/" + short_lived + "/refreshes", json{{"duration", 600}}).status,
            204);
  EXPECT_GE(api.get("/v1/sandboxes/" + short_lived).json.value("max_lifetime_s", 0), 600);
  expect_e2b_error(
    e2b("POST", "/sandboxes/" + short_lived + "/refreshes", json{{"duration", 4000}}), 400);
  expect_e2b_error(e2b("POST", "/sandboxes/sb_missing/refreshes", json::object()), 404);
  EXPECT_EQ(e2b("DELETE", "/sandboxes/" + long_lived).status, 204);
  EXPECT_EQ(e2b("DELETE", "/sandboxes/" + short_lived).status, 204);
}

TEST_F(api_e2b, network_settings_become_the_sandboxes_egress_policy) {
  auto api = admin();
  auto id = create({{"templateID", "minimal"},
                    {"network", {{"denyOut", {"0.0.0.0/0"}}, {"allowOut", {"pypi.org"}}}}});
  ASSERT_FALSE(id.empty());
  auto egress = [&] { return api.get("/v1/sandboxes/" + id).json["egress"]; };
  EXPECT_EQ(egress()["profile"], "allowlist") << egress();
  EXPECT_EQ(egress()["allow"], json::array({"pypi.org"}));

  auto put = [&](const json& body) { return e2b("PUT", "/sandboxes/" + id + "/network", body); };
  EXPECT_EQ(put({{"denyOut", {"0.0.0.0/0"}}}).status, 204);
  EXPECT_EQ(egress()["profile"], "none") << "deny everything, allow nothing";
  EXPECT_EQ(put({{"denyOut", {"0.0.0.0/0"}}, {"allowOut", {"*.example.com"}}}).status, 204);
  EXPECT_EQ(egress()["allow"], json::array({"*.example.com"}));
  EXPECT_EQ(put({{"allow_internet_access", false}}).status, 204);
  EXPECT_EQ(egress()["profile"], "none");

  auto deny_some = put({{"denyOut", {"10.0.0.0/8"}}});
  expect_e2b_error(deny_some, 400);
  EXPECT_NE(deny_some.json.value("message", "").find("deny list"), std::string::npos);
  expect_e2b_error(put({{"denyOut", {"0.0.0.0/0"}}, {"allowOut", {"1.2.3.4/32"}}}), 400);
  expect_e2b_error(put({{"egressProxy", {{"address", "proxy:8080"}}}}), 400);
  EXPECT_EQ(egress()["profile"], "none") << "a refused update changes nothing";
  expect_e2b_error(e2b("PUT", "/sandboxes/sb_missing/network", json::object()), 404);
  expect_e2b_error(e2b("GET", "/sandboxes/" + id + "/logs"), 501);
  EXPECT_EQ(e2b("DELETE", "/sandboxes/" + id).status, 204);
}

TEST_F(api_e2b, connect_with_a_timeout_sets_it_from_now) {
  auto id = create({{"templateID", "minimal"}, {"timeout", 3600}});
  ASSERT_FALSE(id.empty());
  expect_e2b_error(e2b("POST", "/v2/sandboxes/" + id + "/connect", json{{"timeout", -1}}), 400);
  auto connected = e2b("POST", "/v2/sandboxes/" + id + "/connect", json{{"timeout", 2}});
  ASSERT_EQ(connected.status, 200) << connected.body;
  EXPECT_LT(admin().get("/v1/sandboxes/" + id).json.value("max_lifetime_s", 0), 3600);
  EXPECT_TRUE(wait_for([&] { return e2b("GET", "/sandboxes/" + id).status == 404; },
                       std::chrono::seconds(90), std::chrono::milliseconds(200)))
    << "gone once the timeout given at connect passed";
}

TEST_F(api_e2b, pause_then_connect_brings_it_back_with_its_files) {
  auto id = create({{"templateID", "minimal"}});
  ASSERT_FALSE(id.empty());
  auto api = admin();
  auto put = api.call("PUT", "/v1/sandboxes/" + id + "/files?path=/root/kept.txt", "still here");
  ASSERT_EQ(put.status / 100, 2) << put.body;

  EXPECT_EQ(e2b("POST", "/sandboxes/" + id + "/pause", json::object()).status, 204);
  EXPECT_EQ(e2b("GET", "/sandboxes/" + id).json["state"], "paused");
  expect_e2b_error(e2b("POST", "/sandboxes/" + id + "/pause", json::object()), 409);

  auto resumed = e2b("POST", "/v2/sandboxes/" + id + "/connect", json{{"timeout", 300}});
  EXPECT_EQ(resumed.status, 201) << "resumed: " << resumed.body;
  EXPECT_EQ(resumed.json["sandboxID"], id);
  EXPECT_EQ(api.get("/v1/sandboxes/" + id).json["state"], "running");
  EXPECT_EQ(api.run(id, "cat /root/kept.txt").stdout_bytes, "still here");
  auto again = e2b("POST", "/v2/sandboxes/" + id + "/connect", json::object());
  EXPECT_EQ(again.status, 200) << "already running: " << again.body;

  EXPECT_EQ(e2b("DELETE", "/sandboxes/" + id).status, 204);
  expect_e2b_error(e2b("GET", "/sandboxes/" + id), 404);
  expect_e2b_error(e2b("DELETE", "/sandboxes/" + id), 404);
}

TEST_F(api_e2b, snapshots_are_checkpoints_that_sandboxes_start_from_and_that_list_and_delete) {
  auto id = create({{"templateID", "minimal"}});
  ASSERT_FALSE(id.empty());
  auto api = admin();
  ASSERT_EQ(
    api.call("PUT", "/v1/sandboxes/" + id + "/files?path=/root/snap.txt", "in the snapshot").status
      / 100,
    2);
  auto snapshot = e2b("POST", "/sandboxes/" + id + "/snapshots", json{{"name", "snap-one"}});
  ASSERT_EQ(snapshot.status, 201) << snapshot.body;
  const auto snapshot_id = snapshot.json.value("snapshotID", "");
  EXPECT_TRUE(snapshot_id.starts_with("ckpt_")) << snapshot.body;
  EXPECT_EQ(snapshot.json["names"], json::array({"snap-one"}));
  EXPECT_EQ(api.get("/v1/checkpoints/" + snapshot_id).json.value("sandbox_id", ""), id);
  expect_e2b_error(e2b("POST", "/sandboxes/sb_missing/snapshots", json::object()), 404);

  auto ids_of = [](const json& listed) {
    std::set<std::string> ids;
    for (const auto& item : listed)
      ids.insert(item.value("snapshotID", ""));
    return ids;
  };
  auto of_sandbox = e2b("GET", "/snapshots?sandboxID=" + id);
  ASSERT_EQ(of_sandbox.status, 200) << of_sandbox.body;
  EXPECT_EQ(ids_of(of_sandbox.json), std::set<std::string>{snapshot_id});
  auto second = e2b("POST", "/sandboxes/" + id + "/snapshots", json::object());
  ASSERT_EQ(second.status, 201) << second.body;
  EXPECT_EQ(second.json["names"], json::array());
  auto first_page = e2b("GET", "/snapshots?limit=1&sandboxID=" + id);
  ASSERT_EQ(first_page.json.size(), 1u) << first_page.body;
  EXPECT_EQ(first_page.json[0]["snapshotID"], second.json["snapshotID"]) << "newest first";
  ASSERT_TRUE(first_page.headers.contains("x-next-token"));
  auto next_page = e2b("GET", "/snapshots?limit=1&sandboxID=" + id
                                + "&nextToken=" + first_page.headers["x-next-token"]);
  ASSERT_EQ(next_page.json.size(), 1u) << next_page.body;
  EXPECT_EQ(next_page.json[0]["snapshotID"], snapshot_id);
  EXPECT_TRUE(ids_of(e2b("GET", "/snapshots").json).contains(snapshot_id)) << "all sandboxes'";
  expect_e2b_error(e2b("GET", "/snapshots?limit=0"), 400);

  // The sandbox goes; its snapshot stays and starts a new one with its files.
  ASSERT_EQ(e2b("DELETE", "/sandboxes/" + id).status, 204);
  auto from_snapshot = create({{"templateID", snapshot_id}});
  ASSERT_FALSE(from_snapshot.empty());
  EXPECT_EQ(api.run(from_snapshot, "cat /root/snap.txt").stdout_bytes, "in the snapshot");
  EXPECT_EQ(e2b("DELETE", "/sandboxes/" + from_snapshot).status, 204);

  EXPECT_EQ(e2b("DELETE", "/templates/" + snapshot_id).status, 204);
  expect_e2b_error(e2b("DELETE", "/templates/" + snapshot_id), 404);
  EXPECT_FALSE(ids_of(e2b("GET", "/snapshots").json).contains(snapshot_id));
}

TEST_F(api_e2b, fork_answers_each_new_sandbox_with_its_token_files_and_timeout) {
  auto id = create({{"templateID", "minimal"}, {"timeout", 3600}});
  ASSERT_FALSE(id.empty());
  auto api = admin();
  ASSERT_EQ(
    api.call("PUT", "/v1/sandboxes/" + id + "/files?path=/root/fork.txt", "before the fork").status
      / 100,
    2);
  auto forked = e2b("POST", "/sandboxes/" + id + "/fork", json{{"count", 2}, {"timeout", 600}});
  ASSERT_EQ(forked.status, 201) << forked.body;
  ASSERT_TRUE(forked.json.is_array());
  ASSERT_EQ(forked.json.size(), 2u) << forked.body;
  std::set<std::string> forks;
  for (const auto& entry : forked.json) {
    ASSERT_TRUE(entry.contains("sandbox")) << entry.dump();
    const auto fork_id = entry["sandbox"].value("sandboxID", "");
    EXPECT_FALSE(entry["sandbox"].value("envdAccessToken", "").empty());
    EXPECT_NE(fork_id, id);
    forks.insert(fork_id);
    EXPECT_EQ(api.run(fork_id, "cat /root/fork.txt").stdout_bytes, "before the fork");
    auto lifetime = api.get("/v1/sandboxes/" + fork_id).json.value("max_lifetime_s", 0);
    EXPECT_GT(lifetime, 0);
    EXPECT_LE(lifetime, 600 + 60) << "times out 600 s from now, not the source's 3600";
  }
  EXPECT_EQ(forks.size(), 2u);
  EXPECT_EQ(api.get("/v1/sandboxes/" + id).json["state"], "running") << "the source runs on";
  expect_e2b_error(e2b("POST", "/sandboxes/" + id + "/fork", json{{"count", 0}}), 400);
  expect_e2b_error(e2b("POST", "/sandboxes/sb_missing/fork", json::object()), 404);
  for (const auto& fork_id : forks)
    EXPECT_EQ(e2b("DELETE", "/sandboxes/" + fork_id).status, 204);
  EXPECT_EQ(e2b("DELETE", "/sandboxes/" + id).status, 204);
}

TEST_F(api_e2b, metrics_report_cpu_memory_and_disk_now_and_usage_is_not_activity) {
  auto id = create({{"templateID", "minimal"}});
  ASSERT_FALSE(id.empty());
  auto api = admin();
  auto sandbox = api.get("/v1/sandboxes/" + id).json;
  // A busy loop: the CPU share over the reading's window is well above idle.
  auto spin = api.call("POST", "/v1/sandboxes/" + id + "/processes",
                       json{{"cmd", "while :; do :; done"}}.dump());
  ASSERT_EQ(spin.status, 201) << spin.body;
  const auto active_before = api.get("/v1/sandboxes/" + id).json["last_active_at"];

  auto usage = api.get("/v1/sandboxes/" + id + "/usage");
  ASSERT_EQ(usage.status, 200) << usage.body;
  EXPECT_GT(usage.json.value("cpu_usage_ns", uint64_t{0}), 0u);
  EXPECT_GT(usage.json.value("memory_bytes", uint64_t{0}), 0u);
  EXPECT_GE(usage.json.value("processes", uint64_t{0}), 2u) << "the agent and the loop";
  EXPECT_TRUE(usage.json["sampled_at"].is_string());
  EXPECT_EQ(api.get("/v1/sandboxes/" + id).json["last_active_at"], active_before)
    << "reading usage is not activity";

  const auto before_s = std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  // The share is over the reading's window, which may begin before the loop
  // did, and a loaded host gives the loop less: read again, within a bound,
  // until the loop shows.
  auto metrics = e2b("GET", "/sandboxes/" + id + "/metrics");
  wait_for(
    [&] {
      if (metrics.status == 200 && metrics.json.size() == 1
          && metrics.json[0].value("cpuUsedPct", 0.0) > 5.0)
        return true;
      metrics = e2b("GET", "/sandboxes/" + id + "/metrics");
      return false;
    },
    std::chrono::milliseconds(30'000), std::chrono::milliseconds(200));
  ASSERT_EQ(metrics.status, 200) << metrics.body;
  ASSERT_EQ(metrics.json.size(), 1u) << metrics.body;
  const auto& metric = metrics.json[0];
  EXPECT_GT(metric.value("cpuUsedPct", 0.0), 5.0) << "a busy loop runs: " << metrics.body;
  EXPECT_LE(metric.value("cpuUsedPct", 0.0), 100.5);
  EXPECT_EQ(metric.value("cpuCount", 0),
            std::max(1, (sandbox.value("cpu_millis", 0) + 999) / 1000));
  EXPECT_GT(metric.value("memUsed", int64_t{0}), 0);
  EXPECT_EQ(metric.value("memTotal", int64_t{0}), sandbox.value("memory_mb", int64_t{0}) << 20);
  EXPECT_EQ(metric.value("diskTotal", int64_t{0}), sandbox.value("disk_mb", int64_t{0}) << 20);
  EXPECT_NEAR(metric.value("timestampUnix", int64_t{0}), before_s, 60);
  EXPECT_TRUE(metric["timestamp"].is_string());

  EXPECT_EQ(e2b("GET", "/sandboxes/" + id + "/metrics?start=1&end=2").json, json::array())
    << "no reading in a window long past";
  expect_e2b_error(e2b("GET", "/sandboxes/" + id + "/metrics?start=soon"), 400);
  expect_e2b_error(e2b("GET", "/sandboxes/sb_missing/metrics"), 404);
  ASSERT_EQ(e2b("POST", "/sandboxes/" + id + "/pause", json::object()).status, 204);
  EXPECT_EQ(e2b("GET", "/sandboxes/" + id + "/metrics").json, json::array()) << "paused: none";
  EXPECT_EQ(e2b("DELETE", "/sandboxes/" + id).status, 204);
}

} // namespace
} // namespace airlock::test
