// Warm pool routes (docs/pools.md): PUT and GET /v1/templates/{name}/pool,
// the pool as templates show it, and the create's side of a claim.

#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "actors/pool_actor.hpp"
#include "actors/sandbox_procedures.hpp"
#include "gateway/control_api_internal.hpp"

namespace airlock::gateway::control_detail {

using nlohmann::json;

namespace {

http_response no_pools() {
  return json_error(http::status::service_unavailable, "unavailable",
                    "this control plane runs no warm pools");
}

/// PUT /v1/templates/{name}/pool {"size", "cpu_millis"?, "memory_mb"?,
/// "disk_mb"?}: the members' limits default to a create's.
void set_pool(api_ptr api, exchange_ptr ex, caller who) {
  if (!api->deps.pools)
    return ex->respond(no_pools());
  auto body = parse_object(ex->request().body());
  if (!body)
    return ex->respond(error_response(body.error()));
  const std::string name(ex->path_param("name"));
  auto size = body->find("size");
  if (size == body->end() || !size->is_number_unsigned()
      || size->get<uint64_t>() > api->deps.options.pool_size_max)
    return ex->respond(json_error(http::status::bad_request, "invalid_argument",
                                  "size (0 to " + std::to_string(api->deps.options.pool_size_max)
                                    + ": members kept per worker) is required"));
  // The members' limits go through the create's own checks and defaults.
  json limits = {{"template", name}};
  for (const char* field : {"cpu_millis", "memory_mb", "disk_mb"})
    if (body->contains(field))
      limits[field] = (*body)[field];
  auto spec = parse_sandbox_spec(limits, api->deps.options.limits);
  if (!spec)
    return ex->respond(error_response(spec.error()));
  schema::pool_settings settings{size->get<uint32_t>(), spec->cpu_millis, spec->memory_mb,
                                 spec->disk_mb};
  call_actor(
    *api->deps.system, *api->deps.pools, api->call_timeout(),
    [ex](actors::pool_view& view) {
      ex->respond(json_response(http::status::ok, pool_json(view)));
    },
    answer_error(ex), actors::pl_set_atom::value, name, scope_of(who), settings);
}

void get_pool(api_ptr api, exchange_ptr ex, caller who) {
  if (!api->deps.pools)
    return ex->respond(no_pools());
  call_actor(
    *api->deps.system, *api->deps.pools, api->call_timeout(),
    [ex](actors::pool_view& view) {
      ex->respond(json_response(http::status::ok, pool_json(view)));
    },
    answer_error(ex), actors::pl_get_atom::value, std::string(ex->path_param("name")),
    scope_of(who));
}

} // namespace

json pool_json(const actors::pool_view& view) {
  auto out = to_json(view.settings);
  out["ready"] = view.ready;
  out["creating"] = view.creating;
  out["hits_total"] = view.hits_total;
  out["misses_total"] = view.misses_total;
  return out;
}

/// A create that a warm pool member fits claims it (docs/pools.md): the
/// member's id becomes the sandbox's, and the claim is stored before the
/// create's operation, whose write makes both durable. Any other create, or
/// one whose member went meanwhile, goes to `otherwise` (the usual way).
void claim_or_create(api_ptr api, exchange_ptr ex, caller who, schema::sandbox_record record,
                     std::function<void(schema::sandbox_record)> otherwise) {
  auto wanted = std::make_shared<schema::sandbox_record>(std::move(record));
  auto cold = [wanted, otherwise] { otherwise(*wanted); };
  call_actor(
    *api->deps.system, *api->deps.pools, api->call_timeout(),
    [api, ex, who, wanted, cold](schema::sandbox_record& member) {
      auto claim = *wanted;
      claim.id = member.id;
      claim.worker_id = member.worker_id;
      auto& spec = claim.spec;
      spec.from_pool = true;
      spec.template_worker_id = member.spec.template_worker_id;
      // What the member reserved when it was placed stays reserved.
      spec.cpu_request_millis = member.spec.cpu_request_millis;
      spec.memory_request_mb = member.spec.memory_request_mb;
      spec.disk_request_mb = member.spec.disk_request_mb;
      call_actor(
        *api->deps.system, api->deps.registry, api->call_timeout(),
        [api, ex, who](schema::sandbox_record& stored) {
          start_operation(api, ex, who, actors::kind_sandbox_create, stored.id);
        },
        [cold](caf::error&) { cold(); }, actors::rg_claim_atom::value, claim);
    },
    [cold](caf::error&) { cold(); }, actors::pl_claim_atom::value, *wanted);
}

void add_pool_routes(route_table& routes, const api_ptr& api, const route_options& json_body) {
  using http::verb;
  routes.add_async(verb::put, "/v1/templates/{name}/pool", authed(api, set_pool), json_body);
  routes.add_async(verb::get, "/v1/templates/{name}/pool", authed(api, get_pool));
}

} // namespace airlock::gateway::control_detail
