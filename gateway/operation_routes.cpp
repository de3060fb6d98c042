// The operation routes: GET /v1/operations (a page of the caller's), GET
// /v1/operations/{id} (?wait= holds until it ends), its event stream, and
// cancel.

#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <utility>

#include "gateway/control_api_internal.hpp"
#include "gateway/sse.hpp"

namespace airlock::gateway::control_detail {

namespace {

using nlohmann::json;

void get_operation(api_ptr api, exchange_ptr ex, caller who) {
  auto id = std::string(ex->path_param("id"));
  auto wait_s = ex->query_uint("wait", api->deps.options.wait_max_s);
  if (!wait_s)
    return ex->respond(error_response(wait_s.error()));
  auto reply = respond_record<schema::operation_record>(ex);
  if (!*wait_s || **wait_s == 0)
    return call_actor(*api->deps.system, api->deps.engine, api->call_timeout(), reply,
                      answer_error(ex), actors::op_get_atom::value, id, scope_of(who));
  uint64_t wait_ms = **wait_s * 1000;
  call_actor(*api->deps.system, api->deps.engine, milliseconds(wait_ms) + api->call_timeout(),
             reply, answer_error(ex), actors::op_wait_atom::value, id, scope_of(who), wait_ms);
}

void list_operations(api_ptr api, exchange_ptr ex, caller who) {
  auto limit = list_limit(*ex, api->deps.options.list_limit_max);
  if (!limit)
    return ex->respond(error_response(limit.error()));
  actors::operation_query query;
  query.tenant_id = scope_of(who);
  query.target_id = ex->query("target_id").value_or("");
  query.limit = *limit;
  query.cursor = ex->query("cursor").value_or("");
  if (auto state = ex->query("state")) {
    query.state = schema::parse_operation_state(*state);
    if (!query.state)
      return ex->respond(json_error(http::status::bad_request, "invalid_argument",
                                    "?state= must be pending, running, succeeded, failed or "
                                    "cancelled"));
  }
  call_actor(
    *api->deps.system, api->deps.registry, api->call_timeout(),
    [ex](actors::operation_page& page) {
      json items = json::array();
      for (const auto& record : page.items)
        items.push_back(to_json(record));
      json next = page.next_cursor.empty() ? json(nullptr) : json(page.next_cursor);
      ex->respond(json_response(http::status::ok, {{"items", items}, {"next_cursor", next}}));
    },
    answer_error(ex), actors::rg_ops_atom::value, query);
}

void cancel_operation(api_ptr api, exchange_ptr ex, caller who) {
  call_actor(*api->deps.system, api->deps.engine, api->call_timeout(),
             respond_record<schema::operation_record>(ex, http::status::accepted), answer_error(ex),
             actors::op_cancel_atom::value, std::string(ex->path_param("id")), scope_of(who));
}

/// Streams one `state` event per persisted transition and a `progress`
/// event whenever a step reports progress, then ends.
void watch_operation(api_ptr api, exchange_ptr ex, caller who) {
  auto id = std::string(ex->path_param("id"));
  auto tenant = scope_of(who);
  // First make sure the operation exists (404 as JSON, not an empty stream).
  call_actor(
    *api->deps.system, api->deps.engine, api->call_timeout(),
    [api, ex, id, tenant](schema::operation_record&) {
      auto stream = ex->open_sse();
      auto watcher =
        api->deps.system->spawn([stream](caf::event_based_actor* self) -> caf::behavior {
          // The watch reply and the engine's events travel different paths:
          // keep them in sequence order and never repeat one.
          auto last = std::make_shared<int64_t>(-1);
          return {
            [self, stream, last](actors::op_event_atom, const schema::operation_record& record) {
              if (static_cast<int64_t>(record.sequence) <= *last)
                return;
              *last = static_cast<int64_t>(record.sequence);
              auto event = to_json(record).dump();
              if (!stream->send("state", event, std::to_string(record.sequence))
                  || schema::is_terminal(record.state)) {
                stream->close();
                self->quit();
              }
            },
            // Progress within the current transition (no id: a client that
            // reconnects resumes from the last state).
            [self, stream, last](actors::op_progress_atom, const schema::operation_record& record) {
              if (static_cast<int64_t>(record.sequence) < *last)
                return;
              if (!stream->send("progress", to_json(record).dump())) {
                stream->close();
                self->quit();
              }
            }};
        });
      stream->on_close([watcher](std::string_view) {
        caf::anon_send_exit(watcher, caf::exit_reason::user_shutdown);
      });
      call_actor(
        *api->deps.system, api->deps.engine, api->call_timeout(),
        [stream, watcher](schema::operation_record& record) {
          // The current state first; transitions follow from the engine.
          caf::anon_send(watcher, actors::op_event_atom::value, record);
        },
        [stream](caf::error&) { stream->close(); }, actors::op_watch_atom::value, id, tenant,
        caf::actor_cast<caf::actor>(watcher));
    },
    answer_error(ex), actors::op_get_atom::value, id, tenant);
}

} // namespace

void add_operation_routes(route_table& routes, const api_ptr& api) {
  using http::verb;
  routes.add_async(verb::get, "/v1/operations", authed(api, list_operations));
  routes.add_async(verb::get, "/v1/operations/{id}", authed(api, get_operation));
  routes.add_async(verb::get, "/v1/operations/{id}/events", authed(api, watch_operation));
  routes.add_async(verb::post, "/v1/operations/{id}/cancel", authed(api, cancel_operation));
}

} // namespace airlock::gateway::control_detail
