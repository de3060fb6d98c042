// Who may do what: data-plane tokens (scopes, expiry, forgery, other
// sandboxes, attach tokens bound to one process) and tenants' API keys.

#include <set>

#include "tests/api/api_fixture.hpp"

namespace airlock::test {
namespace {

using nlohmann::json;

class api_access : public api_suite {
public:
  static void SetUpTestSuite() {
    api_suite::SetUpTestSuite();
    if (!has_server())
      return;
    first_ = admin().create_running();
    second_ = admin().create_running();
  }
  static void TearDownTestSuite() {
    first_.clear();
    second_.clear();
    api_suite::TearDownTestSuite();
  }

protected:
  void SetUp() override {
    api_suite::SetUp();
    if (!IsSkipped()) {
      ASSERT_TRUE(!first_.empty() && !second_.empty()) << "the suite's sandboxes did not start";
    }
  }

  /// POST /v1/sandboxes/{id}/token; the token, or "" with a failure added.
  static std::string token_for(const std::string& id, const json& body) {
    auto reply = admin().post("/v1/sandboxes/" + id + "/token", body);
    EXPECT_EQ(reply.status, 201) << reply.body;
    return reply.json.is_object() ? reply.json.value("token", "") : "";
  }
  static std::string files(const std::string& id, const std::string& query) {
    return "/v1/sandboxes/" + id + "/files" + query;
  }

  static inline std::string first_;
  static inline std::string second_;
};

TEST_F(api_access, a_sandbox_token_works_in_the_query_and_the_header) {
  auto reply = admin().post("/v1/sandboxes/" + first_ + "/token", {{"scope", "all"}});
  ASSERT_EQ(reply.status, 201) << reply.body;
  EXPECT_EQ(reply.json["data_url"], server().url());
  EXPECT_TRUE(reply.json["expires_at"].is_string());
  std::string token = reply.json["token"];

  auto no_key = as("");
  auto put = no_key.call("PUT", files(first_, "?path=/tok.txt&token=" + token), "by token");
  EXPECT_EQ(put.status, 201) << put.body;
  auto header = as(token);
  auto got = header.get(files(first_, "?path=/tok.txt"));
  EXPECT_EQ(got.status, 200) << got.body;
  EXPECT_EQ(got.body, "by token");
  auto process = header.exec(first_, {{"cmd", "echo via token"}});
  ASSERT_TRUE(process);
  EXPECT_EQ(header.read_output(*process).stdout_bytes, "via token\n");
  // A token is not an API key: control routes refuse it.
  EXPECT_EQ(header.get("/v1/sandboxes/" + first_).status, 401);
}

TEST_F(api_access, a_files_token_is_refused_on_processes) {
  auto token = token_for(first_, {{"scope", "files"}});
  auto client = as(token);
  EXPECT_EQ(client.get(files(first_, "/list?path=/")).status, 200);
  auto refused = client.post("/v1/sandboxes/" + first_ + "/processes", {{"cmd", "true"}});
  EXPECT_EQ(refused.status, 403) << refused.body;
  EXPECT_EQ(refused.error_code(), "permission_denied");
  auto processes_token = token_for(first_, {{"scope", "processes"}});
  EXPECT_EQ(as(processes_token).get(files(first_, "?path=/etc/passwd")).status, 403);
  EXPECT_EQ(admin().post("/v1/sandboxes/" + first_ + "/token", {{"scope", "root"}}).status, 400);
  EXPECT_EQ(admin().post("/v1/sandboxes/" + first_ + "/token", {{"ttl_s", 0}}).status, 400);
}

TEST_F(api_access, an_expired_token_is_refused_with_401) {
  auto client = as(token_for(first_, {{"scope", "files"}, {"ttl_s", 1}}));
  // Valid at first (unless this machine is very slow), then refused: poll
  // with a bound instead of sleeping past the expiry.
  auto first = client.get(files(first_, "/list?path=/"));
  EXPECT_TRUE(first.status == 200 || first.status == 401) << first.body;
  api_reply last;
  wait_for(
    [&client, &last] {
      last = client.get(files(first_, "/list?path=/"));
      return last.status != 200;
    },
    milliseconds(20'000), milliseconds(100));
  EXPECT_EQ(last.error_code(), "unauthenticated") << last.body;
  int status = last.status;
  EXPECT_EQ(status, 401) << "the token did not expire within 20 s";
}

TEST_F(api_access, a_forged_token_and_a_token_for_another_sandbox_are_refused) {
  auto token = token_for(first_, {{"scope", "all"}});
  ASSERT_GT(token.size(), 20u);
  for (size_t at : {token.size() / 2, token.size() - 3}) {
    std::string forged = token;
    forged[at] = forged[at] == 'A' ? 'B' : 'A';
    auto reply = as(forged).get(files(first_, "/list?path=/"));
    EXPECT_EQ(reply.status, 401) << "flipped byte " << at << ": " << reply.body;
    EXPECT_TRUE(reply.is_error_shape());
  }
  auto other = as(token).get(files(second_, "/list?path=/"));
  EXPECT_TRUE(other.status == 401 || other.status == 403) << other.status;
  auto none = as("").get(files(first_, "/list?path=/"));
  EXPECT_EQ(none.status, 401);
  auto junk = as("v1.nonsense").get(files(first_, "/list?path=/"));
  EXPECT_EQ(junk.status, 401);
}

TEST_F(api_access, an_attach_token_is_bound_to_its_process) {
  auto api = admin();
  auto one = api.exec(first_, {{"argv", {"sleep", "100"}}});
  auto two = api.exec(first_, {{"argv", {"sleep", "100"}}});
  ASSERT_TRUE(one && two);
  auto own = as(one->attach_token).get(one->attach_path);
  EXPECT_EQ(own.status, 200) << own.body;
  auto foreign = as(one->attach_token).get(two->attach_path);
  EXPECT_EQ(foreign.status, 403) << foreign.body;
  auto foreign_signal =
    as(one->attach_token).post(two->attach_path + "/signal", {{"signal", "KILL"}});
  EXPECT_EQ(foreign_signal.status, 403);
  // Nor does it start new processes.
  EXPECT_EQ(
    as(one->attach_token).post("/v1/sandboxes/" + first_ + "/processes", {{"cmd", "true"}}).status,
    403);
  for (const auto& process : {*one, *two})
    EXPECT_EQ(api.post(process.attach_path + "/signal", {{"signal", "KILL"}}).status, 200);
}

TEST_F(api_access, a_tenant_sees_only_its_own_sandboxes_and_operations) {
  auto admin_api = admin();
  auto key = admin_api.post("/v1/api-keys", {{"tenant_id", "t1"}});
  ASSERT_EQ(key.status, 201) << key.body;
  EXPECT_EQ(key.json["tenant_id"], "t1");
  std::string t1_key = key.json["api_key"];
  EXPECT_TRUE(is_api_key(t1_key)) << t1_key;
  auto t1 = as(t1_key);

  auto admin_ops = admin_api.get("/v1/operations?target_id=" + first_);
  ASSERT_FALSE(admin_ops.json["items"].empty());
  std::string admin_op = admin_ops.json["items"][0]["id"];
  EXPECT_EQ(t1.get("/v1/sandboxes/" + first_).status, 404);
  EXPECT_EQ(t1.get("/v1/operations/" + admin_op).status, 404);
  EXPECT_EQ(t1.get("/v1/operations/" + admin_op + "/events").status, 404);
  EXPECT_EQ(t1.call("DELETE", "/v1/sandboxes/" + first_).status, 404);
  EXPECT_EQ(t1.call("POST", "/v1/sandboxes/" + first_ + "/pause").status, 404);
  EXPECT_EQ(t1.post("/v1/sandboxes/" + first_ + "/token", json::object()).status, 404);
  EXPECT_EQ(t1.get(files(first_, "?path=/etc/passwd")).status, 404);
  EXPECT_EQ(t1.post("/v1/sandboxes/" + first_ + "/processes", {{"cmd", "true"}}).status, 404);
  // A checkpoint belongs to its sandbox's tenant.
  auto taken = admin_api.post("/v1/sandboxes/" + first_ + "/checkpoints", json::object());
  ASSERT_EQ(taken.status, 202) << taken.body;
  auto checkpoint_op = admin_api.wait_operation(taken.json["operation_id"]);
  ASSERT_EQ(checkpoint_op["state"], "succeeded") << checkpoint_op.dump();
  const std::string checkpoint = checkpoint_op["result"].value("checkpoint_id", "");
  EXPECT_EQ(t1.post("/v1/sandboxes/" + first_ + "/checkpoints", json::object()).status, 404);
  EXPECT_EQ(t1.get("/v1/sandboxes/" + first_ + "/checkpoints").status, 404);
  EXPECT_EQ(t1.get("/v1/checkpoints/" + checkpoint).status, 404);
  EXPECT_EQ(t1.call("DELETE", "/v1/checkpoints/" + checkpoint).status, 404);
  EXPECT_EQ(admin_api.get("/v1/checkpoints/" + checkpoint).status, 200);

  auto own = t1.create_running({{"metadata", {{"owner", "t1"}}}});
  ASSERT_FALSE(own.empty());
  EXPECT_EQ(t1.run(own, "echo mine").stdout_bytes, "mine\n");
  auto listed = t1.get("/v1/sandboxes");
  ASSERT_EQ(listed.status, 200);
  std::set<std::string> ids;
  for (const auto& item : listed.json["items"])
    ids.insert(item["id"].get<std::string>());
  EXPECT_EQ(ids, std::set<std::string>{own});
  auto ops = t1.get("/v1/operations");
  ASSERT_EQ(ops.status, 200);
  for (const auto& op : ops.json["items"])
    EXPECT_EQ(op["target_id"], own) << op.dump();
  // The admin sees every tenant's sandboxes.
  EXPECT_EQ(admin_api.get("/v1/sandboxes/" + own).status, 200);

  auto no_keys = t1.post("/v1/api-keys", {{"tenant_id", "t2"}});
  EXPECT_EQ(no_keys.status, 403);
  EXPECT_EQ(no_keys.error_code(), "permission_denied");
  EXPECT_EQ(t1.get("/v1/workers").status, 403);
  auto workers = admin_api.get("/v1/workers");
  ASSERT_EQ(workers.status, 200);
  ASSERT_EQ(workers.json["items"].size(), 1u);
  EXPECT_EQ(workers.json["items"][0]["state"], "ready");
}

} // namespace
} // namespace airlock::test
