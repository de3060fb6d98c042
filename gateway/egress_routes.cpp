#include "gateway/egress_routes.hpp"

#include <charconv>
#include <ctime>
#include <memory>
#include <utility>

#include "actors/audit_actor.hpp"
#include "gateway/api_common.hpp"

namespace airlock::gateway {

namespace {

using namespace detail;
using nlohmann::json;
using std::chrono::milliseconds;
using caller = actors::caller_identity;
using deps_ptr = std::shared_ptr<const control_api_deps>;

status bad(std::string message) { return make_status(errc::invalid_argument, std::move(message)); }

milliseconds call_timeout(const control_api_deps& deps) {
  return milliseconds(deps.options.actor_call_timeout_ms);
}

std::string scope_of(const caller& who) { return who.admin ? std::string{} : who.tenant_id; }

template <class Handler>
async_route_handler authed(deps_ptr deps, Handler handler) {
  return [deps, handler](exchange_ptr ex) {
    authenticate(*deps->system, deps->api_keys, call_timeout(*deps), ex,
                 [deps, handler, ex](caller who) { handler(deps, ex, std::move(who)); });
  };
}

result<std::string> text_field(const json& body, const char* name) {
  auto found = body.find(name);
  if (found == body.end() || !found->is_string())
    return bad(std::string(name) + " (a string) is required");
  return found->get<std::string>();
}

status read_scope(const json& body, actors::credential_request& out) {
  auto scope = body.find("scope");
  if (scope == body.end() || !scope->is_object() || scope->size() != 1)
    return bad("scope must be an object with exactly one of tenant, template or sandbox");
  const auto& [kind, value] = *scope->items().begin();
  auto parsed = schema::parse_credential_scope(kind);
  if (!parsed)
    return bad("scope must be an object with exactly one of tenant, template or sandbox");
  out.scope = *parsed;
  if (*parsed == schema::credential_scope::tenant && value.is_boolean() && value.get<bool>())
    return status::ok(); // the caller's tenant, filled in by the route
  if (!value.is_string()
      || (value.get_ref<const std::string&>().empty()
          && *parsed != schema::credential_scope::tenant))
    return bad("scope." + kind + " must be a non-empty string");
  out.scope_value = value.get<std::string>();
  return status::ok();
}

status read_inject(const json& body, actors::credential_request& out) {
  auto inject = body.find("inject");
  if (inject == body.end() || !inject->is_object())
    return bad("inject must be an object {\"header\": ..., \"value_template\": \"... {secret}\"}");
  auto header = text_field(*inject, "header");
  if (!header)
    return bad("inject." + header.error().message);
  auto value = text_field(*inject, "value_template");
  if (!value)
    return bad("inject." + value.error().message);
  out.header = std::move(*header);
  out.value_template = std::move(*value);
  return status::ok();
}

status read_hosts_and_limit(const json& body, actors::credential_request& out) {
  auto hosts = body.find("hosts");
  if (hosts == body.end() || !hosts->is_array())
    return bad("hosts must be an array of host patterns");
  for (const auto& host : *hosts) {
    if (!host.is_string())
      return bad("hosts entries must be strings");
    out.hosts.push_back(host.get<std::string>());
  }
  if (auto rate = body.find("rate_limit_per_min"); rate != body.end() && !rate->is_null()) {
    if (!rate->is_number_unsigned() || rate->get<uint64_t>() > UINT32_MAX)
      return bad("rate_limit_per_min must be a whole number from 0 to 1000000");
    out.rate_limit_per_min = static_cast<uint32_t>(rate->get<uint64_t>());
  }
  return status::ok();
}

} // namespace

result<actors::credential_request> parse_credential_request(const nlohmann::json& body) {
  actors::credential_request out;
  auto name = text_field(body, "name");
  if (!name)
    return name.error();
  out.name = std::move(*name);
  auto secret = text_field(body, "secret");
  if (!secret)
    return secret.error();
  out.secret = std::move(*secret);
  for (auto* step : {&read_scope, &read_inject, &read_hosts_and_limit})
    if (auto read = (*step)(body, out); !read)
      return read;
  return out;
}

nlohmann::json to_json(const schema::credential_record& r) {
  return json{{"id", r.id},
              {"tenant_id", r.tenant_id},
              {"name", r.name},
              {"scope", {{std::string(schema::to_string(r.scope)), r.scope_value}}},
              {"hosts", r.hosts},
              {"inject", {{"header", r.header}, {"value_template", r.value_template}}},
              {"rate_limit_per_min", r.rate_limit_per_min},
              {"created_at", timestamp_json(r.created_at_ms)}};
}

nlohmann::json to_json(const schema::audit_record& r) {
  return json{{"at", timestamp_json(r.at_ms)},
              {"tenant_id", r.tenant_id},
              {"sandbox_id", r.sandbox_id},
              {"kind", r.kind},
              {"decision", r.decision},
              {"reason", r.reason},
              {"target", r.target},
              {"detail", r.detail}};
}

std::optional<int64_t> parse_time_ms(std::string_view text) {
  int64_t ms = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), ms);
  if (error == std::errc{} && end == text.data() + text.size())
    return ms >= 0 ? std::optional<int64_t>(ms) : std::nullopt;
  std::tm utc{};
  std::string copy(text);
  const char* rest = ::strptime(copy.c_str(), "%Y-%m-%dT%H:%M:%S", &utc);
  if (rest == nullptr)
    return std::nullopt;
  int64_t fraction_ms = 0;
  if (*rest == '.') {
    int digits = 0;
    for (++rest; *rest >= '0' && *rest <= '9'; ++rest, ++digits)
      if (digits < 3)
        fraction_ms = fraction_ms * 10 + (*rest - '0');
    for (; digits < 3; ++digits)
      fraction_ms *= 10;
  }
  if (std::string_view(rest) != "Z")
    return std::nullopt;
  return static_cast<int64_t>(::timegm(&utc)) * 1000 + fraction_ms;
}

namespace {

// --- credentials ----------------------------------------------------------------

http_response unavailable(const char* what) {
  return json_error(http::status::service_unavailable, "unavailable",
                    std::string(what) + " is not running on this control plane");
}

void store_credential(deps_ptr deps, exchange_ptr ex, actors::credential_request request) {
  call_actor(
    *deps->system, deps->credentials, call_timeout(*deps),
    [ex](schema::credential_record& record) {
      ex->respond(json_response(http::status::created, to_json(record)));
    },
    answer_error(ex), actors::cr_create_atom::value, std::move(request));
}

void create_credential(deps_ptr deps, exchange_ptr ex, caller who) {
  if (!deps->credentials)
    return ex->respond(unavailable("the credential service"));
  auto body = parse_object(ex->request().body());
  if (!body)
    return ex->respond(error_response(body.error()));
  auto request = parse_credential_request(*body);
  if (!request)
    return ex->respond(error_response(request.error()));
  request->tenant_id = who.tenant_id;
  using schema::credential_scope;
  if (request->scope == credential_scope::tenant) {
    if (request->scope_value.empty())
      request->scope_value = who.tenant_id;
    if (request->scope_value != who.tenant_id && !who.admin)
      return ex->respond(
        json_error(http::status::bad_request, "invalid_argument",
                   "scope.tenant must be your own tenant (" + who.tenant_id + ") or true"));
    request->tenant_id = request->scope_value; // an admin may create for any tenant
  }
  if (auto valid = actors::validate_credential_request(*request, {}); !valid)
    return ex->respond(error_response(valid.error()));
  if (request->scope != credential_scope::sandbox)
    return store_credential(deps, ex, std::move(*request));
  // A sandbox scope names a sandbox the caller can see; it belongs to its tenant.
  auto sandbox_id = request->scope_value;
  call_actor(
    *deps->system, deps->registry, call_timeout(*deps),
    [deps, ex, request = std::move(*request)](schema::sandbox_record& sandbox) mutable {
      request.tenant_id = sandbox.tenant_id;
      store_credential(deps, ex, std::move(request));
    },
    answer_error(ex), actors::rg_get_atom::value, sandbox_id, scope_of(who));
}

void list_credentials(deps_ptr deps, exchange_ptr ex, caller who) {
  if (!deps->credentials)
    return ex->respond(unavailable("the credential service"));
  auto limit = list_limit(*ex, deps->options.list_limit_max);
  if (!limit)
    return ex->respond(error_response(limit.error()));
  call_actor(
    *deps->system, deps->credentials, call_timeout(*deps),
    [ex](actors::credential_page& page) {
      json items = json::array();
      for (const auto& record : page.items)
        items.push_back(to_json(record));
      json next = page.next_cursor.empty() ? json(nullptr) : json(page.next_cursor);
      ex->respond(json_response(http::status::ok, {{"items", items}, {"next_cursor", next}}));
    },
    answer_error(ex), actors::cr_list_atom::value, scope_of(who), static_cast<uint32_t>(*limit),
    ex->query("cursor").value_or(""));
}

void get_credential(deps_ptr deps, exchange_ptr ex, caller who) {
  if (!deps->credentials)
    return ex->respond(unavailable("the credential service"));
  call_actor(
    *deps->system, deps->credentials, call_timeout(*deps),
    [ex](schema::credential_record& record) {
      ex->respond(json_response(http::status::ok, to_json(record)));
    },
    answer_error(ex), actors::cr_get_atom::value, std::string(ex->path_param("id")), scope_of(who));
}

void delete_credential(deps_ptr deps, exchange_ptr ex, caller who) {
  if (!deps->credentials)
    return ex->respond(unavailable("the credential service"));
  auto id = std::string(ex->path_param("id"));
  call_actor(
    *deps->system, deps->credentials, call_timeout(*deps),
    [ex, id](bool) {
      ex->respond(json_response(http::status::ok, {{"id", id}, {"deleted", true}}));
    },
    answer_error(ex), actors::cr_delete_atom::value, id, scope_of(who));
}

// --- audit ------------------------------------------------------------------------

result<schema::audit_query> audit_query_of(const exchange& ex, const caller& who,
                                           size_t limit_max) {
  schema::audit_query query;
  query.tenant_id = scope_of(who);
  query.sandbox_id = ex.query("sandbox_id").value_or("");
  query.kind = ex.query("kind").value_or("");
  if (!query.kind.empty() && query.kind != "egress" && query.kind != "dns"
      && query.kind != "credential" && query.kind != "lifecycle")
    return bad("?kind= must be egress, dns, credential or lifecycle");
  if (auto since = ex.query("since")) {
    auto ms = parse_time_ms(*since);
    if (!ms)
      return bad("?since= must be an RFC 3339 UTC time (2024-05-01T12:00:00Z) or Unix "
                 "milliseconds");
    query.since_ms = *ms;
  }
  auto limit = list_limit(ex, limit_max);
  if (!limit)
    return limit.error();
  query.limit = *limit;
  query.cursor = ex.query("cursor").value_or("");
  return query;
}

void query_audit(deps_ptr deps, exchange_ptr ex, caller who) {
  if (!deps->audit)
    return ex->respond(unavailable("the audit log"));
  auto query = audit_query_of(*ex, who, deps->options.list_limit_max);
  if (!query)
    return ex->respond(error_response(query.error()));
  call_actor(
    *deps->system, deps->audit, call_timeout(*deps),
    [ex](actors::audit_page& page) {
      json items = json::array();
      for (const auto& record : page.items)
        items.push_back(to_json(record));
      json next = page.next_cursor.empty() ? json(nullptr) : json(page.next_cursor);
      ex->respond(json_response(http::status::ok, {{"items", items}, {"next_cursor", next}}));
    },
    answer_error(ex), actors::au_query_atom::value, *query);
}

} // namespace

void add_egress_routes(route_table& routes, const control_api_deps& deps) {
  auto shared = std::make_shared<const control_api_deps>(deps);
  route_options json_body{deps.options.json_body_bytes_max};
  using http::verb;
  routes.add_async(verb::post, "/v1/credentials", authed(shared, create_credential), json_body);
  routes.add_async(verb::get, "/v1/credentials", authed(shared, list_credentials));
  routes.add_async(verb::get, "/v1/credentials/{id}", authed(shared, get_credential));
  routes.add_async(verb::delete_, "/v1/credentials/{id}", authed(shared, delete_credential));
  routes.add_async(verb::get, "/v1/audit", authed(shared, query_audit));
}

void push_egress_to_worker(const control_api_deps& deps, schema::sandbox_record record) {
  if (record.worker_id.empty() || record.state == schema::sandbox_state::destroyed
      || !deps.scheduler)
    return;
  auto system = deps.system;
  auto timeout = call_timeout(deps);
  auto log = deps.log;
  auto sandbox_id = record.id;
  auto worker_id = record.worker_id;
  auto failed = [log, sandbox_id, worker_id](caf::error& error) {
    if (log)
      log->warn("the sandbox's worker did not take the new egress policy; its new connections "
                "get it when the worker next creates or restores the sandbox",
                {{"sandbox_id", sandbox_id},
                 {"worker_id", worker_id},
                 {"error", to_status(error).message}});
  };
  call_actor(
    *system, deps.scheduler, timeout,
    [system, timeout, failed, record = std::move(record)](actors::placement& where) {
      call_actor(
        *system, where.node, timeout, [](actors::node_sandbox&) {}, failed,
        actors::nd_egress_atom::value, record);
    },
    failed, actors::sc_node_atom::value, worker_id);
}

} // namespace airlock::gateway
