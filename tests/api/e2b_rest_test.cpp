// The E2B REST surface (/e2b/) and envd's basic calls against the real
// daemon, with the requests the e2b SDK sends (docs/e2b.md): X-API-Key auth,
// create with metadata and env, get, list with the SDK's metadata filter and
// paging, setTimeout ending the sandbox, pause (airlock's suspend) and connect
// bringing it back with its files, kill, snapshots, fork, metrics, E2B's error
// shape ({"code": status, "message"}); envd's filesystem calls, health,
// refusals, process streams and its host-name addresses.

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
  auto metrics = e2b("GET", "/sandboxes/" + id + "/metrics");
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

TEST_F(api_e2b_envd, filesystem_calls_make_stat_list_and_remove_as_envd_does) {
  auto box = create_with_token();
  ASSERT_FALSE(box.token.empty()) << "create hands out envd's access token";

  auto made = rpc(box, "filesystem.Filesystem/MakeDir", {{"path", "proj/sub"}});
  ASSERT_EQ(made.status, 200) << made.body;
  EXPECT_EQ(made.json["entry"]["path"], "/root/proj/sub") << "relative to the user's home";
  EXPECT_EQ(made.json["entry"]["type"], "FILE_TYPE_DIRECTORY");
  auto again = rpc(box, "filesystem.Filesystem/MakeDir", {{"path", "/root/proj/sub"}});
  EXPECT_EQ(again.status, 409) << again.body;
  EXPECT_EQ(again.json["code"], "already_exists") << "makeDir() returns false on it";

  auto api = admin();
  ASSERT_EQ(
    api.call("PUT", "/v1/sandboxes/" + box.id + "/files?path=/root/proj/a.txt&mode=0640", "four")
        .status
      / 100,
    2);
  auto stat = rpc(box, "filesystem.Filesystem/Stat", {{"path", "/root/proj/a.txt"}});
  ASSERT_EQ(stat.status, 200) << stat.body;
  EXPECT_EQ(stat.json["entry"]["type"], "FILE_TYPE_FILE");
  EXPECT_EQ(stat.json["entry"]["size"], "4") << "int64 as proto3 JSON writes it";
  EXPECT_EQ(stat.json["entry"]["mode"], 0640);
  EXPECT_EQ(stat.json["entry"]["permissions"], "-rw-r-----");

  auto listed = rpc(box, "filesystem.Filesystem/ListDir", {{"path", "/root/proj"}, {"depth", 1}});
  ASSERT_EQ(listed.status, 200) << listed.body;
  std::set<std::string> paths;
  for (const auto& entry : listed.json["entries"])
    paths.insert(entry["path"].get<std::string>());
  EXPECT_EQ(paths, (std::set<std::string>{"/root/proj/a.txt", "/root/proj/sub"}));

  auto missing = rpc(box, "filesystem.Filesystem/Stat", {{"path", "/root/none"}});
  EXPECT_EQ(missing.status, 404) << missing.body;
  EXPECT_EQ(missing.json["code"], "not_found") << "exists() is false on it";

  EXPECT_EQ(rpc(box, "filesystem.Filesystem/Remove", {{"path", "proj"}}).status, 200);
  EXPECT_EQ(rpc(box, "filesystem.Filesystem/Remove", {{"path", "proj"}}).status, 200)
    << "removing what is not there succeeds";
  EXPECT_EQ(rpc(box, "filesystem.Filesystem/Stat", {{"path", "/root/proj"}}).status, 404);
  EXPECT_EQ(e2b("DELETE", "/sandboxes/" + box.id).status, 204);
}

TEST_F(api_e2b_envd, health_tells_a_running_sandbox_from_a_killed_one) {
  auto box = create_with_token();
  auto health = [&box] {
    return as("").call("GET", "/e2b/envd/health", {},
                       {{"E2b-Sandbox-Id", box.id}, {"X-Access-Token", box.token}});
  };
  EXPECT_EQ(health().status, 204);
  ASSERT_EQ(e2b("DELETE", "/sandboxes/" + box.id).status, 204);
  EXPECT_EQ(health().status, 502) << "isRunning() is false only on 502";
}

TEST_F(api_e2b_envd, refusals_are_connect_errors) {
  auto box = create_with_token();
  auto no_token = as("").call("POST", "/e2b/envd/filesystem.Filesystem/Stat", R"({"path":"/"})",
                              {{"Content-Type", "application/json"}, {"E2b-Sandbox-Id", box.id}});
  EXPECT_EQ(no_token.status, 401);
  EXPECT_EQ(no_token.json["code"], "unauthenticated");
  auto forged = rpc({box.id, "not-a-token"}, "filesystem.Filesystem/Stat", {{"path", "/"}});
  EXPECT_EQ(forged.status, 401) << forged.body;
  EXPECT_EQ(rpc(box, "filesystem.Filesystem/Stat", {{"path", "/"}}, "text/plain").status, 415);
  auto unknown = rpc(box, "filesystem.Filesystem/Chmod", {{"path", "/"}});
  EXPECT_EQ(unknown.json["code"], "unimplemented") << unknown.body;
  auto bad_body = as("").call("POST", "/e2b/envd/filesystem.Filesystem/Stat", "{\"path\":",
                              {{"Content-Type", "application/json"},
                               {"E2b-Sandbox-Id", box.id},
                               {"X-Access-Token", box.token}});
  EXPECT_EQ(bad_body.status, 400);
  EXPECT_EQ(bad_body.json["code"], "invalid_argument");
  // A stream refused before it starts: 200, and the error in the end-of-stream envelope.
  std::string envelope = std::string("\0\0\0\0\2{}", 7);
  auto start = as("").call("POST", "/e2b/envd/process.Process/StreamInput", envelope,
                           {{"Content-Type", "application/connect+json"},
                            {"E2b-Sandbox-Id", box.id},
                            {"X-Access-Token", box.token}});
  EXPECT_EQ(start.status, 200);
  ASSERT_GE(start.body.size(), 5u);
  EXPECT_EQ(start.body[0], '\2') << "only the end-of-stream envelope";
  EXPECT_NE(start.body.find("invalid_argument"), std::string::npos)
    << "an end-of-stream envelope is no start: " << start.body;
  EXPECT_EQ(e2b("DELETE", "/sandboxes/" + box.id).status, 204);
}

TEST_F(api_e2b_envd, start_streams_a_commands_output_and_exit_as_envd_events) {
  auto box = create_with_token();
  // What commands.run() sends, with /bin/sh: the minimal template has no bash.
  json request = {{"process",
                   {{"cmd", "/bin/sh"},
                    {"args", {"-c", "echo out; echo \"$E2B_VAR\" >&2; pwd; exit 3"}},
                    {"envs", {{"E2B_VAR", "from envs"}}}}},
                  {"stdin", false}};
  auto started = as("").call("POST", "/e2b/envd/process.Process/Start", envelope_of(request),
                             {{"Content-Type", "application/connect+json"},
                              {"Connect-Protocol-Version", "1"},
                              {"E2b-Sandbox-Id", box.id},
                              {"X-Access-Token", box.token}});
  ASSERT_EQ(started.status, 200) << started.body;
  EXPECT_EQ(started.headers["content-type"], "application/connect+json");
  auto stream = read_envelopes(started.body);
  ASSERT_TRUE(stream.ended) << "a stream ends with its end-of-stream envelope";
  EXPECT_EQ(stream.end, json::object()) << stream.end.dump();
  ASSERT_GE(stream.messages.size(), 2u) << started.body;
  EXPECT_GT(stream.messages.front()["event"]["start"].value("pid", 0), 1)
    << "the first event is start, with the sandbox's pid";
  std::string out, err;
  for (const auto& message : stream.messages) {
    const auto& data = message["event"].value("data", json::object());
    if (data.contains("stdout"))
      out += base64_decode(data["stdout"].get<std::string>()).value_or("?");
    if (data.contains("stderr"))
      err += base64_decode(data["stderr"].get<std::string>()).value_or("?");
  }
  EXPECT_EQ(out, "out\n/root\n") << "stdout, in the user's home";
  EXPECT_EQ(err, "from envs\n");
  const auto& end = stream.messages.back()["event"]["end"];
  EXPECT_EQ(end.value("exitCode", 0), 3) << stream.messages.back().dump();
  EXPECT_TRUE(end.value("exited", false));
  EXPECT_EQ(end.value("error", ""), "exit status 3") << "CommandExitError's message";

  auto missing = as("").call("POST", "/e2b/envd/process.Process/Start",
                             envelope_of({{"process", {{"cmd", "/no/such/program"}}}}),
                             {{"Content-Type", "application/connect+json"},
                              {"E2b-Sandbox-Id", box.id},
                              {"X-Access-Token", box.token}});
  ASSERT_EQ(missing.status, 200) << missing.body;
  auto failed = read_envelopes(missing.body);
  ASSERT_TRUE(failed.ended);
  EXPECT_EQ(e2b("DELETE", "/sandboxes/" + box.id).status, 204);
}

TEST_F(api_e2b_envd, a_quiet_stream_gets_keepalive_events_at_the_asked_interval) {
  auto box = create_with_token();
  // The process is quiet for three seconds: the subject, not a synchronisation.
  json request = {{"process", {{"cmd", "/bin/sh"}, {"args", {"-c", "sleep 3; echo done"}}}},
                  {"stdin", false}};
  auto reply = as("").call("POST", "/e2b/envd/process.Process/Start", envelope_of(request),
                           {{"Content-Type", "application/connect+json"},
                            {"Keepalive-Ping-Interval", "1"},
                            {"E2b-Sandbox-Id", box.id},
                            {"X-Access-Token", box.token}});
  ASSERT_EQ(reply.status, 200) << reply.body;
  auto stream = read_envelopes(reply.body);
  ASSERT_TRUE(stream.ended) << reply.body;
  size_t keepalives = 0;
  for (const auto& message : stream.messages)
    keepalives += message["event"].contains("keepalive") ? 1 : 0;
  EXPECT_GE(keepalives, 1u) << "a stream quiet for 3 s at a 1 s interval: " << reply.body;
  const auto& end = stream.messages.back()["event"]["end"];
  EXPECT_TRUE(end.value("exited", false)) << reply.body;
  EXPECT_EQ(end.value("exitCode", 0), 0) << "proto3 JSON leaves a zero code out: " << reply.body;
  EXPECT_EQ(e2b("DELETE", "/sandboxes/" + box.id).status, 204);
}

TEST_F(api_e2b_envd, background_processes_take_input_list_reattach_and_die_by_signal) {
  auto box = create_with_token();
  auto stream_call = [&box](const std::string& method, const json& request) {
    return as("").call("POST", "/e2b/envd/process.Process/" + method, envelope_of(request),
                       {{"Content-Type", "application/connect+json"},
                        {"E2b-Sandbox-Id", box.id},
                        {"X-Access-Token", box.token}});
  };
  auto running_pids = [&box] {
    std::set<int> pids;
    auto listed = rpc(box, "process.Process/List", json::object());
    for (const auto& process : listed.json["processes"])
      pids.insert(process.value("pid", 0));
    return pids;
  };
  // A command that echoes its stdin, left running as commands.run({background: true}) does.
  api_reply cat_reply;
  std::jthread cat([&] {
    cat_reply = stream_call("Start", {{"process", {{"cmd", "/bin/cat"}}}, {"stdin", true}});
  });
  std::set<int> pids;
  ASSERT_TRUE(wait_for([&] { return !(pids = running_pids()).empty(); }, std::chrono::seconds(30),
                       std::chrono::milliseconds(50)))
    << "List shows the running process";
  const int pid = *pids.begin();
  // Re-attach (commands.connect) on a socket of its own, and read its start
  // event before sending input: the stream is attached from then on.
  auto watcher = http_connection::open(server().host(), server().port());
  ASSERT_TRUE(watcher);
  const auto connect_body = envelope_of({{"process", {{"pid", pid}}}});
  ASSERT_TRUE(watcher->send("POST /e2b/envd/process.Process/Connect HTTP/1.1\r\nHost: test\r\n"
                            "Content-Type: application/connect+json\r\nE2b-Sandbox-Id: "
                            + box.id + "\r\nX-Access-Token: " + box.token + "\r\nContent-Length: "
                            + std::to_string(connect_body.size()) + "\r\n\r\n" + connect_body));
  auto watch_head = watcher->read_head();
  ASSERT_TRUE(watch_head);
  EXPECT_EQ(watch_head->status, 200);
  auto watch_start = watcher->read_until("}}}");
  ASSERT_TRUE(watch_start) << "the start event of Connect";

  auto input = rpc(box, "process.Process/SendInput",
                   {{"process", {{"pid", pid}}}, {"input", {{"stdin", "aGVsbG8K"}}}});
  EXPECT_EQ(input.status, 200) << input.body;
  EXPECT_EQ(rpc(box, "process.Process/CloseStdin", {{"process", {{"pid", pid}}}}).status, 200);
  cat.join();
  auto started = read_envelopes(cat_reply.body);
  ASSERT_TRUE(started.ended) << cat_reply.body;
  std::string echoed;
  for (const auto& message : started.messages)
    if (message["event"].contains("data"))
      echoed += base64_decode(message["event"]["data"].value("stdout", "")).value_or("?");
  EXPECT_EQ(echoed, "hello\n") << "stdin reached it";
  const auto& cat_end = started.messages.back()["event"]["end"];
  EXPECT_TRUE(cat_end.value("exited", false)) << started.messages.back().dump();
  EXPECT_EQ(cat_end.value("exitCode", 0), 0) << "0 is proto3's default: left out";

  ASSERT_TRUE(watcher->read_body(*watch_head));
  auto connected = read_envelopes(*watch_start + watch_head->body);
  ASSERT_TRUE(connected.ended) << watch_head->body;
  ASSERT_FALSE(connected.messages.empty());
  EXPECT_EQ(connected.messages.front()["event"]["start"].value("pid", 0), pid);
  std::string seen;
  for (const auto& message : connected.messages)
    if (message["event"].contains("data"))
      seen += base64_decode(message["event"]["data"].value("stdout", "")).value_or("?");
  EXPECT_EQ(seen, "hello\n") << "what came after it attached";
  EXPECT_TRUE(connected.messages.back()["event"].contains("end")) << "it saw the exit too";

  api_reply sleep_reply;
  std::jthread sleeper([&] {
    sleep_reply = stream_call("Start", {{"process", {{"cmd", "/bin/sleep"}, {"args", {"600"}}}}});
  });
  ASSERT_TRUE(wait_for([&] { return !(pids = running_pids()).empty(); }, std::chrono::seconds(30),
                       std::chrono::milliseconds(50)));
  auto killed = rpc(box, "process.Process/SendSignal",
                    {{"process", {{"pid", *pids.begin()}}}, {"signal", "SIGNAL_SIGKILL"}});
  EXPECT_EQ(killed.status, 200) << killed.body;
  sleeper.join();
  auto slept = read_envelopes(sleep_reply.body);
  ASSERT_FALSE(slept.messages.empty()) << sleep_reply.body;
  EXPECT_NE(slept.messages.back()["event"]["end"].value("error", "").find("signal 9"),
            std::string::npos)
    << slept.messages.back().dump();
  EXPECT_TRUE(running_pids().empty()) << "a killed process is gone, not a zombie";
  auto none = rpc(box, "process.Process/SendSignal",
                  {{"process", {{"pid", 99999}}}, {"signal", "SIGNAL_SIGKILL"}});
  EXPECT_EQ(none.json["code"], "not_found") << "kill() returns false";
  EXPECT_EQ(e2b("DELETE", "/sandboxes/" + box.id).status, 204);
}

TEST_F(api_e2b_envd, host_name_addresses_reach_envd_as_the_sdk_sends_them_without_a_sandbox_url) {
  auto created = e2b("POST", "/v2/sandboxes", {{"templateID", "minimal"}});
  ASSERT_EQ(created.status, 201) << created.body;
  EXPECT_EQ(created.json["domain"], e2b_test_domain) << "the SDK builds envd's host from it";
  sandbox_access box{created.json.value("sandboxID", ""),
                     created.json.value("envdAccessToken", "")};
  const std::string host = "49983-" + box.id + "." + e2b_test_domain;
  auto health =
    as("").call("GET", "/health", {}, {{"Host", host + ":443"}, {"X-Access-Token", box.token}});
  EXPECT_EQ(health.status, 204) << health.body;
  auto stat = as("").call("POST", "/filesystem.Filesystem/Stat", json{{"path", "/etc"}}.dump(),
                          {{"Host", host},
                           {"Content-Type", "application/json"},
                           {"Connect-Protocol-Version", "1"},
                           {"X-Access-Token", box.token}});
  ASSERT_EQ(stat.status, 200) << stat.body;
  EXPECT_EQ(stat.json["entry"]["type"], "FILE_TYPE_DIRECTORY");
  auto upper =
    as("").call("GET", "/health", {},
                {{"Host", "49983-" + box.id + ".E2B.Test"}, {"X-Access-Token", box.token}});
  EXPECT_EQ(upper.status, 204) << "host names are case-insensitive";
  auto wrong_token = as("").call("GET", "/files?path=/etc/hostname", {},
                                 {{"Host", host}, {"X-Access-Token", "not-a-token"}});
  EXPECT_EQ(wrong_token.status / 100, 4) << wrong_token.body;
  auto other_port =
    as("").call("GET", "/", {}, {{"Host", "8080-" + box.id + "." + e2b_test_domain}});
  EXPECT_EQ(other_port.status, 501) << other_port.body;
  EXPECT_NE(other_port.json.value("message", "").find("49983"), std::string::npos);
  auto elsewhere =
    as("").call("GET", "/health", {}, {{"Host", "49983-" + box.id + ".example.org"}});
  EXPECT_EQ(elsewhere.status, 404) << "another domain is not rewritten";
  ASSERT_EQ(e2b("DELETE", "/sandboxes/" + box.id).status, 204);
  EXPECT_EQ(
    as("").call("GET", "/health", {}, {{"Host", host}, {"X-Access-Token", box.token}}).status, 502);
}

} // namespace
} // namespace airlock::test
