#include "gateway/e2b_routes.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <ctime>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>

#include "gateway/exchange.hpp"
#include "gateway/internal_call.hpp"

namespace airlock::gateway {

namespace {

using nlohmann::json;

struct e2b_api {
  std::shared_ptr<const route_table> inner;
  const wall_clock* clock = nullptr;
  std::shared_ptr<envd_token_book> tokens;
  e2b_options options;
};

using e2b_ptr = std::shared_ptr<const e2b_api>;
using exchange_ptr = std::shared_ptr<exchange>;

/// E2B's error shape: the SDK reads the body's numeric code, which must equal
/// the HTTP status.
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

/// The HTTP status E2B's SDK expects for an operation that failed with `code`.
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

/// Unix ms of the API's "YYYY-MM-DDTHH:MM:SS.mmmZ"; 0 for null or malformed.
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

/// airlock's states as E2B's two: a paused or suspended sandbox is E2B's
/// paused; nullopt for one that E2B would not list (creating, ended, failed).
std::optional<std::string> e2b_state(const std::string& state) {
  if (state == "running")
    return "running";
  if (state == "paused" || state == "suspended")
    return "paused";
  return std::nullopt;
}

/// Running time so far, in seconds: completed stretches plus the current one.
int64_t lifetime_used_s(const e2b_api& api, const json& sandbox) {
  int64_t used = sandbox.value("lifetime_used_s", int64_t{0});
  if (auto since = unix_ms_of(sandbox.value("running_since", json())); since > 0)
    used += std::max<int64_t>(0, api.clock->now_ms() - since) / 1000;
  return used;
}

/// When E2B's timeout ends the sandbox: its lifetime's end for one created
/// to be killed, its idle deadline for one created to pause.
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
  const auto cpu_millis = sandbox.value("cpu_millis", 1000);
  out["startedAt"] = rfc3339(unix_ms_of(sandbox.value("created_at", json())));
  out["endAt"] = rfc3339(end_at_ms(api, sandbox));
  out["state"] = e2b_state(sandbox.value("state", "")).value_or("paused");
  out["cpuCount"] = std::max(1, (cpu_millis + 999) / 1000);
  out["memoryMB"] = sandbox.value("memory_mb", 0);
  out["diskSizeMB"] = sandbox.value("disk_mb", 0);
  out["metadata"] = sandbox.value("metadata", json::object());
  out["lifecycle"] = {{"onTimeout", sandbox.value("max_lifetime_s", 0) > 0 ? "kill" : "pause"},
                      {"autoResume", false}};
  return out;
}

/// The X-API-Key header, which E2B's SDK sends instead of a bearer token.
std::optional<std::string> api_key_of(const exchange& ex) {
  auto found = ex.request().find("X-API-Key");
  if (found == ex.request().end() || found->value().empty())
    return std::nullopt;
  return std::string(found->value());
}

/// One E2B request: its exchange, the caller's key and the /v1 calls it makes.
struct e2b_call {
  e2b_ptr api;
  exchange_ptr ex;
  std::string key;

  void v1(http::verb method, std::string target, const json& body,
          std::function<void(http_response)> then) const {
    call_route(*api->inner, method, std::move(target), body.is_null() ? "" : body.dump(), key,
               std::move(then));
  }

  /// Calls /v1 and, on a 2xx, `then` with its JSON; else answers E2B's error.
  void v1_json(http::verb method, std::string target, const json& body,
               std::function<void(json)> then) const {
    auto self = *this;
    v1(method, std::move(target), body, [self, then](http_response answer) {
      if (answer.result_int() >= 300)
        return self.ex->respond(e2b_error_of(answer));
      then(json::parse(answer.body(), nullptr, false));
    });
  }

  /// The sandbox of the path as /v1 shows it; a destroyed one is E2B's 404.
  void sandbox(std::function<void(json)> then) const {
    auto self = *this;
    const std::string id(ex->path_param("id"));
    v1_json(http::verb::get, "/v1/sandboxes/" + id, nullptr, [self, id, then](json sandbox) {
      if (!e2b_state(sandbox.value("state", "")) && sandbox.value("state", "") != "creating")
        return self.ex->respond(e2b_error(404, "sandbox \"" + id + "\" not found"));
      then(std::move(sandbox));
    });
  }

  /// Sandbox `id` as E2B's Sandbox, with a data-plane token for envd (the
  /// SDK sends it back as X-Access-Token); answers E2B's error if /v1 fails.
  void sandbox_with_token(const std::string& id, std::function<void(json)> then) const {
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

  /// Answers `status` with sandbox `id` as E2B's Sandbox (sandbox_with_token).
  void answer_sandbox(const std::string& id, http::status status) const {
    auto self = *this;
    sandbox_with_token(
      id, [self, status](json out) { self.ex->respond(json_response(status, std::move(out))); });
  }

  /// Waits (bounded) for operation `id` to end; `then` with it once it
  /// succeeded, else E2B's error with the operation's reason.
  void await_operation(const std::string& id, int64_t deadline_ms,
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

  /// Starts a /v1 call that answers 202 with an operation, then waits for it
  /// and gives `then` the operation's result.
  void run_operation(http::verb method, std::string target, const json& body,
                     std::function<void(json)> then) const {
    auto self = *this;
    v1_json(method, std::move(target), body, [self, then](json accepted) {
      auto deadline =
        self.api->clock->now_ms() + int64_t{self.api->options.operation_wait_s} * 1000;
      self.await_operation(accepted.value("operation_id", ""), deadline, [then](json operation) {
        auto result = operation.value("result", json::object());
        then(result.is_object() ? result : json::object());
      });
    });
  }
};

/// Wraps a handler: the caller must send X-API-Key (checked by /v1 as a key).
template <class Handler>
async_route_handler with_key(const e2b_ptr& api, Handler handler) {
  return [api, handler](exchange_ptr ex) {
    auto key = api_key_of(*ex);
    if (!key)
      return ex->respond(e2b_error(401, "send your airlock API key in the X-API-Key header"));
    handler(e2b_call{api, ex, *key});
  };
}

/// A JSON object body (empty: {}); nullopt after answering 400.
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

/// A timeout in seconds from `body` (`field`), within 1..max; nullopt after answering 400.
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

/// An optional `timeout` of `body` into `out` (absent or null: none); false
/// after answering 400.
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

/// What E2B's create asks that airlock cannot do yet; "" when nothing.
std::string unsupported_create_fields(const json& body) {
  for (const char* field : {"mcp", "volumeMounts", "autoResume"}) {
    auto found = body.find(field);
    if (found != body.end() && !found->is_null() && !(found->is_array() && found->empty())
        && !(found->is_object() && found->empty()))
      return std::string(field) + " is not supported by airlock's E2B front (docs/e2b.md)";
  }
  return {};
}

/// E2B's network settings as airlock's egress policy. E2B lets allowOut win
/// over denyOut; airlock's egress is an allowlist of names, so what maps is:
/// deny all traffic ("0.0.0.0/0") and allow names (an allowlist; none when
/// no name), or deny nothing (open). `egress` stays null when the settings
/// name neither list; `error` says what airlock cannot enforce.
struct egress_mapping {
  json egress;
  std::string error;
};

egress_mapping egress_of_network(const json& network) {
  if (!network.is_object())
    return {nullptr, "network must be an object"};
  for (const char* field : {"egressProxy", "rules", "maskRequestHost", "httpsPorts"}) {
    auto found = network.find(field);
    if (found != network.end() && !found->is_null() && !(found->is_object() && found->empty())
        && !(found->is_array() && found->empty()))
      return {nullptr, std::string("network.") + field
                         + " is not supported by airlock's E2B front (docs/e2b.md)"};
  }
  auto list = [&network](const char* name) -> std::optional<json> {
    auto found = network.find(name);
    if (found == network.end() || found->is_null())
      return std::nullopt;
    return *found;
  };
  auto allow = list("allowOut");
  auto deny = list("denyOut");
  if (!allow && !deny)
    return {};
  if ((allow && !allow->is_array()) || (deny && !deny->is_array()))
    return {nullptr, "allowOut and denyOut must be lists of strings"};
  bool deny_all = false;
  for (const auto& entry : deny.value_or(json::array())) {
    if (entry != "0.0.0.0/0")
      return {nullptr, "airlock's egress has no deny list: deny all traffic (denyOut "
                       "[\"0.0.0.0/0\"]) and allow names in allowOut"};
    deny_all = true;
  }
  json names = json::array();
  for (const auto& entry : allow.value_or(json::array())) {
    if (!entry.is_string() || entry.get_ref<const std::string&>().find('/') != std::string::npos)
      return {nullptr, "allowOut entries must be host names (api.example.com, *.example.com): "
                       "airlock's egress judges names, not addresses"};
    names.push_back(entry);
  }
  if (!deny_all)
    return {{{"profile", "open"}}, {}};
  if (names.empty())
    return {{{"profile", "none"}}, {}};
  return {{{"profile", "allowlist"}, {"allow", names}}, {}};
}

void create(e2b_call call) {
  auto body = object_body(call);
  if (!body)
    return;
  auto template_id = body->find("templateID");
  if (template_id == body->end() || !template_id->is_string() || template_id->empty())
    return call.ex->respond(
      e2b_error(400, "templateID (a template's name or a snapshot's id) is required"));
  if (auto unsupported = unsupported_create_fields(*body); !unsupported.empty())
    return call.ex->respond(e2b_error(400, unsupported));
  auto timeout = timeout_of(call, *body, call.api->options.default_timeout_s);
  if (!timeout)
    return;
  // A snapshot's id (E2B creates from snapshots by templateID) is a checkpoint.
  const auto& name = template_id->get_ref<const std::string&>();
  json spec =
    name.starts_with("ckpt_") ? json{{"from_checkpoint", name}} : json{{"template", name}};
  if (auto metadata = body->find("metadata"); metadata != body->end() && !metadata->is_null())
    spec["metadata"] = *metadata;
  if (auto env = body->find("envVars"); env != body->end() && !env->is_null())
    spec["env"] = *env;
  // E2B's timeout: the sandbox is killed when it passes, or paused with
  // autoPause (airlock suspends it when it has been idle that long).
  if (body->value("autoPause", false)) {
    spec["idle_timeout_s"] = *timeout;
    spec["on_idle"] = "suspend";
  } else {
    spec["max_lifetime_s"] = *timeout;
  }
  if (auto network = body->find("network"); network != body->end() && !network->is_null()) {
    auto mapped = egress_of_network(*network);
    if (!mapped.error.empty())
      return call.ex->respond(e2b_error(400, mapped.error));
    if (!mapped.egress.is_null())
      spec["egress"] = mapped.egress;
  }
  if (auto internet = body->find("allow_internet_access");
      internet != body->end() && internet->is_boolean() && !internet->get<bool>())
    spec["egress"] = {{"profile", "none"}};
  call.v1_json(http::verb::post, "/v1/sandboxes", spec, [call](json accepted) {
    auto id = accepted.value("sandbox_id", "");
    auto deadline = call.api->clock->now_ms() + int64_t{call.api->options.operation_wait_s} * 1000;
    call.await_operation(accepted.value("operation_id", ""), deadline,
                         [call, id](json) { call.answer_sandbox(id, http::status::created); });
  });
}

void get_sandbox(e2b_call call) {
  call.sandbox([call](json sandbox) {
    call.ex->respond(json_response(http::status::ok, detail_json(*call.api, sandbox)));
  });
}

void kill_sandbox(e2b_call call) {
  call.sandbox([call](json sandbox) {
    call.run_operation(http::verb::delete_, "/v1/sandboxes/" + sandbox["id"].get<std::string>(),
                       nullptr, [call](json) { call.ex->respond(no_content()); });
  });
}

/// The SDK's metadata filter: one query value holding a form ("k=v&k2=v2"),
/// each key and value percent-encoded.
std::string metadata_filter(const std::string& form) {
  std::string out;
  size_t start = 0;
  while (start < form.size()) {
    auto end = form.find('&', start);
    if (end == std::string::npos)
      end = form.size();
    auto pair = std::string_view(form).substr(start, end - start);
    auto eq = pair.find('=');
    if (eq != std::string_view::npos && eq > 0)
      out += "&metadata." + percent_encode(percent_decode(pair.substr(0, eq), false)) + "="
             + percent_encode(percent_decode(pair.substr(eq + 1), false));
    start = end + 1;
  }
  return out;
}

void list_sandboxes(e2b_call call) {
  const auto& ex = *call.ex;
  auto limit = ex.query("limit").value_or("100");
  std::string target = "/v1/sandboxes?limit=" + percent_encode(limit);
  if (auto token = ex.query("nextToken"); token && !token->empty())
    target += "&cursor=" + percent_encode(*token);
  if (auto metadata = ex.query("metadata"))
    target += metadata_filter(*metadata);
  std::string wanted = ex.query("state").value_or("running,paused");
  call.v1_json(http::verb::get, target, nullptr, [call, wanted](json page) {
    json items = json::array();
    for (const auto& sandbox : page.value("items", json::array())) {
      auto state = e2b_state(sandbox.value("state", ""));
      if (!state || ("," + wanted + ",").find("," + *state + ",") == std::string::npos)
        continue;
      auto listed = detail_json(*call.api, sandbox);
      listed.erase("lifecycle");
      items.push_back(std::move(listed));
    }
    auto response = json_response(http::status::ok, items);
    if (auto next = page.value("next_cursor", json()); next.is_string() && !next.empty())
      response.set("X-Next-Token", next.get<std::string>());
    call.ex->respond(std::move(response));
  });
}

/// E2B's setTimeout: the sandbox now ends `timeout` seconds from now.
/// Makes `sandbox` time out `timeout` seconds of running from now (its idle
/// timeout for an autoPause one); then `then`.
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

void set_timeout(e2b_call call) {
  auto body = object_body(call);
  if (!body)
    return;
  if (!body->contains("timeout"))
    return call.ex->respond(e2b_error(400, "timeout (seconds) is required"));
  auto timeout = timeout_of(call, *body, 0);
  if (!timeout)
    return;
  call.sandbox([call, timeout = *timeout](json sandbox) {
    time_out_in(call, sandbox, timeout, [call] { call.ex->respond(no_content()); });
  });
}

/// E2B's refresh (keep-alive): the sandbox runs at least `duration` seconds
/// (0..3600, default 60) from now; a later end stays.
void refresh_sandbox(e2b_call call) {
  auto body = object_body(call);
  if (!body)
    return;
  int64_t duration = 60;
  if (auto asked = body->find("duration"); asked != body->end() && !asked->is_null()) {
    if (!asked->is_number_unsigned() || asked->get<uint64_t>() > 3600)
      return call.ex->respond(e2b_error(400, "duration must be whole seconds from 0 to 3600"));
    duration = asked->get<int64_t>();
  }
  call.sandbox([call, duration](json sandbox) {
    const auto wanted = call.api->clock->now_ms() + duration * 1000;
    if (end_at_ms(*call.api, sandbox) >= wanted)
      return call.ex->respond(no_content());
    time_out_in(call, sandbox, duration, [call] { call.ex->respond(no_content()); });
  });
}

/// PUT /sandboxes/{id}/network: the sandbox's egress from now on (new
/// connections; open ones keep theirs), as egress_of_network maps it;
/// allow_internet_access false is none, true open.
void update_network(e2b_call call) {
  auto body = object_body(call);
  if (!body)
    return;
  auto mapped = egress_of_network(*body);
  if (!mapped.error.empty())
    return call.ex->respond(e2b_error(400, mapped.error));
  if (auto internet = body->find("allow_internet_access");
      internet != body->end() && internet->is_boolean())
    mapped.egress = {{"profile", internet->get<bool>() ? "open" : "none"}};
  if (mapped.egress.is_null())
    mapped.egress = {{"profile", "open"}}; // E2B's network without rules: everything allowed
  call.sandbox([call, egress = mapped.egress](json sandbox) {
    call.v1_json(http::verb::patch, "/v1/sandboxes/" + sandbox["id"].get<std::string>(),
                 json{{"egress", egress}}, [call](json) { call.ex->respond(no_content()); });
  });
}

/// Sandbox logs: airlock keeps none beyond each process's own output.
void sandbox_logs(e2b_call call) {
  call.ex->respond(e2b_error(501, "airlock keeps no sandbox logs: read a command's output as "
                                  "it runs (commands.run's onStdout, or connect to it)"));
}

/// E2B's pause is airlock's suspend: files kept, processes end.
void pause_sandbox(e2b_call call) {
  call.sandbox([call](json sandbox) {
    auto id = sandbox["id"].get<std::string>();
    if (sandbox.value("state", "") != "running")
      return call.ex->respond(e2b_error(409, "sandbox \"" + id + "\" is already paused"));
    call.run_operation(http::verb::post, "/v1/sandboxes/" + id + "/suspend", nullptr,
                       [call](json) { call.ex->respond(no_content()); });
  });
}

/// Connect: 200 with the sandbox when it runs, 201 after resuming a paused one.
void connect_sandbox(e2b_call call) {
  auto body = object_body(call);
  if (!body)
    return;
  std::optional<int64_t> timeout;
  if (!optional_timeout(call, *body, timeout))
    return;
  call.sandbox([call, timeout](json sandbox) {
    auto id = sandbox["id"].get<std::string>();
    // With a timeout, the sandbox then times out that long from now (as setTimeout).
    auto answer = [call, id, timeout](http::status status) {
      if (!timeout)
        return call.answer_sandbox(id, status);
      call.v1_json(
        http::verb::get, "/v1/sandboxes/" + id, nullptr, [call, id, timeout, status](json now) {
          time_out_in(call, now, *timeout, [call, id, status] { call.answer_sandbox(id, status); });
        });
    };
    const auto state = sandbox.value("state", "");
    if (state == "running")
      return answer(http::status::ok);
    const char* verb = state == "paused" ? "/resume" : "/restore";
    call.run_operation(http::verb::post, "/v1/sandboxes/" + id + verb, nullptr,
                       [answer](json) { answer(http::status::created); });
  });
}

/// E2B's snapshot is airlock's checkpoint (files, and memory where the
/// runtime keeps it); its id creates sandboxes as a templateID.
json snapshot_json(const json& checkpoint) {
  json names = json::array();
  if (auto label = checkpoint.value("label", ""); !label.empty())
    names.push_back(label);
  return {{"snapshotID", checkpoint.value("id", "")}, {"names", names}};
}

void create_snapshot(e2b_call call) {
  auto body = object_body(call);
  if (!body)
    return;
  json params = json::object();
  if (auto name = body->find("name"); name != body->end() && !name->is_null()) {
    if (!name->is_string())
      return call.ex->respond(e2b_error(400, "name must be a string"));
    params["label"] = *name;
  }
  call.sandbox([call, params](json sandbox) {
    auto id = sandbox["id"].get<std::string>();
    call.run_operation(
      http::verb::post, "/v1/sandboxes/" + id + "/checkpoints", params, [call](json result) {
        auto checkpoint = result.value("checkpoint_id", "");
        call.v1_json(
          http::verb::get, "/v1/checkpoints/" + checkpoint, nullptr, [call](json stored) {
            call.ex->respond(json_response(http::status::created, snapshot_json(stored)));
          });
      });
  });
}

/// GET /snapshots?sandboxID=&limit=&nextToken=: the caller's snapshots,
/// newest first; the token is the number already listed.
void list_snapshots(e2b_call call) {
  const auto& ex = *call.ex;
  std::string target = "/v1/checkpoints";
  if (auto sandbox = ex.query("sandboxID"); sandbox && !sandbox->empty())
    target += "?sandbox_id=" + percent_encode(*sandbox);
  size_t limit = 100;
  size_t skip = 0;
  auto number = [](std::optional<std::string> text, size_t& out) {
    if (!text || text->empty())
      return true;
    auto [end, failed] = std::from_chars(text->data(), text->data() + text->size(), out);
    return failed == std::errc{} && end == text->data() + text->size();
  };
  if (!number(ex.query("limit"), limit) || limit < 1 || limit > 100)
    return call.ex->respond(e2b_error(400, "limit must be a whole number from 1 to 100"));
  if (!number(ex.query("nextToken"), skip))
    return call.ex->respond(e2b_error(400, "nextToken must be one this call returned"));
  std::optional<std::string> name = ex.query("name");
  call.v1_json(http::verb::get, target, nullptr, [call, limit, skip, name](json page) {
    auto items = page.value("items", json::array());
    json out = json::array();
    size_t seen = 0;
    for (auto it = items.rbegin(); it != items.rend() && out.size() < limit; ++it) {
      if (name && !name->empty() && it->value("label", "") != *name)
        continue;
      if (seen++ < skip)
        continue;
      out.push_back(snapshot_json(*it));
    }
    auto response = json_response(http::status::ok, out);
    if (out.size() == limit)
      response.set("X-Next-Token", std::to_string(skip + limit));
    call.ex->respond(std::move(response));
  });
}

/// DELETE /templates/{id}: the SDK's deleteSnapshot (a checkpoint's id), or
/// a template by name.
void delete_template(e2b_call call) {
  const std::string id(call.ex->path_param("id"));
  if (!id.starts_with("ckpt_"))
    return call.run_operation(http::verb::delete_, "/v1/templates/" + percent_encode(id), nullptr,
                              [call](json) { call.ex->respond(no_content()); });
  call.run_operation(http::verb::delete_, "/v1/checkpoints/" + id, nullptr,
                     [call](json) { call.ex->respond(no_content()); });
}

/// E2B's fork: one checkpoint, then `count` sandboxes from it, each answered
/// as a Sandbox (or the error that kept it from starting); with a timeout,
/// each times out that long from now.
void fork_sandbox(e2b_call call) {
  auto body = object_body(call);
  if (!body)
    return;
  int64_t count = 1;
  if (auto asked = body->find("count"); asked != body->end() && !asked->is_null()) {
    if (!asked->is_number_integer())
      return call.ex->respond(e2b_error(400, "count must be a whole number"));
    count = asked->get<int64_t>();
  }
  std::optional<int64_t> timeout;
  if (!optional_timeout(call, *body, timeout))
    return;
  call.sandbox([call, count, timeout](json sandbox) {
    auto id = sandbox["id"].get<std::string>();
    call.run_operation(
      http::verb::post, "/v1/sandboxes/" + id + "/fork", json{{"count", count}},
      [call, timeout](json result) {
        struct tally {
          json entries = json::array();
          size_t pending = 0;
        };
        auto state = std::make_shared<tally>();
        for (const auto& failed : result.value("failed", json::array())) {
          auto error = failed.value("error", json::object());
          state->entries.push_back(
            {{"error",
              {{"code", status_of_failure(error.value("code", ""))},
               {"message", failed.value("sandbox_id", "") + ": " + error.value("message", "")}}}});
        }
        auto started = result.value("sandbox_ids", json::array());
        state->pending = started.size();
        if (state->pending == 0)
          return call.ex->respond(json_response(http::status::created, state->entries));
        for (const auto& started_id : started) {
          auto fork_id = started_id.get<std::string>();
          auto answer = [call, state, fork_id] {
            call.sandbox_with_token(fork_id, [call, state](json out) {
              state->entries.push_back({{"sandbox", std::move(out)}});
              if (--state->pending == 0)
                call.ex->respond(json_response(http::status::created, state->entries));
            });
          };
          if (!timeout) {
            answer();
            continue;
          }
          call.v1_json(
            http::verb::get, "/v1/sandboxes/" + fork_id, nullptr,
            [call, timeout, answer](json now) { time_out_in(call, now, *timeout, answer); });
        }
      });
  });
}

/// GET /sandboxes/{id}/metrics: one reading, now (airlock keeps no history;
/// docs/e2b.md), when it falls in [start, end]; a paused sandbox has none.
void sandbox_metrics(e2b_call call) {
  const auto now_s = call.api->clock->now_ms() / 1000;
  auto bound = [&call](const char* name, int64_t fallback) -> std::optional<int64_t> {
    auto text = call.ex->query(name);
    if (!text || text->empty())
      return fallback;
    int64_t value = 0;
    auto [end, failed] = std::from_chars(text->data(), text->data() + text->size(), value);
    if (failed != std::errc{} || end != text->data() + text->size())
      return std::nullopt;
    return value;
  };
  auto start = bound("start", 0);
  auto end = bound("end", now_s + 1);
  if (!start || !end)
    return call.ex->respond(e2b_error(400, "start and end must be Unix seconds"));
  call.sandbox([call, start = *start, end = *end, now_s](json sandbox) {
    if (sandbox.value("state", "") != "running" || now_s < start || now_s > end)
      return call.ex->respond(json_response(http::status::ok, json::array()));
    auto id = sandbox["id"].get<std::string>();
    call.v1_json(http::verb::get, "/v1/sandboxes/" + id + "/usage", nullptr,
                 [call, sandbox](json usage) {
                   const auto at_ms = unix_ms_of(usage.value("sampled_at", json()));
                   const auto cpus = std::max(1, (sandbox.value("cpu_millis", 1000) + 999) / 1000);
                   const uint64_t mib = uint64_t{1} << 20;
                   json metric = {{"timestamp", rfc3339(at_ms)},
                                  {"timestampUnix", at_ms / 1000},
                                  {"cpuCount", cpus},
                                  // E2B's share is of all the sandbox's CPUs; airlock's of one.
                                  {"cpuUsedPct", usage.value("cpu_used_pct", 0.0) / cpus},
                                  {"memUsed", usage.value("memory_bytes", uint64_t{0})},
                                  {"memTotal", sandbox.value("memory_mb", uint64_t{0}) * mib},
                                  {"memCache", 0},
                                  {"diskUsed", usage.value("disk_used_bytes", uint64_t{0})},
                                  {"diskTotal", sandbox.value("disk_mb", uint64_t{0}) * mib}};
                   call.ex->respond(json_response(http::status::ok, json::array({metric})));
                 });
  });
}

} // namespace

void add_e2b_routes(route_table& routes, std::shared_ptr<const route_table> inner,
                    const wall_clock* clock, std::shared_ptr<envd_token_book> tokens,
                    e2b_options options) {
  auto api =
    std::make_shared<const e2b_api>(e2b_api{std::move(inner), clock, std::move(tokens), options});
  using http::verb;
  routes.add_async(verb::post, "/e2b/v2/sandboxes", with_key(api, create));
  routes.add_async(verb::get, "/e2b/v2/sandboxes", with_key(api, list_sandboxes));
  routes.add_async(verb::get, "/e2b/sandboxes/{id}", with_key(api, get_sandbox));
  routes.add_async(verb::delete_, "/e2b/sandboxes/{id}", with_key(api, kill_sandbox));
  routes.add_async(verb::post, "/e2b/sandboxes/{id}/timeout", with_key(api, set_timeout));
  routes.add_async(verb::post, "/e2b/sandboxes/{id}/pause", with_key(api, pause_sandbox));
  routes.add_async(verb::post, "/e2b/sandboxes/{id}/refreshes", with_key(api, refresh_sandbox));
  routes.add_async(verb::put, "/e2b/sandboxes/{id}/network", with_key(api, update_network));
  routes.add_async(verb::get, "/e2b/sandboxes/{id}/logs", with_key(api, sandbox_logs));
  routes.add_async(verb::get, "/e2b/v2/sandboxes/{id}/logs", with_key(api, sandbox_logs));
  routes.add_async(verb::post, "/e2b/v2/sandboxes/{id}/connect", with_key(api, connect_sandbox));
  routes.add_async(verb::post, "/e2b/sandboxes/{id}/snapshots", with_key(api, create_snapshot));
  routes.add_async(verb::get, "/e2b/snapshots", with_key(api, list_snapshots));
  routes.add_async(verb::delete_, "/e2b/templates/{id}", with_key(api, delete_template));
  routes.add_async(verb::post, "/e2b/sandboxes/{id}/fork", with_key(api, fork_sandbox));
  routes.add_async(verb::get, "/e2b/sandboxes/{id}/metrics", with_key(api, sandbox_metrics));
}

} // namespace airlock::gateway
