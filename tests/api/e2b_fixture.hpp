#pragma once
// The E2B fronts' e2e fixtures: api_e2b calls /e2b/ as the SDK does
// (X-API-Key), api_e2b_envd adds envd's Connect calls and stream framing.

#include <string>
#include <vector>

#include "tests/api/api_fixture.hpp"
#include "tests/support/connect_frames.hpp"

namespace airlock::test {

using nlohmann::json;

/// The API suites' daemon, serving E2B's host-name addresses under
/// `e2b_test_domain` too.
inline constexpr const char* e2b_test_domain = "e2b.test";
struct e2b_suite_config : api_suite_config {
  static serve_process::options options() {
    serve_process::options out;
    out.extra_args = {"--e2b-domain", e2b_test_domain};
    return out;
  }
};

class api_e2b : public serve_suite<e2b_suite_config> {
protected:
  /// A client that authenticates as the e2b SDK does: X-API-Key, no bearer.
  static api_reply e2b(const std::string& method, const std::string& target,
                       const json& body = nullptr, const std::string& key = {}) {
    return as("").call(method, "/e2b" + target, body.is_null() ? std::string() : body.dump(),
                       {{"X-API-Key", key.empty() ? server().admin_key() : key}});
  }

  /// POST /e2b/v2/sandboxes; the sandbox's id, or "" after a failure.
  static std::string create(const json& body) {
    auto created = e2b("POST", "/v2/sandboxes", body);
    EXPECT_EQ(created.status, 201) << created.body;
    return created.json.value("sandboxID", "");
  }

  static void expect_e2b_error(const api_reply& reply, int status) {
    EXPECT_EQ(reply.status, status) << reply.body;
    EXPECT_EQ(reply.json.value("code", 0), status) << "E2B's SDK reads the body's code";
    EXPECT_FALSE(reply.json.value("message", "").empty()) << reply.body;
  }
};

class api_e2b_envd : public api_e2b {
protected:
  struct sandbox_access {
    std::string id;
    std::string token;
  };

  static sandbox_access create_with_token() {
    auto created = e2b("POST", "/v2/sandboxes", {{"templateID", "minimal"}});
    EXPECT_EQ(created.status, 201) << created.body;
    return {created.json.value("sandboxID", ""), created.json.value("envdAccessToken", "")};
  }

  /// A Connect call as the SDK makes it: JSON, the sandbox and its token in headers.
  static api_reply rpc(const sandbox_access& box, const std::string& method, const json& body,
                       const std::string& content_type = "application/json") {
    return as("").call("POST", "/e2b/envd/" + method, body.dump(),
                       {{"Content-Type", content_type},
                        {"Connect-Protocol-Version", "1"},
                        {"E2b-Sandbox-Id", box.id},
                        {"X-Access-Token", box.token}});
  }
};

} // namespace airlock::test
