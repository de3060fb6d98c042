// The E2B front in split mode: the SDK's addresses point at the control
// plane (E2B_API_URL=<control>/e2b, E2B_SANDBOX_URL=<control>/e2b/envd) and
// every envd call is forwarded to the sandbox's worker, as the /v1 data
// routes are: a command's stream, an upload and its download, a signed
// download URL at the listener's root, /health.

#include "gateway/e2b_token_book.hpp"
#include "tests/cluster/cluster_fixture.hpp"
#include "tests/support/connect_frames.hpp"

namespace airlock::test::cluster {
namespace {

TEST_F(cluster_e2e, e2b_calls_at_the_control_plane_reach_the_sandbox_on_its_worker) {
  start_control();
  start_worker();
  ASSERT_TRUE(eventually([&] { return worker_in_state("clue2e-0", "ready"); }, rejoin_bound));
  const std::string e2b = control_->url() + "/e2b";
  auto created = call("POST", e2b + "/v2/sandboxes", "",
                      json{{"templateID", "minimal"}, {"timeout", 300}}.dump(),
                      {{"X-API-Key", key_}, {"Content-Type", "application/json"}});
  ASSERT_EQ(created.status, 201) << created.raw;
  const std::string id = created.body["sandboxID"];
  const std::string token = created.body["envdAccessToken"];
  EXPECT_EQ(sandbox(id)["worker_id"], workers().at("clue2e-0")["id"]);
  const header_list envd = {{"E2b-Sandbox-Id", id}, {"X-Access-Token", token}};

  auto health = call("GET", e2b + "/envd/health", "", {}, envd);
  EXPECT_EQ(health.status, 204) << health.raw;

  auto with = [&](header_list extra) {
    extra.insert(extra.end(), envd.begin(), envd.end());
    return extra;
  };
  json start = {{"process", {{"cmd", "/bin/sh"}, {"args", {"-c", "echo from the worker"}}}},
                {"stdin", false}};
  auto ran = call("POST", e2b + "/envd/process.Process/Start", "", envelope_of(start),
                  with({{"Content-Type", "application/connect+json"}}));
  ASSERT_EQ(ran.status, 200) << ran.raw;
  EXPECT_EQ(stdout_of(ran.raw), "from the worker\n");

  auto uploaded = call("POST", e2b + "/envd/files?path=/tmp/e2b.txt", "", "split mode\n",
                       with({{"Content-Type", "application/octet-stream"}}));
  ASSERT_EQ(uploaded.status, 200) << uploaded.raw;
  auto downloaded = call("GET", e2b + "/envd/files?path=/tmp/e2b.txt", "", {}, envd);
  EXPECT_EQ(downloaded.status, 200) << downloaded.raw;
  EXPECT_EQ(downloaded.raw, "split mode\n");

  // A signed URL names no sandbox: the control plane finds it by its token.
  std::string signature;
  gateway::signed_file_request download{"/tmp/e2b.txt", "read", "", "", ""};
  for (char c : gateway::envd_file_signature(download, token)) // as URLSearchParams encodes it
    signature += c == '+' ? std::string("%2B") : c == '/' ? std::string("%2F") : std::string(1, c);
  auto signed_url = control_->url() + "/files?path=%2Ftmp%2Fe2b.txt&signature=" + signature;
  auto by_signature = call("GET", signed_url, "");
  EXPECT_EQ(by_signature.status, 200) << by_signature.raw;
  EXPECT_EQ(by_signature.raw, "split mode\n");

  auto killed = call("DELETE", e2b + "/sandboxes/" + id, "", {}, {{"X-API-Key", key_}});
  EXPECT_EQ(killed.status, 204) << killed.raw;
  auto after = call("GET", e2b + "/envd/health", "", {}, envd);
  EXPECT_EQ(after.status, 502) << "a killed sandbox's envd is not running: " << after.raw;
}

} // namespace
} // namespace airlock::test::cluster
