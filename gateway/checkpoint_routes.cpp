// Checkpoint routes: each becomes an operation on the sandbox
// (actors/sandbox_procedures.cpp; docs/api.md, docs/snapshots.md).

#include <string>
#include <utility>
#include <vector>

#include "actors/sandbox_procedures.hpp"
#include "gateway/control_api_internal.hpp"

namespace airlock::gateway::control_detail {

namespace {

using nlohmann::json;

/// Most bytes of a checkpoint's label.
constexpr size_t checkpoint_label_bytes_max = 256;

/// POST /v1/sandboxes/{id}/checkpoints {"label"?, "include_memory"?}: stores
/// the checkpoint's record (not complete) so that GET finds it at once, then
/// starts the operation that takes it.
void create_checkpoint(api_ptr api, exchange_ptr ex, caller who) {
  auto parsed = optional_object_body(*ex);
  if (!parsed)
    return ex->respond(error_response(parsed.error()));
  json body = std::move(*parsed);
  std::string label;
  if (auto found = body.find("label"); found != body.end()) {
    if (!found->is_string() || found->get<std::string>().size() > checkpoint_label_bytes_max)
      return ex->respond(json_error(http::status::bad_request, "invalid_argument",
                                    "label must be a string of at most "
                                      + std::to_string(checkpoint_label_bytes_max) + " bytes"));
    label = found->get<std::string>();
  }
  if (auto memory = body.find("include_memory"); memory != body.end()) {
    if (!memory->is_boolean())
      return ex->respond(json_error(http::status::bad_request, "invalid_argument",
                                    "include_memory must be true or false"));
    if (memory->get<bool>())
      return ex->respond(json_error(http::status::bad_request, "invalid_argument",
                                    "a namespace sandbox's checkpoint holds its files only; "
                                    "memory checkpoints need the microvm runtime"));
  }
  auto id = std::string(ex->path_param("id"));
  replay_or(api, ex, who, [api, ex, who, id, label]() {
    call_actor(
      *api->deps.system, api->deps.registry, api->call_timeout(),
      [api, ex, who, label](schema::sandbox_record& sandbox) {
        if (sandbox.state != schema::sandbox_state::running
            && sandbox.state != schema::sandbox_state::paused)
          return ex->respond(json_error(http::status::conflict, "wrong_state",
                                        "sandbox " + sandbox.id + " is "
                                          + std::string(schema::to_string(sandbox.state))
                                          + "; a checkpoint needs it running or paused"));
        schema::snapshot_record snapshot;
        snapshot.created_at_ms = api->deps.clock->now_ms();
        snapshot.id = make_id("ckpt_", snapshot.created_at_ms, *api->deps.entropy);
        snapshot.kind = schema::snapshot_kind::checkpoint;
        snapshot.sandbox_id = sandbox.id;
        snapshot.tenant_id = sandbox.tenant_id;
        snapshot.template_name = sandbox.spec.template_name;
        snapshot.runtime = "namespace";
        snapshot.label = label;
        caller acting{sandbox.tenant_id, who.admin};
        call_actor(
          *api->deps.system, api->deps.registry, api->call_timeout(),
          [api, ex, acting](schema::snapshot_record& stored) {
            start_operation(api, ex, acting, actors::kind_checkpoint_create, stored.sandbox_id,
                            json{{"checkpoint_id", stored.id}}.dump());
          },
          answer_error(ex), actors::rg_snapsave_atom::value, snapshot);
      },
      answer_error(ex), actors::rg_get_atom::value, id, scope_of(who));
  });
}

void list_checkpoints(api_ptr api, exchange_ptr ex, caller who) {
  auto id = std::string(ex->path_param("id"));
  // The sandbox first: another tenant's sandbox is a 404, not an empty list.
  call_actor(
    *api->deps.system, api->deps.registry, api->call_timeout(),
    [api, ex, who](schema::sandbox_record& sandbox) {
      call_actor(
        *api->deps.system, api->deps.registry, api->call_timeout(),
        [ex](std::vector<schema::snapshot_record>& snapshots) {
          json items = json::array();
          for (const auto& snapshot : snapshots)
            items.push_back(to_json(snapshot));
          ex->respond(json_response(http::status::ok, {{"items", items}}));
        },
        answer_error(ex), actors::rg_snaplist_atom::value, sandbox.id, scope_of(who));
    },
    answer_error(ex), actors::rg_get_atom::value, id, scope_of(who));
}

void get_checkpoint(api_ptr api, exchange_ptr ex, caller who) {
  call_actor(*api->deps.system, api->deps.registry, api->call_timeout(),
             respond_record<schema::snapshot_record>(ex), answer_error(ex),
             actors::rg_snapget_atom::value, std::string(ex->path_param("id")), scope_of(who));
}

void delete_checkpoint(api_ptr api, exchange_ptr ex, caller who) {
  auto id = std::string(ex->path_param("id"));
  replay_or(api, ex, who, [api, ex, who, id]() {
    call_actor(
      *api->deps.system, api->deps.registry, api->call_timeout(),
      [api, ex, who](schema::snapshot_record& snapshot) {
        caller acting{snapshot.tenant_id, who.admin};
        start_operation(api, ex, acting, actors::kind_checkpoint_delete, snapshot.sandbox_id,
                        json{{"checkpoint_id", snapshot.id}}.dump());
      },
      answer_error(ex), actors::rg_snapget_atom::value, id, scope_of(who));
  });
}

} // namespace

void add_checkpoint_routes(route_table& routes, const api_ptr& api,
                           const route_options& json_body) {
  using http::verb;
  routes.add_async(verb::post, "/v1/sandboxes/{id}/checkpoints", authed(api, create_checkpoint),
                   json_body);
  routes.add_async(verb::get, "/v1/sandboxes/{id}/checkpoints", authed(api, list_checkpoints));
  routes.add_async(verb::get, "/v1/checkpoints/{id}", authed(api, get_checkpoint));
  routes.add_async(verb::delete_, "/v1/checkpoints/{id}", authed(api, delete_checkpoint));
}

} // namespace airlock::gateway::control_detail
