#include <algorithm>
#include <limits>
#include <memory>
#include <string>

#include "gateway/e2b_rest_internal.hpp"
#include "gateway/internal_call.hpp"
#include "schema/sandbox.hpp"

namespace airlock::gateway::e2b_rest {

namespace {

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
  auto limit = ex.query_uint("limit", 100);
  if (!limit || *limit == 0u)
    return call.ex->respond(e2b_error(400, "limit must be a whole number from 1 to 100"));
  auto skip = ex.query_uint("nextToken", std::numeric_limits<uint32_t>::max());
  if (!skip)
    return call.ex->respond(e2b_error(400, "nextToken must be one this call returned"));
  std::optional<std::string> name = ex.query("name");
  call.v1_json(http::verb::get, target, nullptr,
               [call, limit = limit->value_or(100), skip = skip->value_or(0), name](json page) {
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
  const auto forever = std::numeric_limits<int64_t>::max();
  auto start = call.ex->query_uint("start", forever);
  auto end = call.ex->query_uint("end", forever);
  if (!start || !end)
    return call.ex->respond(e2b_error(400, "start and end must be Unix seconds"));
  call.sandbox([call, start = static_cast<int64_t>(start->value_or(0)),
                end = static_cast<int64_t>(end->value_or(now_s + 1)), now_s](json sandbox) {
    if (sandbox.value("state", "") != "running" || now_s < start || now_s > end)
      return call.ex->respond(json_response(http::status::ok, json::array()));
    auto id = sandbox["id"].get<std::string>();
    call.v1_json(http::verb::get, "/v1/sandboxes/" + id + "/usage", nullptr,
                 [call, sandbox](json usage) {
                   const auto at_ms = unix_ms_of(usage.value("sampled_at", json()));
                   const auto cpus = schema::whole_cpus(sandbox.value("cpu_millis", 1000u));
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

void add_e2b_snapshot_routes(route_table& routes, const e2b_ptr& api) {
  using http::verb;
  routes.add_async(verb::post, "/e2b/sandboxes/{id}/snapshots", with_key(api, create_snapshot));
  routes.add_async(verb::get, "/e2b/snapshots", with_key(api, list_snapshots));
  routes.add_async(verb::delete_, "/e2b/templates/{id}", with_key(api, delete_template));
  routes.add_async(verb::post, "/e2b/sandboxes/{id}/fork", with_key(api, fork_sandbox));
  routes.add_async(verb::get, "/e2b/sandboxes/{id}/metrics", with_key(api, sandbox_metrics));
}

} // namespace airlock::gateway::e2b_rest
