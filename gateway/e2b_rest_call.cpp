#include <algorithm>
#include <cstdio>
#include <ctime>
#include <string>
#include <utility>

#include "gateway/e2b_rest_internal.hpp"
#include "gateway/internal_call.hpp"
#include "schema/sandbox.hpp"

namespace airlock::gateway::e2b_rest {

http_response e2b_error(unsigned status, std::string_view message) {
  return json_response(static_cast<http::status>(status),
                       json{{"code", status}, {"message", message}});
}

http_response e2b_error_of(const http_response& answer) {
  return e2b_error(answer.result_int(), error_message_of(answer));
}

http_response no_content() {
  http_response response{http::status::no_content, 11};
  return response;
}

unsigned status_of_failure(const std::string& code) {
  if (code == "not_found")
    return 404;
  if (code == "invalid_argument")
    return 400;
  if (code == "wrong_state" || code == "conflict")
    return 409;
  if (code == "unavailable" || code == "resource_exhausted" || code == "no_capacity")
    return 503;
  return 500;
}

int64_t unix_ms_of(const json& stamp) {
  if (!stamp.is_string())
    return 0;
  std::tm utc{};
  int millis = 0;
  if (std::sscanf(stamp.get<std::string>().c_str(), "%d-%d-%dT%d:%d:%d.%dZ", &utc.tm_year,
                  &utc.tm_mon, &utc.tm_mday, &utc.tm_hour, &utc.tm_min, &utc.tm_sec, &millis)
      != 7)
    return 0;
  utc.tm_year -= 1900;
  utc.tm_mon -= 1;
  return static_cast<int64_t>(timegm(&utc)) * 1000 + millis;
}

std::string rfc3339(int64_t unix_ms) {
  std::time_t seconds = unix_ms / 1000;
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

std::optional<std::string> e2b_state(const std::string& state) {
  if (state == "running")
    return "running";
  if (state == "paused" || state == "suspended")
    return "paused";
  return std::nullopt;
}

int64_t lifetime_used_s(const e2b_api& api, const json& sandbox) {
  int64_t used = sandbox.value("lifetime_used_s", int64_t{0});
  if (auto since = unix_ms_of(sandbox.value("running_since", json())); since > 0)
    used += std::max<int64_t>(0, api.clock->now_ms() - since) / 1000;
  return used;
}

int64_t end_at_ms(const e2b_api& api, const json& sandbox) {
  const auto now = api.clock->now_ms();
  if (auto lifetime = sandbox.value("max_lifetime_s", int64_t{0}); lifetime > 0)
    return now + std::max<int64_t>(0, lifetime - lifetime_used_s(api, sandbox)) * 1000;
  return unix_ms_of(sandbox.value("last_active_at", json()))
         + sandbox.value("idle_timeout_s", int64_t{0}) * 1000;
}

json sandbox_json(const e2b_api& api, const json& sandbox) {
  return {{"sandboxID", sandbox["id"]},
          {"templateID", sandbox["template"]},
          {"alias", sandbox["template"]},
          {"clientID", "airlock"},
          {"envdVersion", api.options.envd_version},
          {"domain", api.options.domain.empty() ? json(nullptr) : json(api.options.domain)}};
}

json detail_json(const e2b_api& api, const json& sandbox) {
  auto out = sandbox_json(api, sandbox);
  const auto cpu_millis = sandbox.value("cpu_millis", 1000u);
  out["startedAt"] = rfc3339(unix_ms_of(sandbox.value("created_at", json())));
  out["endAt"] = rfc3339(end_at_ms(api, sandbox));
  out["state"] = e2b_state(sandbox.value("state", "")).value_or("paused");
  out["cpuCount"] = schema::whole_cpus(cpu_millis);
  out["memoryMB"] = sandbox.value("memory_mb", 0);
  out["diskSizeMB"] = sandbox.value("disk_mb", 0);
  out["metadata"] = sandbox.value("metadata", json::object());
  out["lifecycle"] = {{"onTimeout", sandbox.value("max_lifetime_s", 0) > 0 ? "kill" : "pause"},
                      {"autoResume", false}};
  return out;
}

std::optional<std::string> api_key_of(const exchange& ex) {
  auto found = ex.request().find("X-API-Key");
  if (found == ex.request().end() || found->value().empty())
    return std::nullopt;
  return std::string(found->value());
}

void e2b_call::v1(http::verb method, std::string target, const json& body,
                  std::function<void(http_response)> then) const {
  call_route(*api->inner, method, std::move(target), body.is_null() ? "" : body.dump(), key,
             std::move(then));
}

void e2b_call::v1_json(http::verb method, std::string target, const json& body,
                       std::function<void(json)> then) const {
  auto self = *this;
  v1(method, std::move(target), body, [self, then](http_response answer) {
    if (answer.result_int() >= 300)
      return self.ex->respond(e2b_error_of(answer));
    then(json::parse(answer.body(), nullptr, false));
  });
}

void e2b_call::sandbox(std::function<void(json)> then) const {
  auto self = *this;
  const std::string id(ex->path_param("id"));
  v1_json(http::verb::get, "/v1/sandboxes/" + id, nullptr, [self, id, then](json sandbox) {
    if (!e2b_state(sandbox.value("state", "")) && sandbox.value("state", "") != "creating")
      return self.ex->respond(e2b_error(404, "sandbox \"" + id + "\" not found"));
    then(std::move(sandbox));
  });
}

void e2b_call::sandbox_with_token(const std::string& id, std::function<void(json)> then) const {
  auto self = *this;
  v1_json(http::verb::get, "/v1/sandboxes/" + id, nullptr, [self, id, then](json sandbox) {
    json scope = {{"scope", "all"}, {"ttl_s", self.api->options.envd_token_ttl_s}};
    self.v1_json(http::verb::post, "/v1/sandboxes/" + id + "/token", scope,
                 [self, id, then, sandbox](json token) {
                   auto out = sandbox_json(*self.api, sandbox);
                   out["envdAccessToken"] = token.value("token", "");
                   if (self.api->tokens && self.api->clock)
                     self.api->tokens->remember(id, token.value("token", ""),
                                                self.api->clock->now_ms()
                                                  + int64_t{self.api->options.envd_token_ttl_s}
                                                      * 1000);
                   then(std::move(out));
                 });
  });
}

void e2b_call::answer_sandbox(const std::string& id, http::status status) const {
  auto self = *this;
  sandbox_with_token(
    id, [self, status](json out) { self.ex->respond(json_response(status, std::move(out))); });
}

void e2b_call::await_operation(const std::string& id, int64_t deadline_ms,
                               std::function<void(json)> then) const {
  auto self = *this;
  auto target = "/v1/operations/" + id + "?wait=" + std::to_string(api->options.operation_poll_s);
  v1_json(http::verb::get, target, nullptr, [self, id, deadline_ms, then](json operation) {
    const auto state = operation.value("state", "");
    if (state == "succeeded")
      return then(std::move(operation));
    if (state == "failed" || state == "cancelled") {
      auto error = operation.value("error", json::object());
      if (!error.is_object())
        error = json::object();
      return self.ex->respond(
        e2b_error(status_of_failure(error.value("code", "")),
                  "operation " + id + " " + state + ": " + error.value("message", "")));
    }
    if (self.api->clock->now_ms() >= deadline_ms)
      return self.ex->respond(e2b_error(504, "operation " + id + " is still " + state
                                               + "; GET /v1/operations/" + id
                                               + " shows how it goes"));
    self.await_operation(id, deadline_ms, then);
  });
}

void e2b_call::run_operation(http::verb method, std::string target, const json& body,
                             std::function<void(json)> then) const {
  auto self = *this;
  v1_json(method, std::move(target), body, [self, then](json accepted) {
    auto deadline = self.api->clock->now_ms() + int64_t{self.api->options.operation_wait_s} * 1000;
    self.await_operation(accepted.value("operation_id", ""), deadline, [then](json operation) {
      auto result = operation.value("result", json::object());
      then(result.is_object() ? result : json::object());
    });
  });
}

std::optional<json> object_body(const e2b_call& call) {
  const auto& text = call.ex->request().body();
  if (text.empty())
    return json::object();
  auto body = json::parse(text, nullptr, false);
  if (!body.is_object()) {
    call.ex->respond(e2b_error(400, "the body must be a JSON object"));
    return std::nullopt;
  }
  return body;
}

std::optional<uint32_t> timeout_of(const e2b_call& call, const json& body, uint32_t fallback) {
  auto found = body.find("timeout");
  if (found == body.end() || found->is_null())
    return fallback;
  const auto max = call.api->options.max_timeout_s;
  if (!found->is_number_unsigned() || found->get<uint64_t>() < 1 || found->get<uint64_t>() > max) {
    call.ex->respond(
      e2b_error(400, "timeout must be whole seconds from 1 to " + std::to_string(max)));
    return std::nullopt;
  }
  return found->get<uint32_t>();
}

bool optional_timeout(const e2b_call& call, const json& body, std::optional<int64_t>& out) {
  auto found = body.find("timeout");
  if (found == body.end() || found->is_null())
    return true;
  auto asked = timeout_of(call, body, 0);
  if (!asked)
    return false;
  out = *asked;
  return true;
}

void time_out_in(const e2b_call& call, const json& sandbox, int64_t timeout,
                 std::function<void()> then) {
  json patch;
  if (sandbox.value("max_lifetime_s", int64_t{0}) > 0)
    patch = {{"max_lifetime_s", lifetime_used_s(*call.api, sandbox) + timeout}};
  else
    patch = {{"idle_timeout_s", timeout}};
  call.v1_json(http::verb::patch, "/v1/sandboxes/" + sandbox["id"].get<std::string>(), patch,
               [then](json) { then(); });
}

} // namespace airlock::gateway::e2b_rest
