#include "gateway/e2b_routes.hpp"

#include <algorithm>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>

#include "gateway/e2b_rest_internal.hpp"
#include "gateway/exchange.hpp"
#include "gateway/internal_call.hpp"

namespace airlock::gateway {

namespace {

using namespace e2b_rest;

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
  add_e2b_snapshot_routes(routes, api);
}

} // namespace airlock::gateway
