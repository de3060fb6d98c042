#include "gateway/data_routes.hpp"

#include <caf/send.hpp>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <memory>
#include <string>
#include <utility>

#include "gateway/api_common.hpp"
#include "gateway/data_plane_internal.hpp"
#include "gateway/e2b_envd_routes.hpp"

namespace airlock::gateway {

namespace data_detail {

void count_forwarded(const data_api& api, const target& t, std::string_view direction,
                     uint64_t bytes) {
  if (!t.forwarded || api.deps.metrics == nullptr)
    return;
  api.deps.metrics->counter_add("airlock_data_forwarded_bytes_total",
                                {{"direction", std::string(direction)}},
                                static_cast<double>(bytes));
}

result<std::string> path_of_query(const exchange& ex) {
  auto path = ex.query("path");
  if (!path || path->empty())
    return make_status(errc::invalid_argument, "?path= is required (an absolute path)");
  if ((*path)[0] != '/' || path->size() > path_bytes_max || path->find('\0') != std::string::npos)
    return make_status(errc::invalid_argument, "?path= must be an absolute path of at most "
                                                 + std::to_string(path_bytes_max) + " bytes");
  return *path;
}

result<bool> flag(const exchange& ex, std::string_view name) {
  auto value = ex.query(name);
  if (!value || *value == "1" || *value == "true")
    return true;
  if (*value == "0" || *value == "false")
    return false;
  return make_status(errc::invalid_argument,
                     "?" + std::string(name) + "= must be 0 or 1 (or false or true)");
}

void keep_active_while_open(const data_api& api, const std::shared_ptr<sse_stream>& stream,
                            const std::string& sandbox_id) {
  if (!api.deps.registry)
    return;
  caf::anon_send(*api.deps.registry, actors::rg_attach_atom::value, sandbox_id, int32_t{1});
  stream->on_close([registry = *api.deps.registry, id = sandbox_id](std::string_view) {
    caf::anon_send(registry, actors::rg_attach_atom::value, id, int32_t{-1});
  });
}

} // namespace data_detail

namespace {

using namespace detail;
using namespace data_detail;
using nlohmann::json;
using std::chrono::milliseconds;

using target_next = std::function<void(target)>;

bool is_api_key(const std::string& credential) { return credential.rfind("ak_", 0) == 0; }

/// Finds the node of `t.sandbox_id` (control plane: via its record's worker).
void find_node(api_ptr api, exchange_ptr ex, target t, std::string worker_id, target_next next) {
  if (api->deps.local_node) {
    t.node = *api->deps.local_node;
    return next(std::move(t));
  }
  if (!api->deps.scheduler)
    return ex->respond(
      json_error(http::status::internal_server_error, "internal", "this listener knows no worker"));
  call_actor(
    *api->deps.system, *api->deps.scheduler, api->timeout(),
    [t, next](actors::placement& where) mutable {
      t.node = where.node;
      t.forwarded = true;
      next(std::move(t));
    },
    answer_error(ex), actors::sc_node_atom::value, std::move(worker_id));
}

/// Resolves a control-plane record (API-key callers, or tokens on a control
/// listener) and then its node.
void via_record(api_ptr api, exchange_ptr ex, target t, std::string tenant_scope,
                target_next next) {
  call_actor(
    *api->deps.system, *api->deps.registry, api->timeout(),
    [api, ex, t, next](schema::sandbox_record& record) mutable {
      using schema::sandbox_state;
      if (record.worker_id.empty() || record.state == sandbox_state::destroyed
          || record.state == sandbox_state::destroying)
        return ex->respond(json_error(http::status::conflict, "wrong_state",
                                      "sandbox " + record.id + " is "
                                        + std::string(schema::to_string(record.state))));
      // Nothing of it runs on a worker while suspended.
      if (record.state == sandbox_state::suspended || record.state == sandbox_state::suspending
          || record.state == sandbox_state::restoring)
        return ex->respond(
          json_error(http::status::conflict, "wrong_state",
                     "sandbox " + record.id + " is " + std::string(schema::to_string(record.state))
                       + ": wake it (POST /v1/sandboxes/" + record.id + "/wake) and retry"));
      t.tenant_id = record.tenant_id;
      t.worker_id = record.worker_id;
      if (t.data_url.empty())
        t.data_url = record.data_url;
      find_node(api, ex, std::move(t), record.worker_id, std::move(next));
    },
    answer_error(ex), actors::rg_get_atom::value, t.sandbox_id, std::move(tenant_scope));
}

/// Tells the registry (when this listener has one) of activity on the
/// sandbox: the idle policy's clock starts again.
void touch(const api_ptr& api, const std::string& sandbox_id) {
  if (api->deps.registry)
    caf::anon_send(*api->deps.registry, actors::rg_touch_atom::value, sandbox_id);
}

/// Authenticates the caller for `scope` on the sandbox of the path (and the
/// process of the path, for tokens scoped to one), then runs `next`.
void resolve(api_ptr api, exchange_ptr ex, std::string scope, target_next next) {
  auto credential = bearer_of(*ex);
  if (!credential)
    return ex->respond(missing_credentials());
  target t;
  t.sandbox_id = std::string(ex->path_param("id"));
  if (is_api_key(*credential)) {
    if (!api->deps.registry)
      return ex->respond(json_error(http::status::unauthorized, "unauthenticated",
                                    "a worker's data plane takes tokens, not API keys: get one "
                                    "from POST /v1/sandboxes/{id}/token"));
    t.by_api_key = true;
    return authenticate(*api->deps.system, *api->deps.api_keys, api->timeout(), ex,
                        [api, ex, t, next](actors::caller_identity who) mutable {
                          auto tenant = who.admin ? std::string{} : who.tenant_id;
                          via_record(api, ex, std::move(t), tenant, std::move(next));
                        });
  }
  auto verifier = api->deps.verifier ? api->deps.verifier() : nullptr;
  if (!verifier)
    return ex->respond(json_error(http::status::service_unavailable, "unavailable",
                                  "this worker has not joined its control plane yet; retry"));
  auto claims = verifier->verify(*credential, api->deps.clock->now_ms(), t.sandbox_id, scope,
                                 ex->path_param("pid"));
  if (!claims)
    return ex->respond(error_response(claims.error()));
  t.tenant_id = claims->tenant_id;
  t.token = *credential;
  t.token_expires_ms = claims->expires_at_ms;
  if (api->deps.public_url)
    t.data_url = api->deps.public_url();
  if (api->deps.local_node) {
    t.node = *api->deps.local_node;
    return next(std::move(t));
  }
  via_record(api, ex, std::move(t), std::string{}, std::move(next));
}

/// Resolves the request's sandbox for `handler`; the call counts as the
/// sandbox's activity unless `activity` is false (a read that a dashboard
/// polls must not keep a sandbox from idling out).
template <class Handler>
async_route_handler with_target(api_ptr api, std::string scope, Handler handler,
                                bool activity = true) {
  return [api, scope, handler, activity](exchange_ptr ex) {
    resolve(api, ex, scope, [api, ex, scope, handler, activity](target t) {
      if (activity)
        touch(api, t.sandbox_id);
      if (t.forwarded && api->deps.metrics != nullptr)
        api->deps.metrics->counter_add("airlock_data_forwarded_requests_total", {{"route", scope}});
      handler(api, ex, std::move(t));
    });
  };
}

std::string process_path(const target& t, const std::string& process_id) {
  return "/v1/sandboxes/" + t.sandbox_id + "/processes/" + process_id;
}

// --- processes ----------------------------------------------------------------

void start_process(api_ptr api, exchange_ptr ex, target t) {
  auto body = parse_object(ex->request().body());
  if (!body)
    return ex->respond(error_response(body.error()));
  auto spec = parse_exec_spec(*body, api->deps.options.limits);
  if (!spec)
    return ex->respond(error_response(spec.error()));
  call_actor(
    *api->deps.system, t.node, api->timeout(),
    [api, ex, t](actors::process_view& process) {
      std::string token = t.token;
      int64_t expires = t.token_expires_ms;
      if (t.by_api_key && api->deps.signer) {
        token_claims claims{t.tenant_id,
                            t.sandbox_id,
                            process.process_id,
                            "processes",
                            api->deps.clock->now_ms()
                              + int64_t{api->deps.options.attach_token_ttl_s} * 1000,
                            t.worker_id};
        token = api->deps.signer->sign(claims);
        expires = claims.expires_at_ms;
      }
      ex->respond(json_response(http::status::created,
                                {{"process_id", process.process_id},
                                 {"pid", process.pid},
                                 {"attach_url", t.data_url + process_path(t, process.process_id)},
                                 {"attach_token", token},
                                 {"expires_at", timestamp_json(expires)}}));
    },
    answer_error(ex), actors::dp_exec_atom::value, t.sandbox_id, *spec);
}

void list_processes(api_ptr api, exchange_ptr ex, target t) {
  call_actor(
    *api->deps.system, t.node, api->timeout(),
    [ex](std::vector<actors::process_view>& processes) {
      json items = json::array();
      for (const auto& process : processes)
        items.push_back(to_json(process));
      ex->respond(json_response(http::status::ok, {{"items", items}, {"next_cursor", nullptr}}));
    },
    answer_error(ex), actors::dp_procs_atom::value, t.sandbox_id);
}

void get_process(api_ptr api, exchange_ptr ex, target t) {
  auto wait_s = ex->query_uint("wait", api->deps.options.wait_max_s);
  if (!wait_s)
    return ex->respond(error_response(wait_s.error()));
  auto wait_ms = static_cast<uint32_t>(wait_s->value_or(0) * 1000);
  call_actor(
    *api->deps.system, t.node, milliseconds(wait_ms) + api->timeout(),
    [ex](actors::process_view& process) {
      ex->respond(json_response(http::status::ok, to_json(process)));
    },
    answer_error(ex), actors::dp_proc_atom::value, t.sandbox_id, std::string(ex->path_param("pid")),
    wait_ms);
}

json chunk_json(const std::string& bytes) {
  if (is_utf8(bytes))
    return {{"data", bytes}};
  return {{"data", base64_encode(bytes)}, {"encoding", "base64"}};
}

/// Sends one batch; false once the stream has ended (exit sent, or closed).
bool send_batch(const std::shared_ptr<sse_stream>& stream, const actors::output_batch& batch) {
  for (const auto& segment : batch.segments) {
    if (!stream->send(segment.fd == 2 ? "stderr" : "stdout", chunk_json(segment.bytes).dump(),
                      std::to_string(segment.end_offset)))
      return false;
  }
  if (batch.exited) {
    // Killed by a signal: there is no exit code, only the signal.
    json exit = {{"exit_code", batch.signal == 0 ? json(batch.exit_code) : json(nullptr)},
                 {"signal", batch.signal != 0 ? json(batch.signal) : json(nullptr)}};
    stream->send("exit", exit.dump(), std::to_string(batch.next_offset));
    stream->close();
    return false;
  }
  return true;
}

void pump_output(api_ptr api, std::shared_ptr<sse_stream> stream, target t,
                 actors::output_request request);

/// Sends `batch` and, unless that ended the stream, reads the next batch
/// once the client has taken this one, so a slow client slows the reads
/// instead of growing a queue.
void forward_batch(api_ptr api, std::shared_ptr<sse_stream> stream, target t,
                   actors::output_request request, const actors::output_batch& batch) {
  if (!send_batch(stream, batch))
    return;
  request.offset = batch.next_offset;
  stream->when_drained([api, stream, t, request]() {
    if (!stream->closed())
      pump_output(api, stream, t, request);
  });
}

/// Reads the next batch, waiting up to output_wait_ms for output, and
/// forwards it; an error ends the stream with an `error` event.
void pump_output(api_ptr api, std::shared_ptr<sse_stream> stream, target t,
                 actors::output_request request) {
  request.wait_ms = api->deps.options.output_wait_ms;
  call_actor(
    *api->deps.system, t.node, milliseconds(request.wait_ms) + api->timeout(),
    [api, stream, t, request](actors::output_batch& batch) {
      forward_batch(api, stream, t, request, batch);
    },
    [stream](caf::error& error) {
      auto failure = to_status(error);
      json body = {{"code", to_string(failure.code)}, {"message", failure.message}};
      stream->send("error", body.dump());
      stream->close();
    },
    actors::dp_output_atom::value, t.sandbox_id, request);
}

void stream_output(api_ptr api, exchange_ptr ex, target t) {
  actors::output_request request;
  request.process_id = std::string(ex->path_param("pid"));
  request.max_bytes = api->deps.options.output_read_bytes;
  auto out = flag(*ex, "stdout");
  auto err = flag(*ex, "stderr");
  if (!out || !err)
    return ex->respond(error_response(!out ? out.error() : err.error()));
  request.want_stdout = *out;
  request.want_stderr = *err;
  auto field = ex->request()["Last-Event-ID"];
  std::string_view last(field.data(), field.size());
  if (!last.empty()) {
    auto [end, problem] = std::from_chars(last.data(), last.data() + last.size(), request.offset);
    if (problem != std::errc{} || end != last.data() + last.size())
      return ex->respond(json_error(http::status::bad_request, "invalid_argument",
                                    "Last-Event-ID must be an event id (a byte offset)"));
  }
  // The first read decides the HTTP status (404, 410) before the stream opens.
  request.wait_ms = 0;
  call_actor(
    *api->deps.system, t.node, api->timeout(),
    [api, ex, t, request](actors::output_batch& batch) {
      auto stream = ex->open_sse(api->deps.options.sse);
      keep_active_while_open(*api, stream, t.sandbox_id);
      forward_batch(api, stream, t, request, batch);
    },
    answer_error(ex), actors::dp_output_atom::value, t.sandbox_id, request);
}

void write_stdin(api_ptr api, exchange_ptr ex, target t, bool close) {
  std::string bytes = close ? std::string{} : ex->request().body();
  auto size = bytes.size();
  call_actor(
    *api->deps.system, t.node, api->timeout(),
    [ex, size](bool) {
      ex->respond(json_response(http::status::ok, {{"bytes", size}}));
    },
    answer_error(ex), actors::dp_stdin_atom::value, t.sandbox_id,
    std::string(ex->path_param("pid")), std::move(bytes), close);
}

void send_signal(api_ptr api, exchange_ptr ex, target t) {
  auto body = parse_object(ex->request().body());
  if (!body)
    return ex->respond(error_response(body.error()));
  auto number = parse_signal(body->value("signal", json(nullptr)));
  if (!number)
    return ex->respond(error_response(number.error()));
  call_actor(
    *api->deps.system, t.node, api->timeout(),
    [ex](bool) {
      ex->respond(json_response(http::status::ok, {{"delivered", true}}));
    },
    answer_error(ex), actors::dp_signal_atom::value, t.sandbox_id,
    std::string(ex->path_param("pid")), *number);
}

void resize_pty(api_ptr api, exchange_ptr ex, target t) {
  auto body = parse_object(ex->request().body());
  if (!body)
    return ex->respond(error_response(body.error()));
  auto rows = body->value("rows", json(nullptr));
  auto cols = body->value("cols", json(nullptr));
  auto valid = [](const json& v) {
    return v.is_number_integer() && v.get<int64_t>() >= 1 && v.get<int64_t>() <= 1000;
  };
  if (!valid(rows) || !valid(cols))
    return ex->respond(json_error(http::status::bad_request, "invalid_argument",
                                  "rows and cols must be integers 1..1000"));
  call_actor(
    *api->deps.system, t.node, api->timeout(),
    [ex](bool) {
      ex->respond(json_response(http::status::ok, {{"resized", true}}));
    },
    answer_error(ex), actors::dp_resize_atom::value, t.sandbox_id,
    std::string(ex->path_param("pid")), static_cast<uint16_t>(rows.get<int64_t>()),
    static_cast<uint16_t>(cols.get<int64_t>()));
}

/// GET /v1/sandboxes/{id}/usage: the worker's reading of the sandbox's
/// CPU, memory, disk and processes.
void read_usage(api_ptr api, exchange_ptr ex, target t) {
  call_actor(
    *api->deps.system, t.node, api->timeout(),
    [ex](actors::sandbox_usage& usage) {
      ex->respond(
        json_response(http::status::ok, {{"sampled_at", timestamp_json(usage.sampled_at_ms)},
                                         {"cpu_usage_ns", usage.cpu_usage_ns},
                                         {"cpu_used_pct", usage.cpu_used_pct},
                                         {"memory_bytes", usage.memory_bytes},
                                         {"disk_used_bytes", usage.disk_used_bytes},
                                         {"processes", usage.processes}}));
    },
    answer_error(ex), actors::dp_usage_atom::value, t.sandbox_id);
}

} // namespace

void add_data_routes(route_table& routes, const data_plane_deps& deps) {
  auto api = std::make_shared<const data_api>(data_api{deps});
  if (deps.metrics != nullptr) {
    deps.metrics->describe("airlock_data_forwarded_requests_total",
                           "Data-plane requests this listener relayed to a worker, by route.",
                           "counter");
    deps.metrics->describe("airlock_data_forwarded_bytes_total",
                           "File bytes this listener relayed to or from a worker.", "counter");
  }
  using http::verb;
  const std::string procs = "/v1/sandboxes/{id}/processes";
  const std::string proc = procs + "/{pid}";
  const std::string files = "/v1/sandboxes/{id}/files";
  route_options small{64 * 1024};
  route_options stdin_body{deps.options.stdin_bytes_max};
  route_options file_upload{deps.options.file_bytes_max, true};
  routes.add_async(verb::post, procs, with_target(api, "processes", start_process), small);
  routes.add_async(verb::get, procs, with_target(api, "processes", list_processes));
  routes.add_async(verb::get, proc, with_target(api, "processes", get_process));
  routes.add_async(verb::get, proc + "/output", with_target(api, "processes", stream_output));
  routes.add_async(verb::post, proc + "/stdin",
                   with_target(api, "processes",
                               [](api_ptr a, exchange_ptr ex, target t) {
                                 write_stdin(std::move(a), std::move(ex), std::move(t), false);
                               }),
                   stdin_body);
  routes.add_async(verb::post, proc + "/stdin/close",
                   with_target(api, "processes", [](api_ptr a, exchange_ptr ex, target t) {
                     write_stdin(std::move(a), std::move(ex), std::move(t), true);
                   }));
  routes.add_async(verb::post, proc + "/signal", with_target(api, "processes", send_signal), small);
  routes.add_async(verb::post, proc + "/resize", with_target(api, "processes", resize_pty), small);
  routes.add_async(verb::get, "/v1/sandboxes/{id}/usage",
                   with_target(api, "processes", read_usage, false));
  routes.add_async(verb::get, files, with_target(api, "files", read_file));
  routes.add_async(verb::put, files, with_target(api, "files", write_file), file_upload);
  routes.add_async(verb::delete_, files, with_target(api, "files", remove_file));
  routes.add_async(verb::get, files + "/list", with_target(api, "files", list_files));
  routes.add_async(verb::get, files + "/stat", with_target(api, "files", stat_file));
  routes.add_async(verb::post, files + "/mkdir", with_target(api, "files", make_directory));
  routes.add_async(verb::post, files + "/move", with_target(api, "files", move_file));
  routes.add_async(verb::get, files + "/watch", with_target(api, "files", watch_files));
  // Last: envd's calls are made of the routes above, through a copy of the table.
  add_e2b_envd_routes(routes, std::make_shared<const route_table>(routes), deps.envd_tokens,
                      deps.clock);
}

} // namespace airlock::gateway
