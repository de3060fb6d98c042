// Snapshot routes (checkpoints, suspend, restore, wake, fork): each becomes
// an operation on the sandbox (actors/snapshot_procedures.cpp; docs/api.md,
// docs/snapshots.md). The routes check what they can answer at once (the
// sandbox's state, the checkpoint's owner) so that bad requests change
// nothing; the procedures check again when they run.

#include <optional>
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
/// Most sandboxes one fork makes.
constexpr int64_t fork_count_max = 64;

/// A new snapshot record of the sandbox, not complete.
schema::snapshot_record new_snapshot(const api_ptr& api, const schema::sandbox_record& sandbox,
                                     schema::snapshot_kind kind, std::string label) {
  const auto now = api->deps.clock->now_ms();
  auto snapshot =
    actors::new_snapshot_record(sandbox, kind, make_id("ckpt_", now, *api->deps.entropy), now);
  snapshot.label = std::move(label);
  return snapshot;
}

/// Stores the snapshot's record (so GET finds it at once), then starts the
/// operation `kind` that takes it, with `params` and the snapshot's id.
void store_snapshot_then_start(api_ptr api, exchange_ptr ex, caller acting,
                               schema::snapshot_record snapshot, const char* kind,
                               const char* id_param, json params) {
  call_actor(
    *api->deps.system, api->deps.registry, api->call_timeout(),
    [api, ex, acting, kind, id_param, params](schema::snapshot_record& stored) mutable {
      params[id_param] = stored.id;
      start_operation(api, ex, acting, kind, stored.sandbox_id, params.dump());
    },
    answer_error(ex), actors::rg_snapsave_atom::value, snapshot);
}

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
  std::optional<bool> include_memory;
  if (auto memory = body.find("include_memory"); memory != body.end()) {
    if (!memory->is_boolean())
      return ex->respond(json_error(http::status::bad_request, "invalid_argument",
                                    "include_memory must be true or false"));
    include_memory = memory->get<bool>();
  }
  with_sandbox_for(
    api, ex, who, actors::sandbox_verb::checkpoint,
    [api, ex, label, include_memory](schema::sandbox_record& sandbox, caller acting) {
      auto snapshot = new_snapshot(api, sandbox, schema::snapshot_kind::checkpoint, label);
      // The runtime decides (new_snapshot_record): a VM's holds its memory,
      // a namespace sandbox's its files only.
      if (include_memory && *include_memory != snapshot.memory_persisted)
        return ex->respond(json_error(
          http::status::bad_request, "invalid_argument",
          snapshot.memory_persisted
            ? "a microVM's checkpoint always holds its memory (its disk alone would miss what "
              "the guest has not written back yet): omit include_memory or set it true"
            : "a namespace sandbox's checkpoint holds its files only; memory checkpoints need "
              "the microvm runtime"));
      store_snapshot_then_start(api, ex, acting, std::move(snapshot),
                                actors::kind_checkpoint_create, "checkpoint_id", json::object());
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
            if (snapshot.kind == schema::snapshot_kind::checkpoint)
              items.push_back(to_json(snapshot));
          ex->respond(json_response(http::status::ok, {{"items", items}}));
        },
        answer_error(ex), actors::rg_snaplist_atom::value, sandbox.id, scope_of(who));
    },
    answer_error(ex), actors::rg_get_atom::value, id, scope_of(who));
}

/// GET /v1/checkpoints?sandbox_id=&label=: the caller's checkpoints, of
/// every sandbox (destroyed ones too) unless one is named.
void list_all_checkpoints(api_ptr api, exchange_ptr ex, caller who) {
  auto sandbox_id = std::string(ex->query("sandbox_id").value_or(""));
  auto label = ex->query("label");
  call_actor(
    *api->deps.system, api->deps.registry, api->call_timeout(),
    [ex, label](std::vector<schema::snapshot_record>& snapshots) {
      json items = json::array();
      for (const auto& snapshot : snapshots)
        if (snapshot.kind == schema::snapshot_kind::checkpoint
            && (!label || snapshot.label == *label))
          items.push_back(to_json(snapshot));
      ex->respond(json_response(http::status::ok, {{"items", items}}));
    },
    answer_error(ex), actors::rg_snaplist_atom::value, sandbox_id, scope_of(who));
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

/// POST /v1/sandboxes/{id}/suspend: the suspend snapshot's record, then the
/// operation that takes it and releases the worker's resources.
void suspend_sandbox(api_ptr api, exchange_ptr ex, caller who) {
  with_sandbox_for(api, ex, who, actors::sandbox_verb::suspend,
                   [api, ex](schema::sandbox_record& sandbox, caller acting) {
                     store_snapshot_then_start(
                       api, ex, acting,
                       new_snapshot(api, sandbox, schema::snapshot_kind::suspend, {}),
                       actors::kind_sandbox_suspend, "snapshot_id",
                       json{{"from_state", std::string(schema::to_string(sandbox.state))}});
                   });
}

/// POST /v1/sandboxes/{id}/restore {"checkpoint_id"?}: from the suspend
/// snapshot, or back to one of the sandbox's own complete checkpoints.
void restore_sandbox(api_ptr api, exchange_ptr ex, caller who) {
  auto parsed = optional_object_body(*ex);
  if (!parsed)
    return ex->respond(error_response(parsed.error()));
  std::string checkpoint;
  if (auto found = parsed->find("checkpoint_id"); found != parsed->end()) {
    if (!found->is_string() || found->get<std::string>().empty())
      return ex->respond(json_error(http::status::bad_request, "invalid_argument",
                                    "checkpoint_id must be a checkpoint's id (ckpt_...)"));
    checkpoint = found->get<std::string>();
  }
  auto start = [api, ex, checkpoint](schema::sandbox_record& sandbox, caller acting) {
    json params{{"from_state", std::string(schema::to_string(sandbox.state))}};
    if (!checkpoint.empty())
      params["checkpoint_id"] = checkpoint;
    start_operation(api, ex, acting, actors::kind_sandbox_restore, sandbox.id, params.dump());
  };
  if (checkpoint.empty())
    return with_sandbox_for(api, ex, who, actors::sandbox_verb::restore, start);
  auto id = std::string(ex->path_param("id"));
  call_actor(
    *api->deps.system, api->deps.registry, api->call_timeout(),
    [api, ex, who, id, start](schema::snapshot_record& snapshot) {
      if (snapshot.kind != schema::snapshot_kind::checkpoint || snapshot.sandbox_id != id)
        return ex->respond(json_error(http::status::bad_request, "invalid_argument",
                                      "checkpoint " + snapshot.id + " is not a checkpoint of " + id
                                        + "; fork it into a new sandbox instead"));
      if (!snapshot.complete)
        return ex->respond(json_error(http::status::conflict, "wrong_state",
                                      "checkpoint " + snapshot.id
                                        + " is still being taken: wait for its operation"));
      with_sandbox_for(api, ex, who, actors::sandbox_verb::rollback, start);
    },
    answer_error(ex), actors::rg_snapget_atom::value, checkpoint, scope_of(who));
}

/// POST /v1/sandboxes/{id}/fork {"count": 1..64, "metadata"?}: one
/// checkpoint, then `count` sandboxes from it, as one operation. The new
/// ids are chosen here, once.
void fork_sandbox(api_ptr api, exchange_ptr ex, caller who) {
  auto parsed = optional_object_body(*ex);
  if (!parsed)
    return ex->respond(error_response(parsed.error()));
  auto count = parsed->find("count");
  if (count == parsed->end() || !count->is_number_integer() || count->get<int64_t>() < 1
      || count->get<int64_t>() > fork_count_max)
    return ex->respond(
      json_error(http::status::bad_request, "invalid_argument",
                 "count must be a whole number from 1 to " + std::to_string(fork_count_max)));
  json params{{"count", count->get<int64_t>()}};
  if (parsed->contains("metadata")) {
    auto metadata = parse_metadata(*parsed, api->deps.options.limits);
    if (!metadata)
      return ex->respond(error_response(metadata.error()));
    params["metadata"] = *metadata;
  }
  with_sandbox_for(api, ex, who, actors::sandbox_verb::fork,
                   [api, ex, params](schema::sandbox_record& sandbox, caller acting) mutable {
                     auto now = api->deps.clock->now_ms();
                     json ids = json::array();
                     for (int64_t i = 0; i < params["count"].get<int64_t>(); ++i)
                       ids.push_back(make_id("sb_", now, *api->deps.entropy));
                     params["sandbox_ids"] = ids;
                     params["created_at_ms"] = now;
                     store_snapshot_then_start(
                       api, ex, acting,
                       new_snapshot(api, sandbox, schema::snapshot_kind::checkpoint, "fork"),
                       actors::kind_sandbox_fork, "checkpoint_id", params);
                   });
}

} // namespace

void add_snapshot_routes(route_table& routes, const api_ptr& api, const route_options& json_body) {
  using http::verb;
  routes.add_async(verb::post, "/v1/sandboxes/{id}/checkpoints", authed(api, create_checkpoint),
                   json_body);
  routes.add_async(verb::get, "/v1/sandboxes/{id}/checkpoints", authed(api, list_checkpoints));
  routes.add_async(verb::get, "/v1/checkpoints", authed(api, list_all_checkpoints));
  routes.add_async(verb::get, "/v1/checkpoints/{id}", authed(api, get_checkpoint));
  routes.add_async(verb::delete_, "/v1/checkpoints/{id}", authed(api, delete_checkpoint));
  routes.add_async(verb::post, "/v1/sandboxes/{id}/suspend", authed(api, suspend_sandbox),
                   json_body);
  routes.add_async(verb::post, "/v1/sandboxes/{id}/restore", authed(api, restore_sandbox),
                   json_body);
  routes.add_async(verb::post, "/v1/sandboxes/{id}/wake",
                   lifecycle_verb(api, actors::sandbox_verb::wake, actors::kind_sandbox_wake),
                   json_body);
  routes.add_async(verb::post, "/v1/sandboxes/{id}/fork", authed(api, fork_sandbox), json_body);
}

} // namespace airlock::gateway::control_detail
