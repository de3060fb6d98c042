#pragma once
// The E2B fronts' e2e fixtures: api_e2b calls /e2b/ as the SDK does
// (X-API-Key), api_e2b_envd adds envd's Connect calls and stream framing.

#include <string>
#include <vector>

#include "tests/api/api_fixture.hpp"

namespace airlock::test {

using nlohmann::json;

class api_e2b : public api_suite {
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

/// The JSON messages of a Connect stream's body, the end-of-stream one last
/// (its flag in `end_flags`).
struct connect_stream {
  std::vector<json> messages;
  json end;
  bool ended = false;
};

inline connect_stream read_envelopes(const std::string& body) {
  connect_stream out;
  size_t at = 0;
  while (at + 5 <= body.size()) {
    const auto* bytes = reinterpret_cast<const unsigned char*>(body.data() + at);
    const size_t size = (size_t{bytes[1]} << 24) | (size_t{bytes[2]} << 16)
                        | (size_t{bytes[3]} << 8) | size_t{bytes[4]};
    auto message = json::parse(body.substr(at + 5, size), nullptr, false);
    if (bytes[0] & 2) {
      out.end = message;
      out.ended = true;
    } else {
      out.messages.push_back(message);
    }
    at += 5 + size;
  }
  return out;
}

inline std::string envelope_of(const json& message) {
  auto text = message.dump();
  std::string out(5, '\0');
  out[3] = static_cast<char>((text.size() >> 8) & 0xff);
  out[4] = static_cast<char>(text.size() & 0xff);
  return out + text;
}

} // namespace airlock::test
