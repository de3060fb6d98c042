// Bad requests get the right status and a JSON error body
// {"error": {"code", "message"}}, and the server stays healthy afterwards.

#include "tests/api/api_fixture.hpp"

namespace airlock::test {
namespace {

using nlohmann::json;

class api_bad_input : public api_suite {
protected:
  void TearDown() override {
    if (IsSkipped() || !has_server())
      return;
    auto health = as("").get("/healthz");
    EXPECT_EQ(health.status, 200) << "the server is unhealthy after bad input";
  }
};

/// Expects `reply` to be `status` with an error body (and `code` if given).
void expect_error(const api_reply& reply, int status, const std::string& code = {}) {
  EXPECT_EQ(reply.status, status) << reply.body;
  EXPECT_TRUE(reply.is_error_shape()) << reply.body;
  if (!code.empty()) {
    EXPECT_EQ(reply.error_code(), code) << reply.body;
  }
}

TEST_F(api_bad_input, malformed_or_non_object_json_is_400) {
  auto api = admin();
  expect_error(api.call("POST", "/v1/sandboxes", "{\"template\": "), 400, "invalid_argument");
  expect_error(api.call("POST", "/v1/sandboxes", "[1, 2]"), 400, "invalid_argument");
  expect_error(api.call("POST", "/v1/sandboxes", "\"minimal\""), 400, "invalid_argument");
  expect_error(api.call("POST", "/v1/sandboxes", ""), 400, "invalid_argument");
  expect_error(api.call("POST", "/v1/api-keys", "{\"tenant_id\": 7}"), 400);
}

TEST_F(api_bad_input, json_over_64_kib_is_413) {
  auto api = admin();
  json big = {{"template", "minimal"}, {"metadata", {{"pad", std::string(70 * 1024, 'x')}}}};
  expect_error(api.call("POST", "/v1/sandboxes", big.dump()), 413, "too_large");
}

TEST_F(api_bad_input, wrong_types_and_a_missing_template_are_400) {
  auto api = admin();
  expect_error(api.create({{"template", "minimal"}, {"cpu_millis", "x"}}), 400, "invalid_argument");
  expect_error(api.create({{"template", "minimal"}, {"memory_mb", -5}}), 400);
  expect_error(api.create({{"template", "minimal"}, {"env", {{"A", 1}}}}), 400);
  expect_error(api.create({{"template", "minimal"}, {"egress", {{"profile", "sometimes"}}}}), 400);
  expect_error(api.create({{"cpu_millis", 1000}}), 400, "invalid_argument");
  expect_error(api.create({{"template", 5}}), 400);

  auto sandbox = api.create_running();
  ASSERT_FALSE(sandbox.empty());
  auto procs = "/v1/sandboxes/" + sandbox + "/processes";
  expect_error(api.post(procs, {{"argv", "echo hi"}}), 400, "invalid_argument");
  expect_error(api.post(procs, {{"argv", json::array()}}), 400);
  expect_error(api.post(procs, {{"argv", {"echo"}}, {"cmd", "echo"}}), 400);
  expect_error(api.post(procs, {{"cmd", "true"}, {"stdin", "yes"}}), 400);
  expect_error(api.post(procs, {{"cmd", "true"}, {"pty", {{"rows", 0}}}}), 400);
  expect_error(api.call("POST", procs, "not json"), 400);
}

TEST_F(api_bad_input, an_unknown_runtime_is_400_and_microvm_without_a_worker_offering_it_409) {
  auto api = admin();
  expect_error(api.create({{"template", "minimal"}, {"runtime", "firecracker"}}), 400,
               "invalid_argument");
  expect_error(api.create({{"template", "minimal"}, {"runtime", 7}}), 400, "invalid_argument");
  // This suite's airlockd runs without --microvm: nothing is created.
  auto refused = api.create({{"template", "minimal"}, {"runtime", "microvm"}});
  expect_error(refused, 409, "runtime_unavailable");
  EXPECT_NE(refused.json["error"]["message"].get<std::string>().find("microvm"), std::string::npos)
    << refused.body;
  auto workers = api.get("/v1/workers");
  ASSERT_EQ(workers.status, 200) << workers.body;
  ASSERT_FALSE(workers.json["items"].empty());
  EXPECT_EQ(workers.json["items"][0]["runtimes"], json::array({"namespace"})) << workers.body;
}

TEST_F(api_bad_input, an_unknown_template_fails_the_operation_with_a_reason) {
  auto api = admin();
  auto created = api.create({{"template", "no-such-template"}});
  ASSERT_EQ(created.status, 202) << created.body;
  auto op = api.wait_operation(created.json["operation_id"]);
  EXPECT_EQ(op["state"], "failed") << op.dump();
  ASSERT_TRUE(op["error"].is_object()) << op.dump();
  EXPECT_FALSE(op["error"]["message"].get<std::string>().empty());
  auto sandbox = api.get("/v1/sandboxes/" + created.json["sandbox_id"].get<std::string>());
  EXPECT_NE(sandbox.json["state"], "running") << sandbox.body;
}

TEST_F(api_bad_input, unknown_routes_are_404_and_wrong_methods_405) {
  auto api = admin();
  expect_error(api.get("/v2/sandboxes"), 404, "not_found");
  expect_error(api.get("/v1/nothing"), 404, "not_found");
  auto wrong = api.call("PUT", "/v1/sandboxes", "{}");
  expect_error(wrong, 405, "method_not_allowed");
  EXPECT_FALSE(wrong.headers["allow"].empty());
  expect_error(api.call("DELETE", "/v1/operations"), 405);
  expect_error(api.call("POST", "/healthz", "{}"), 405);
}

TEST_F(api_bad_input, invalid_and_unknown_ids_are_404) {
  auto api = admin();
  expect_error(api.get("/v1/sandboxes/sb_doesnotexist"), 404, "not_found");
  expect_error(api.get("/v1/sandboxes/not-an-id"), 404);
  expect_error(api.get("/v1/sandboxes/%2e%2e"), 404);
  expect_error(api.get("/v1/operations/op_doesnotexist"), 404, "not_found");
  expect_error(api.get("/v1/operations/sb_wrongprefix"), 404);
  expect_error(api.call("DELETE", "/v1/sandboxes/sb_doesnotexist"), 404);
  expect_error(api.call("POST", "/v1/sandboxes/sb_doesnotexist/pause"), 404);
  expect_error(api.post("/v1/sandboxes/sb_doesnotexist/processes", {{"cmd", "true"}}), 404);
  expect_error(api.get("/v1/sandboxes/sb_doesnotexist/files?path=/"), 404);
  expect_error(api.call("POST", "/v1/operations/op_doesnotexist/cancel"), 404);
}

TEST_F(api_bad_input, missing_or_wrong_credentials_are_401) {
  expect_error(as("").get("/v1/sandboxes"), 401, "unauthenticated");
  expect_error(as("ak_0000000000000000_" + std::string(64, '0')).get("/v1/sandboxes"), 401,
               "unauthenticated");
  expect_error(as("nonsense").get("/v1/operations"), 401);
  expect_error(as("").create({{"template", "minimal"}}), 401);
  auto wrong_scheme =
    as("").call("GET", "/v1/sandboxes", "", {{"Authorization", "Basic " + server().admin_key()}});
  expect_error(wrong_scheme, 401);
  // Health and readiness need no key.
  EXPECT_EQ(as("").get("/readyz").status, 200);
}

// An API key in a URL leaks into logs and histories: only the header takes
// one, on control routes and on the data-plane routes the control plane
// forwards alike.
TEST_F(api_bad_input, an_api_key_in_the_query_is_401_naming_the_header) {
  const std::string key = server().admin_key();
  auto control = as("").get("/v1/sandboxes?token=" + key);
  expect_error(control, 401, "unauthenticated");
  EXPECT_NE(control.body.find("Authorization header"), std::string::npos) << control.body;
  auto data = as("").get("/v1/sandboxes/sbx-none/files?path=/etc/hostname&token=" + key);
  expect_error(data, 401, "unauthenticated");
  EXPECT_NE(data.body.find("Authorization header"), std::string::npos) << data.body;
  EXPECT_EQ(as(key).get("/v1/sandboxes").status, 200) << "the header still works";
}

TEST_F(api_bad_input, unknown_state_filters_and_bad_limits_are_400) {
  auto api = admin();
  expect_error(api.get("/v1/sandboxes?state=sleepy"), 400, "invalid_argument");
  expect_error(api.get("/v1/operations?state=sleepy"), 400, "invalid_argument");
  expect_error(api.get("/v1/sandboxes?limit=0"), 400);
  expect_error(api.get("/v1/sandboxes?limit=5000"), 400);
  expect_error(api.get("/v1/operations/op_x?wait=600"), 400);
}

TEST_F(api_bad_input, later_release_routes_answer_501) {
  auto api = admin();
  // Template builds are served: a recipe without `from` is a 400, not a 501.
  expect_error(api.post("/v1/templates", {{"name", "x"}}), 400, "invalid_argument");
  // Pools are served: a bad size is a 400, not a 501.
  expect_error(api.call("PUT", "/v1/templates/base/pool", R"({"size": -1})"), 400,
               "invalid_argument");
  expect_error(api.call("POST", "/v1/workers/wk_any/drain"), 501, "not_implemented");
  // Snapshots are served: an unknown sandbox is a 404, not a 501.
  expect_error(api.call("POST", "/v1/sandboxes/sb_any/suspend"), 404, "not_found");
  // /v1/audit exists (the audit log): its bad input is a 400, not a 501.
  expect_error(api.get("/v1/audit?kind=nope"), 400, "invalid_argument");
  // Templates are served: an unknown one is a 404, not a 501.
  expect_error(api.get("/v1/templates/no-such"), 404, "not_found");
  // Still authenticated first.
  expect_error(as("").get("/v1/templates"), 401);
}

} // namespace
} // namespace airlock::test
