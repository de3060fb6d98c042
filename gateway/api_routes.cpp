#include "gateway/api_routes.hpp"

#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "actors/runtime_choice.hpp"
#include "actors/sandbox_procedures.hpp"
#include "gateway/control_api_internal.hpp"
#include "gateway/e2b_routes.hpp"
#include "gateway/egress_routes.hpp"
#include "gateway/node_metrics.hpp"
#include "gateway/sse.hpp"

namespace airlock::gateway {

using nlohmann::json;

namespace control_detail {

/// The tenant whose records a caller sees: admin keys see every tenant.
std::string scope_of(const caller& who) { return who.admin ? std::string{} : who.tenant_id; }

http_response accepted(const schema::operation_record& record) {
  json body = {{"operation_id", record.id}, {"state", std::string(to_string(record.state))}};
  if (record.kind.rfind("sandbox.", 0) == 0)
    body["sandbox_id"] = record.target_id;
  return json_response(http::status::accepted, body);
}

/// Creates operation `kind` on sandbox `id` and answers 202.
void start_operation(api_ptr api, exchange_ptr ex, const caller& who, std::string kind,
                     std::string sandbox_id, std::string params_json) {
  // An API call on the sandbox is activity for the idle policy.
  caf::anon_send(api->deps.registry, actors::rg_touch_atom::value, sandbox_id);
  actors::operation_request request;
  request.kind = std::move(kind);
  request.target_id = std::move(sandbox_id);
  request.tenant_id = who.tenant_id;
  request.params_json = std::move(params_json);
  auto key = ex->request()["Idempotency-Key"];
  request.idempotency_key = std::string(key.data(), key.size());
  call_actor(
    *api->deps.system, api->deps.engine, api->call_timeout(),
    [ex](actors::create_reply& reply) { ex->respond(accepted(reply.record)); }, answer_error(ex),
    actors::op_create_atom::value, request);
}

/// With an Idempotency-Key already used by this tenant: answers with that
/// first operation and returns true.
void replay_or(api_ptr api, exchange_ptr ex, const caller& who, std::function<void()> otherwise) {
  auto field = ex->request()["Idempotency-Key"];
  auto key = std::string(field.data(), field.size());
  if (key.empty())
    return otherwise();
  if (key.size() > 256)
    return ex->respond(json_error(http::status::bad_request, "invalid_argument",
                                  "Idempotency-Key is longer than 256 bytes"));
  call_actor(
    *api->deps.system, api->deps.registry, api->call_timeout(),
    [api, ex, who, otherwise](std::string& operation_id) {
      if (operation_id.empty())
        return otherwise();
      call_actor(
        *api->deps.system, api->deps.engine, api->call_timeout(),
        [ex](schema::operation_record& record) { ex->respond(accepted(record)); }, answer_error(ex),
        actors::op_get_atom::value, operation_id, who.tenant_id);
    },
    answer_error(ex), actors::rg_opkey_atom::value, who.tenant_id, key);
}

result<json> optional_object_body(const exchange& ex) {
  if (ex.request().body().empty())
    return json::object();
  return parse_object(ex.request().body());
}

/// Checks `verb` against the sandbox's state (404 for another tenant's,
/// 409 wrong_state), then runs `next` with the sandbox, as its tenant.
void with_sandbox_for(api_ptr api, exchange_ptr ex, caller who, actors::sandbox_verb verb,
                      std::function<void(schema::sandbox_record&, caller)> next) {
  auto id = std::string(ex->path_param("id"));
  replay_or(api, ex, who, [api, ex, who, verb, id, next]() {
    call_actor(
      *api->deps.system, api->deps.registry, api->call_timeout(),
      [who, next](schema::sandbox_record& sandbox) {
        // The operation belongs to the sandbox's tenant (admin acts for it).
        next(sandbox, caller{sandbox.tenant_id, who.admin});
      },
      answer_error(ex), actors::rg_verb_atom::value, id, scope_of(who), verb);
  });
}

async_route_handler lifecycle_verb(api_ptr owner, actors::sandbox_verb verb, std::string kind) {
  return authed(owner, [verb, kind](api_ptr api, exchange_ptr ex, caller who) {
    with_sandbox_for(api, ex, who, verb,
                     [api, ex, kind](schema::sandbox_record& sandbox, caller acting) {
                       start_operation(api, ex, acting, kind, sandbox.id);
                     });
  });
}

} // namespace control_detail

namespace {

using namespace control_detail;

// --- sandboxes ------------------------------------------------------------------

/// Stores the record, so that GET works the moment the client has an id and
/// the procedure always finds it, then starts the create.
void store_and_start_create(api_ptr api, exchange_ptr ex, caller who,
                            schema::sandbox_record record) {
  call_actor(
    *api->deps.system, api->deps.registry, api->call_timeout(),
    [api, ex, who](schema::sandbox_record& stored) {
      start_operation(api, ex, who, actors::kind_sandbox_create, stored.id);
    },
    [api, ex, record](caf::error& error) {
      // The placement made at admission would otherwise hold its capacity.
      caf::anon_send(api->deps.scheduler, actors::sc_release_atom::value, record.worker_id,
                     record.id);
      answer_error(ex)(error);
    },
    actors::rg_create_atom::value, record);
}

/// Places the sandbox before anything is stored: when no worker has room the
/// answer is 503 no_capacity at once, with what is free and when to retry,
/// and nothing is left behind. A scheduler without ready workers (or slow to
/// answer) leaves the placement to the create operation, which waits for one.
void admit_then_create(api_ptr api, exchange_ptr ex, caller who, schema::sandbox_record record,
                       std::string snapshot_worker) {
  auto wanted = actors::placement_for(record, std::move(snapshot_worker));
  auto shared = std::make_shared<schema::sandbox_record>(std::move(record));
  call_actor(
    *api->deps.system, api->deps.scheduler, api->call_timeout(),
    [api, ex, who, shared](actors::placement& where) {
      shared->worker_id = where.worker_id;
      store_and_start_create(api, ex, who, std::move(*shared));
    },
    [api, ex, who, shared](caf::error& error) {
      auto refused = to_status(error);
      if (refused.code != errc::resource_exhausted)
        return store_and_start_create(api, ex, who, std::move(*shared));
      auto response = json_error(http::status::service_unavailable, "no_capacity", refused.message);
      response.set(http::field::retry_after,
                   std::to_string(api->deps.options.no_capacity_retry_after_s));
      ex->respond(std::move(response));
    },
    actors::sc_place_atom::value, wanted);
}

/// The create's runtime: `runtime`, else the metadata's airlock.runtime (a
/// sandbox's metadata carries it, actors/runtime_choice.hpp), else namespace.
result<std::string> requested_runtime(const json& body, const schema::sandbox_spec& spec) {
  std::string runtime = actors::runtime_of(spec);
  if (auto field = body.find("runtime"); field != body.end() && !field->is_null()) {
    if (!field->is_string())
      return make_status(errc::invalid_argument, "runtime must be \"namespace\" or \"microvm\"");
    runtime = field->get<std::string>();
  }
  if (!actors::is_runtime_name(runtime))
    return make_status(errc::invalid_argument,
                       "runtime must be \"namespace\" or \"microvm\", not \"" + runtime + "\"");
  return runtime;
}

/// Calls `next` when some ready worker offers `runtime` (every worker offers
/// namespace); else 409 runtime_unavailable saying what is missing, before
/// anything is stored. The scheduler then places it only on such a worker.
void with_runtime_offered(api_ptr api, exchange_ptr ex, const std::string& runtime,
                          std::function<void()> next) {
  if (runtime == actors::namespace_runtime_name)
    return next();
  call_actor(
    *api->deps.system, api->deps.scheduler, api->call_timeout(),
    [ex, runtime, next](std::vector<actors::worker_view>& workers) {
      bool offered = std::any_of(workers.begin(), workers.end(), [&runtime](const auto& worker) {
        const auto& runtimes = worker.registration.runtimes;
        return worker.state == "ready"
               && std::find(runtimes.begin(), runtimes.end(), runtime) != runtimes.end();
      });
      if (offered)
        return next();
      ex->respond(json_error(
        http::status::conflict, "runtime_unavailable",
        "no ready worker offers the " + runtime
          + " runtime: start airlockd with --microvm auto on a host with "
            "qemu-system-x86_64, qboot, mkfs.ext4, busybox, objcopy and xz (docs/microvm.md); "
            "GET /v1/workers lists each worker's runtimes"));
    },
    answer_error(ex), actors::sc_workers_atom::value);
}

/// The create once its spec is checked: the template's default egress, the
/// template version (or the checkpoint's) and, when the request named none,
/// the version's default runtime; then, once that runtime is offered,
/// placement.
void create_sandbox_checked(api_ptr api, exchange_ptr ex, caller who, const json& body,
                            schema::sandbox_spec spec, bool runtime_asked) {
  // The template's default egress when the request names none.
  const auto& defaults = api->deps.options.template_egress;
  if (auto found = defaults.find(spec.template_name);
      !body.contains("egress") && found != defaults.end())
    spec.egress = found->second;
  auto create = [api, ex, who](schema::sandbox_spec wanted, std::string snapshot_worker) {
    const auto runtime = actors::runtime_of(wanted);
    with_runtime_offered(api, ex, runtime, [api, ex, who, wanted, snapshot_worker]() {
      replay_or(api, ex, who, [api, ex, who, wanted, snapshot_worker]() {
        auto now = api->deps.clock->now_ms();
        schema::sandbox_record record;
        record.id = make_id("sb_", now, *api->deps.entropy);
        record.tenant_id = who.tenant_id;
        record.state = schema::sandbox_state::creating;
        record.spec = wanted;
        record.created_at_ms = now;
        record.last_active_at_ms = now;
        // A pool member of the same runtime (and for a VM the same shape)
        // is claimed when one fits.
        if (snapshot_worker.empty() && api->deps.pools)
          return claim_or_create(api, ex, who, std::move(record),
                                 [api, ex, who](schema::sandbox_record cold) {
                                   admit_then_create(api, ex, who, std::move(cold), {});
                                 });
        admit_then_create(api, ex, who, std::move(record), snapshot_worker);
      });
    });
  };
  if (spec.from_checkpoint.empty())
    return with_template_version(
      api, ex, who, std::move(spec),
      [create](schema::sandbox_spec resolved) { create(std::move(resolved), {}); }, runtime_asked);
  // From a checkpoint: the caller's own, complete one; the sandbox takes its
  // template and starts on the worker that holds it.
  auto checkpoint_id = spec.from_checkpoint; // read before spec moves into the reply handler
  call_actor(
    *api->deps.system, api->deps.registry, api->call_timeout(),
    [api, ex, who, create, runtime_asked,
     spec = std::move(spec)](schema::snapshot_record& checkpoint) mutable {
      if (checkpoint.kind != schema::snapshot_kind::checkpoint)
        return ex->respond(
          json_error(http::status::not_found, "not_found", "no checkpoint " + checkpoint.id));
      if (!checkpoint.complete)
        return ex->respond(json_error(http::status::conflict, "wrong_state",
                                      "checkpoint " + checkpoint.id
                                        + " is still being taken: wait for its operation"));
      if (!spec.template_name.empty() && spec.template_name != checkpoint.template_name)
        return ex->respond(json_error(http::status::bad_request, "invalid_argument",
                                      "checkpoint " + checkpoint.id + " is of template "
                                        + checkpoint.template_name + ", not " + spec.template_name
                                        + ": leave template out"));
      // The checkpoint's runtime: a VM's holds its machine, not a root.
      const std::string runtime = checkpoint.runtime.empty()
                                    ? std::string(actors::namespace_runtime_name)
                                    : checkpoint.runtime;
      if (runtime_asked && actors::runtime_of(spec) != runtime)
        return ex->respond(json_error(http::status::bad_request, "invalid_argument",
                                      "checkpoint " + checkpoint.id + " is of a " + runtime
                                        + " sandbox: leave runtime out"));
      actors::set_runtime(spec, runtime);
      // The checkpoint's own template version (its start_cmd runs again).
      spec.template_name = checkpoint.template_name;
      if (!checkpoint.template_version.empty())
        spec.template_name += ":" + checkpoint.template_version;
      with_template_version(api, ex, who, std::move(spec),
                            [create, worker = checkpoint.worker_id](schema::sandbox_spec resolved) {
                              create(std::move(resolved), worker);
                            });
    },
    answer_error(ex), actors::rg_snapget_atom::value, checkpoint_id, scope_of(who));
}

void create_sandbox(api_ptr api, exchange_ptr ex, caller who) {
  auto body = parse_object(ex->request().body());
  if (!body)
    return ex->respond(error_response(body.error()));
  auto spec = parse_sandbox_spec(*body, api->deps.options.limits);
  if (!spec)
    return ex->respond(error_response(spec.error()));
  auto runtime = requested_runtime(*body, *spec);
  if (!runtime)
    return ex->respond(error_response(runtime.error()));
  actors::set_runtime(*spec, *runtime);
  const auto field = body->find("runtime");
  const bool runtime_asked = field != body->end() && !field->is_null();
  create_sandbox_checked(api, ex, who, *body, std::move(*spec), runtime_asked);
}

void get_sandbox(api_ptr api, exchange_ptr ex, caller who) {
  call_actor(*api->deps.system, api->deps.registry, api->call_timeout(),
             respond_record<schema::sandbox_record>(ex), answer_error(ex),
             actors::rg_get_atom::value, std::string(ex->path_param("id")), scope_of(who));
}

void list_sandboxes(api_ptr api, exchange_ptr ex, caller who) {
  auto limit = list_limit(*ex, api->deps.options.list_limit_max);
  if (!limit)
    return ex->respond(error_response(limit.error()));
  actors::sandbox_query query;
  query.tenant_id = scope_of(who);
  query.limit = *limit;
  query.cursor = ex->query("cursor").value_or("");
  for (const auto& [name, value] : ex->query_params()) {
    if (name.rfind("metadata.", 0) == 0 && name.size() > 9)
      query.metadata[name.substr(9)] = value;
  }
  if (auto state = ex->query("state")) {
    query.state = schema::parse_sandbox_state(*state);
    if (!query.state)
      return ex->respond(json_error(http::status::bad_request, "invalid_argument",
                                    "?state= is not a sandbox state (creating, running, "
                                    "paused, destroyed, ...)"));
  }
  call_actor(
    *api->deps.system, api->deps.registry, api->call_timeout(),
    [ex](actors::sandbox_page& page) {
      json items = json::array();
      for (const auto& record : page.items)
        items.push_back(to_json(record));
      json next = page.next_cursor.empty() ? json(nullptr) : json(page.next_cursor);
      ex->respond(json_response(http::status::ok, {{"items", items}, {"next_cursor", next}}));
    },
    answer_error(ex), actors::rg_list_atom::value, query);
}

void patch_sandbox(api_ptr api, exchange_ptr ex, caller who) {
  auto body = parse_object(ex->request().body());
  if (!body)
    return ex->respond(error_response(body.error()));
  auto patch = parse_sandbox_patch(*body, api->deps.options.limits);
  if (!patch)
    return ex->respond(error_response(patch.error()));
  bool egress_changed = patch->egress.has_value();
  call_actor(
    *api->deps.system, api->deps.registry, api->call_timeout(),
    [api, ex, egress_changed](schema::sandbox_record& record) {
      ex->respond(json_response(http::status::ok, to_json(record)));
      // After the durable update: new connections on its worker use it.
      if (egress_changed)
        push_egress_to_worker(api->deps, record);
    },
    answer_error(ex), actors::rg_patch_atom::value, std::string(ex->path_param("id")),
    scope_of(who), *patch);
}

void issue_token(api_ptr api, exchange_ptr ex, caller who) {
  caf::anon_send(api->deps.registry, actors::rg_touch_atom::value,
                 std::string(ex->path_param("id")));
  auto parsed = optional_object_body(*ex);
  if (!parsed)
    return ex->respond(error_response(parsed.error()));
  json body = std::move(*parsed);
  std::string scope = body.value("scope", json("all")).is_string()
                        ? body.value("scope", std::string("all"))
                        : std::string("?");
  if (scope != "files" && scope != "processes" && scope != "all")
    return ex->respond(json_error(http::status::bad_request, "invalid_argument",
                                  "scope must be files, processes or all"));
  int64_t ttl_s = api->deps.options.token_ttl_default_s;
  if (auto ttl = body.find("ttl_s"); ttl != body.end()) {
    if (!ttl->is_number_integer() || ttl->get<int64_t>() < 1
        || ttl->get<int64_t>() > api->deps.options.token_ttl_max_s)
      return ex->respond(
        json_error(http::status::bad_request, "invalid_argument",
                   "ttl_s must be 1.." + std::to_string(api->deps.options.token_ttl_max_s)));
    ttl_s = ttl->get<int64_t>();
  }
  call_actor(
    *api->deps.system, api->deps.registry, api->call_timeout(),
    [api, ex, scope, ttl_s](schema::sandbox_record& record) {
      if (record.data_url.empty() || record.state == schema::sandbox_state::destroyed)
        return ex->respond(json_error(http::status::conflict, "wrong_state",
                                      "sandbox " + record.id + " is "
                                        + std::string(schema::to_string(record.state))
                                        + "; tokens exist only for placed sandboxes"));
      token_claims claims;
      claims.tenant_id = record.tenant_id;
      claims.sandbox_id = record.id;
      claims.scope = scope;
      claims.expires_at_ms = api->deps.clock->now_ms() + ttl_s * 1000;
      claims.audience = record.worker_id;
      ex->respond(json_response(http::status::created,
                                {{"data_url", record.data_url},
                                 {"token", api->deps.signer->sign(claims)},
                                 {"expires_at", timestamp_json(claims.expires_at_ms)}}));
    },
    answer_error(ex), actors::rg_get_atom::value, std::string(ex->path_param("id")), scope_of(who));
}

// --- keys and workers -----------------------------------------------------------

void create_api_key(api_ptr api, exchange_ptr ex, caller who) {
  if (!who.admin)
    return ex->respond(json_error(http::status::forbidden, "permission_denied",
                                  "only an admin key may create API keys"));
  auto body = parse_object(ex->request().body());
  if (!body)
    return ex->respond(error_response(body.error()));
  auto tenant = body->find("tenant_id");
  if (tenant == body->end() || !tenant->is_string())
    return ex->respond(json_error(http::status::bad_request, "invalid_argument",
                                  "tenant_id (a string) is required"));
  auto tenant_id = tenant->get<std::string>();
  call_actor(
    *api->deps.system, api->deps.api_keys, api->call_timeout(),
    [ex, tenant_id](std::string& key) {
      ex->respond(
        json_response(http::status::created, {{"tenant_id", tenant_id}, {"api_key", key}}));
    },
    answer_error(ex), actors::key_create_atom::value, tenant_id);
}

void list_workers(api_ptr api, exchange_ptr ex, caller who) {
  if (!who.admin)
    return ex->respond(json_error(http::status::forbidden, "permission_denied",
                                  "the fleet is visible to admin keys only"));
  call_actor(
    *api->deps.system, api->deps.scheduler, api->call_timeout(),
    [ex](std::vector<actors::worker_view>& workers) {
      auto resources = [](const schema::resources& r) {
        return json{{"cpu_millis", r.cpu_millis},
                    {"memory_mb", r.memory_mb},
                    {"disk_mb", r.disk_mb},
                    {"sandboxes", r.sandboxes}};
      };
      json items = json::array();
      for (const auto& worker : workers)
        items.push_back({{"id", worker.registration.id},
                         {"name", worker.registration.name},
                         {"address", worker.registration.cluster_address},
                         {"data_url", worker.registration.data_url},
                         {"state", worker.state},
                         {"capacity", resources(worker.registration.capacity)},
                         // allocated: the older name of requested.
                         {"allocated", resources(worker.allocated)},
                         {"requested", resources(worker.allocated)},
                         {"limited", resources(worker.limited)},
                         {"used", resources(worker.used)},
                         {"reserved", resources(worker.reserved)},
                         {"memory_pressure", worker.memory_pressure},
                         {"pressure_reason", worker.pressure_reason},
                         {"default_request", resources(worker.registration.default_request)},
                         {"memory_limit_percent", worker.registration.memory_limit_percent},
                         {"runtimes", worker.registration.runtimes},
                         {"sandboxes", worker.allocated.sandboxes},
                         {"last_heartbeat_at", timestamp_json(worker.last_heartbeat_at_ms)}});
      ex->respond(json_response(http::status::ok, {{"items", items}, {"next_cursor", nullptr}}));
    },
    answer_error(ex), actors::sc_workers_atom::value);
}

/// Routes of later releases: authenticated, then 501 with what to do instead.
async_route_handler not_yet(api_ptr api, std::string what) {
  return authed(api, [what](api_ptr, exchange_ptr ex, caller) {
    ex->respond(json_error(http::status::not_implemented, "not_implemented",
                           what + " is not available in this release of airlock"));
  });
}

void add_unimplemented(route_table& routes, api_ptr api) {
  using http::verb;
  const std::pair<verb, const char*> later[] = {
    {verb::post, "/v1/workers/{id}/cordon"},
    {verb::post, "/v1/workers/{id}/drain"},
    {verb::post, "/v1/workers/{id}/uncordon"},
  };
  for (const auto& [method, pattern] : later)
    routes.add_async(method, pattern, not_yet(api, std::string(pattern)));
  routes.add_async(http::verb::get, "/ui", [](exchange_ptr ex) {
    ex->respond(json_error(http::status::not_implemented, "not_implemented",
                           "the dashboard is not available in this release; use the API or "
                           "the airlock CLI"));
  });
}

/// Prometheus text: the gauges are refreshed from the registry and the
/// engine first, then everything the registry holds is rendered.
void serve_metrics(api_ptr api, exchange_ptr ex) {
  auto* metrics = api->deps.metrics;
  auto render = [api, ex, metrics]() {
    auto respond = [ex, metrics](std::string worker_text) {
      http_response response{http::status::ok, 11};
      response.set(http::field::content_type, "text/plain; version=0.0.4");
      response.body() = metrics->render() + worker_text;
      ex->respond(std::move(response));
    };
    if (!api->deps.local_node)
      return respond({});
    gather_node_metrics(*api->deps.system, *api->deps.local_node, api->call_timeout(), respond);
  };
  call_actor(
    *api->deps.system, api->deps.registry, api->call_timeout(),
    [api, ex, metrics, render](std::map<std::string, uint64_t>& counts) {
      for (const char* state : {"creating", "running", "pausing", "paused", "resuming",
                                "destroying", "destroyed", "error"})
        metrics->gauge_set("airlock_sandboxes", {{"state", state}},
                           static_cast<double>(counts[state]));
      call_actor(
        *api->deps.system, api->deps.engine, api->call_timeout(),
        [metrics, render](actors::engine_stats& stats) {
          metrics->gauge_set("airlock_operations_live", {}, static_cast<double>(stats.live));
          render();
        },
        answer_error(ex), actors::op_stats_atom::value);
    },
    answer_error(ex), actors::rg_count_atom::value);
}

} // namespace

void add_control_routes(route_table& routes, const control_api_deps& deps) {
  auto api = std::make_shared<const control_api>(control_api{deps});
  route_options json_body{deps.options.json_body_bytes_max};
  using http::verb;
  add_operation_routes(routes, api);
  routes.add_async(verb::post, "/v1/sandboxes", authed(api, create_sandbox), json_body);
  routes.add_async(verb::get, "/v1/sandboxes", authed(api, list_sandboxes));
  routes.add_async(verb::get, "/v1/sandboxes/{id}", authed(api, get_sandbox));
  routes.add_async(verb::patch, "/v1/sandboxes/{id}", authed(api, patch_sandbox), json_body);
  routes.add_async(verb::delete_, "/v1/sandboxes/{id}",
                   lifecycle_verb(api, actors::sandbox_verb::destroy, actors::kind_sandbox_delete));
  routes.add_async(verb::post, "/v1/sandboxes/{id}/pause",
                   lifecycle_verb(api, actors::sandbox_verb::pause, actors::kind_sandbox_pause));
  routes.add_async(verb::post, "/v1/sandboxes/{id}/resume",
                   lifecycle_verb(api, actors::sandbox_verb::resume, actors::kind_sandbox_resume));
  routes.add_async(verb::post, "/v1/sandboxes/{id}/token", authed(api, issue_token), json_body);
  add_snapshot_routes(routes, api, json_body);
  add_cluster_routes(routes, api, json_body);
  add_template_routes(routes, api, json_body);
  add_pool_routes(routes, api, json_body);
  routes.add_async(verb::post, "/v1/api-keys", authed(api, create_api_key), json_body);
  routes.add_async(verb::get, "/v1/workers", authed(api, list_workers));
  routes.add_async(verb::get, "/metrics", [api](exchange_ptr ex) { serve_metrics(api, ex); });
  add_egress_routes(routes, deps);
  add_unimplemented(routes, api);
}

void describe_control_metrics(metrics::metrics_registry& metrics) {
  metrics.describe("airlock_operations_total", "Operations that ended, by kind and state.",
                   "counter");
  metrics.describe("airlock_operation_duration_seconds",
                   "Time from creation to the end of an operation, by kind.", "histogram",
                   {0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300});
  metrics.describe("airlock_sandboxes", "Sandboxes by state.", "gauge");
  metrics.describe("airlock_operations_live", "Operations being driven now.", "gauge");
}

void record_operation_metrics(metrics::metrics_registry& metrics,
                              const schema::operation_record& record) {
  std::string state(schema::to_string(record.state));
  metrics.counter_add("airlock_operations_total", {{"kind", record.kind}, {"state", state}});
  auto seconds = static_cast<double>(record.updated_at_ms - record.created_at_ms) / 1000.0;
  metrics.histogram_observe("airlock_operation_duration_seconds", {{"kind", record.kind}},
                            seconds < 0 ? 0 : seconds);
}

} // namespace airlock::gateway
