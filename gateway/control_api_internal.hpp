#pragma once
// Internal to gateway/: what the control-plane route files share
// (api_routes.cpp operations, sandboxes, keys, workers and metrics;
// snapshot_routes.cpp snapshots). Not a public header: api_routes.hpp is
// the contract.

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "actors/runtime_choice.hpp"
#include "gateway/api_common.hpp"
#include "gateway/api_routes.hpp"

namespace airlock::gateway::control_detail {

using namespace detail;
using std::chrono::milliseconds;

struct control_api {
  control_api_deps deps;
  milliseconds call_timeout() const { return milliseconds(deps.options.actor_call_timeout_ms); }
};

using api_ptr = std::shared_ptr<const control_api>;
using caller = actors::caller_identity;

/// The tenant whose records a caller sees: admin keys see every tenant.
std::string scope_of(const caller& who);

/// Wraps a handler that needs an authenticated caller.
template <class Handler>
async_route_handler authed(api_ptr api, Handler handler) {
  return [api, handler](exchange_ptr ex) {
    authenticate(*api->deps.system, api->deps.api_keys, api->call_timeout(), ex,
                 [api, handler, ex](caller who) { handler(api, ex, std::move(who)); });
  };
}

/// 202 with the operation's id and state (and sandbox_id for sandbox.*).
http_response accepted(const schema::operation_record& record);

/// Answers the exchange with the record as JSON.
template <class Record>
auto respond_record(exchange_ptr ex, http::status code = http::status::ok) {
  return [ex, code](Record& record) { ex->respond(json_response(code, to_json(record))); };
}

/// Creates operation `kind` on sandbox `sandbox_id` (with `params_json`)
/// and answers 202.
void start_operation(api_ptr api, exchange_ptr ex, const caller& who, std::string kind,
                     std::string sandbox_id, std::string params_json = "{}");

/// With an Idempotency-Key already used by this tenant: answers with that
/// first operation; otherwise runs `otherwise`.
void replay_or(api_ptr api, exchange_ptr ex, const caller& who, std::function<void()> otherwise);

/// Checks `verb` against the sandbox of the path (404 for another tenant's,
/// 409 wrong_state; a repeat with the same Idempotency-Key gets the first
/// answer instead), then runs `next` with the sandbox, acting as its tenant.
void with_sandbox_for(api_ptr api, exchange_ptr ex, caller who, actors::sandbox_verb verb,
                      std::function<void(schema::sandbox_record&, caller)> next);

/// A route that starts operation `kind` on the sandbox of the path once
/// `verb` is allowed (DELETE, pause, resume, wake).
async_route_handler lifecycle_verb(api_ptr owner, actors::sandbox_verb verb, std::string kind);

/// The request's body as a JSON object; an empty body is an empty object.
result<nlohmann::json> optional_object_body(const exchange& ex);

/// GET /v1/operations, /v1/operations/{id}, its events and cancel
/// (operation_routes.cpp).
void add_operation_routes(route_table& routes, const api_ptr& api);

/// POST/GET /v1/sandboxes/{id}/checkpoints, GET/DELETE /v1/checkpoints/{id},
/// POST /v1/sandboxes/{id}/suspend, restore, wake and fork
/// (snapshot_routes.cpp).
void add_snapshot_routes(route_table& routes, const api_ptr& api, const route_options& json_body);

/// A POST /v1/templates body checked: the recipe the worker builds (from,
/// run, ready_cmd, egress) and the version's defaults.
struct template_recipe {
  std::string name;
  std::string base;    ///< from.template: "NAME" or "NAME:N"; empty for debootstrap
  nlohmann::json from; ///< as the worker reads it
  nlohmann::json run = nlohmann::json::array();
  std::string ready_cmd;
  schema::sandbox_spec defaults; ///< env and egress, checked as a create's
  std::string workdir;
  std::string user;
  std::string start_cmd;
  bool has_start_cmd = false;
  /// What its sandboxes run in when a create names no runtime.
  std::string default_runtime = std::string(actors::namespace_runtime_name);
};

/// A POST /v1/templates body as a recipe (template_recipe.cpp);
/// invalid_argument saying what is wrong.
result<template_recipe> parse_recipe(const nlohmann::json& body, const api_options& options);

/// Fills a create's spec from its template's record (template_routes.cpp):
/// the version (the current one unless NAME:VERSION pins one), that
/// version's name and worker, its env under the request's, and its default
/// runtime unless `runtime_asked`; then `next`. A name the store does not
/// know is left to the worker.
void with_template_version(api_ptr api, exchange_ptr ex, const caller& who,
                           schema::sandbox_spec spec,
                           std::function<void(schema::sandbox_spec)> next,
                           bool runtime_asked = true);

/// GET /v1/templates[/{name}], PUT /v1/templates/{name}/archive, DELETE
/// /v1/templates/{name} (template_routes.cpp).
void add_template_routes(route_table& routes, const api_ptr& api, const route_options& json_body);

// ---- cluster admission (cluster_routes.cpp) ------------------------------------

/// POST /v1/cluster/tokens, GET /v1/cluster/ca, POST /v1/cluster/join.
void add_cluster_routes(route_table& routes, const api_ptr& api, const route_options& json_body);

// ---- warm pools (pool_routes.cpp) ----------------------------------------------

void add_pool_routes(route_table& routes, const api_ptr& api, const route_options& json_body);

/// A pool as GET /v1/templates/{name}/pool answers it.
nlohmann::json pool_json(const actors::pool_view& view);

/// A create that a warm pool member fits claims it (docs/pools.md); any
/// other goes to `otherwise`.
void claim_or_create(api_ptr api, exchange_ptr ex, caller who, schema::sandbox_record record,
                     std::function<void(schema::sandbox_record)> otherwise);

} // namespace airlock::gateway::control_detail
