// Template routes (docs/templates.md): list and read template records, upload
// an image as a new version (PUT .../archive streams the body to one worker's
// spool, then a template.build operation makes the version there), build one
// from a recipe (checked by template_recipe.cpp), delete a version or a
// template (refused while a sandbox or checkpoint uses it).

#include <algorithm>
#include <cctype>
#include <charconv>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "actors/template_procedures.hpp"
#include "actors/template_records.hpp"
#include "gateway/control_api_internal.hpp"

namespace airlock::gateway::control_detail {

namespace {

using nlohmann::json;

http_response bad_request(const std::string& message) {
  return json_error(http::status::bad_request, "invalid_argument", message);
}

/// Answers with `templates` (JSON of template records), each pool with how
/// many members are ready as the pool actor counts them.
void respond_with_pools(api_ptr api, exchange_ptr ex, std::vector<json> templates, bool listing) {
  auto respond = [ex, listing](std::vector<json>& items) {
    if (!listing)
      return ex->respond(json_response(http::status::ok, items.front()));
    ex->respond(json_response(http::status::ok, {{"items", items}, {"next_cursor", nullptr}}));
  };
  if (!api->deps.pools)
    return respond(templates);
  auto shared = std::make_shared<std::vector<json>>(std::move(templates));
  call_actor(
    *api->deps.system, *api->deps.pools, api->call_timeout(),
    [shared, respond](std::map<std::string, actors::pool_view>& pools) {
      for (auto& item : *shared)
        if (auto found = pools.find(item["name"].get<std::string>()); found != pools.end())
          item["pool"] = pool_json(found->second);
      respond(*shared);
    },
    [shared, respond](caf::error&) { respond(*shared); }, actors::pl_all_atom::value);
}

void list_templates(api_ptr api, exchange_ptr ex, caller who) {
  call_actor(
    *api->deps.system, api->deps.registry, api->call_timeout(),
    [api, ex](std::vector<schema::template_record>& records) {
      std::vector<json> items;
      for (const auto& record : records)
        items.push_back(to_json(record));
      respond_with_pools(api, ex, std::move(items), true);
    },
    answer_error(ex), actors::rg_tlist_atom::value, scope_of(who));
}

void get_template(api_ptr api, exchange_ptr ex, caller who) {
  call_actor(
    *api->deps.system, api->deps.registry, api->call_timeout(),
    [api, ex](schema::template_record& record) {
      respond_with_pools(api, ex, {to_json(record)}, false);
    },
    answer_error(ex), actors::rg_tget_atom::value, std::string(ex->path_param("name")),
    scope_of(who));
}

/// Starts operation `kind` on template `name` and answers 202 with it.
void start_template_operation(api_ptr api, exchange_ptr ex, const caller& who, const char* kind,
                              const std::string& name, json params,
                              std::function<void(const schema::operation_record&)> started = {}) {
  actors::operation_request request;
  request.kind = kind;
  request.target_id = name;
  request.tenant_id = who.tenant_id;
  request.params_json = params.dump();
  auto key = ex->request()["Idempotency-Key"];
  request.idempotency_key = std::string(key.data(), key.size());
  // A build may run for as long as its procedure allows (30 minutes), past
  // the engine's default deadline.
  if (std::string_view(kind) == actors::kind_template_build)
    request.timeout_ms = 40 * 60 * 1000;
  call_actor(
    *api->deps.system, api->deps.engine, api->call_timeout(),
    [ex, name, params, started](actors::create_reply& reply) {
      if (started)
        started(reply.record);
      auto body = json::parse(accepted(reply.record).body(), nullptr, false);
      body["template"] = name;
      if (params.contains("version"))
        body["version"] = params["version"];
      ex->respond(json_response(http::status::accepted, body));
    },
    answer_error(ex), actors::op_create_atom::value, request);
}

/// One upload: the body, a chunk at a time, to the chosen worker's spool;
/// each chunk leaves only once the worker took the one before.
struct template_upload : std::enable_shared_from_this<template_upload> {
  api_ptr api;
  exchange_ptr ex;
  caller who;
  std::string name;
  std::string format;
  schema::template_version version;
  actors::node_actor node;
  std::string spool_id;
  uint64_t offset = 0;

  /// The version failed before its build: said so in its record, then to
  /// the client.
  void fail(status failure) {
    version.state = schema::template_version_state::failed;
    version.error = schema::error_info{std::string(to_string(failure.code)), failure.message};
    auto self = shared_from_this();
    call_actor(
      *api->deps.system, api->deps.registry, api->call_timeout(),
      [self, failure](schema::template_record&) { self->ex->respond(error_response(failure)); },
      [self, failure](caf::error&) { self->ex->respond(error_response(failure)); },
      actors::rg_tsave_atom::value, name, version);
  }

  void read_next() {
    ex->read_body_chunk(api->deps.options.template_chunk_bytes,
                        [self = shared_from_this()](body_chunk chunk) {
                          if (!chunk.outcome.is_ok())
                            return self->fail(chunk.outcome); // 413/400 answered, or gone
                          self->send(std::move(chunk.bytes), chunk.last);
                        });
  }

  void send(std::string bytes, bool last) {
    auto self = shared_from_this();
    call_actor(
      *api->deps.system, node, api->call_timeout() * 4,
      [self, last](uint64_t total) {
        self->offset = total;
        if (!last)
          return self->read_next();
        self->build();
      },
      [self](caf::error& error) { self->fail(to_status(error)); }, actors::nd_spool_atom::value,
      spool_id, offset, std::move(bytes), last);
  }

  void build() {
    const auto& options = api->deps.options;
    json params{{"version", version.version},
                {"spool_id", spool_id},
                {"format", format},
                {"archive_bytes", offset},
                {"compressed_bytes_max", options.template_archive_bytes_max},
                {"uncompressed_bytes_max", options.template_unpacked_bytes_max},
                {"entries_max", options.template_entries_max},
                {"path_bytes_max", options.template_path_bytes_max}};
    auto self = shared_from_this();
    start_template_operation(api, ex, who, actors::kind_template_build, name, std::move(params),
                             [self](const schema::operation_record& operation) {
                               // The version names its build (best effort: the operation is what
                               // a client follows, and it names the template).
                               auto named = self->version;
                               named.operation_id = operation.id;
                               caf::anon_send(self->api->deps.registry,
                                              actors::rg_tsave_atom::value, self->name, named);
                             });
  }
};

/// PUT /v1/templates/{name}/archive?format=oci|docker|tar[&start_cmd=]: a
/// new version of the template from the image in the body.
/// The ready worker with the most free disk: it holds a new version's files.
const actors::worker_view* roomiest_worker(const std::vector<actors::worker_view>& workers) {
  const actors::worker_view* chosen = nullptr;
  auto free = [](const actors::worker_view& v) {
    return static_cast<int64_t>(v.registration.capacity.disk_mb)
           - static_cast<int64_t>(v.allocated.disk_mb);
  };
  for (const auto& w : workers)
    if (w.state == "ready" && (chosen == nullptr || free(w) > free(*chosen)))
      chosen = &w;
  return chosen;
}

http_response no_worker_for_template() {
  return json_error(http::status::service_unavailable, "unavailable",
                    "no worker is ready to hold the template; start one (or wait for it to "
                    "join) and try again");
}

void upload_archive(api_ptr api, exchange_ptr ex, caller who) {
  auto upload = std::make_shared<template_upload>();
  upload->api = api;
  upload->ex = ex;
  upload->who = who;
  upload->name = std::string(ex->path_param("name"));
  if (!actors::is_valid_template_name(upload->name))
    return ex->respond(bad_request("template name \"" + upload->name
                                   + "\" is not 1 to 63 of [a-z0-9-] starting with a letter or "
                                     "digit"));
  upload->format = ex->query("format").value_or("");
  if (upload->format != "oci" && upload->format != "docker" && upload->format != "tar")
    return ex->respond(bad_request("?format= must be oci (an OCI image layout as a tar), docker "
                                   "(docker save) or tar (a root filesystem)"));
  auto start_cmd = ex->query("start_cmd").value_or("");
  if (start_cmd.size() > api->deps.options.limits.text_bytes_max)
    return ex->respond(bad_request("start_cmd is longer than "
                                   + std::to_string(api->deps.options.limits.text_bytes_max)
                                   + " bytes"));
  // The worker with the most free disk holds the upload and the version.
  call_actor(
    *api->deps.system, api->deps.scheduler, api->call_timeout(),
    [api, ex, upload, start_cmd](std::vector<actors::worker_view>& workers) {
      const auto* chosen = roomiest_worker(workers);
      if (chosen == nullptr)
        return ex->respond(no_worker_for_template());
      schema::template_version draft;
      draft.state = schema::template_version_state::building;
      draft.source_json = json{{"archive", {{"format", upload->format}}}}.dump();
      draft.default_runtime = "namespace";
      draft.worker_id = chosen->registration.id;
      draft.start_cmd = start_cmd;
      call_actor(
        *api->deps.system, api->deps.registry, api->call_timeout(),
        [api, ex, upload](schema::template_record& record) {
          upload->version = record.versions.back();
          upload->spool_id = "tpl_" + record.name + "_v" + std::to_string(upload->version.version);
          call_actor(
            *api->deps.system, api->deps.scheduler, api->call_timeout(),
            [upload](actors::placement& where) {
              upload->node = where.node;
              upload->read_next();
            },
            [upload](caf::error& error) { upload->fail(to_status(error)); },
            actors::sc_node_atom::value, upload->version.worker_id);
        },
        answer_error(ex), actors::rg_tnew_atom::value, upload->name, scope_of(upload->who), draft);
    },
    answer_error(ex), actors::sc_workers_atom::value);
}

/// POST /v1/templates: a new version built from another template or by
/// debootstrap, then `run` steps and `ready_cmd` in a build sandbox on the
/// worker that holds it (docs/templates.md).
void build_template(api_ptr api, exchange_ptr ex, caller who) {
  auto body = parse_object(ex->request().body());
  if (!body)
    return ex->respond(error_response(body.error()));
  auto parsed = parse_recipe(*body, api->deps.options);
  if (!parsed)
    return ex->respond(error_response(parsed.error()));
  auto recipe = std::make_shared<template_recipe>(std::move(*parsed));
  // Then the version's record, on `worker_id` (empty: the roomiest), and its build.
  auto start = [api, ex, who, recipe](std::string worker_id, std::string base_worker_name,
                                      schema::template_version draft) {
    auto with_worker = [api, ex, who, recipe, base_worker_name,
                        draft](const std::string& worker) mutable {
      draft.state = schema::template_version_state::building;
      draft.default_runtime = recipe->default_runtime;
      draft.worker_id = worker;
      draft.ready_cmd = recipe->ready_cmd;
      json egress = {{"profile", std::string(schema::to_string(recipe->defaults.egress.profile))},
                     {"allow", recipe->defaults.egress.allow}};
      json env = json::object();
      for (const auto& [key, value] : draft.env)
        env[key] = value;
      json worker_recipe = {{"from", recipe->from},
                            {"run", recipe->run},
                            {"ready_cmd", recipe->ready_cmd},
                            {"egress", egress},
                            {"env", env},
                            {"workdir", draft.workdir},
                            {"user", draft.user},
                            {"start_cmd", draft.start_cmd}};
      draft.source_json = json{{"recipe", {{"from", recipe->from}, {"run", recipe->run}}}}.dump();
      call_actor(
        *api->deps.system, api->deps.registry, api->call_timeout(),
        [api, ex, who, worker_recipe, base_worker_name](schema::template_record& record) {
          json params = {{"version", record.versions.back().version},
                         {"format", "recipe"},
                         {"recipe", worker_recipe.dump()},
                         {"base_worker_name", base_worker_name}};
          start_template_operation(api, ex, who, actors::kind_template_build, record.name, params);
        },
        answer_error(ex), actors::rg_tnew_atom::value, recipe->name, scope_of(who), draft);
    };
    if (!worker_id.empty())
      return with_worker(worker_id);
    call_actor(
      *api->deps.system, api->deps.scheduler, api->call_timeout(),
      [ex, with_worker](std::vector<actors::worker_view>& workers) mutable {
        const auto* chosen = roomiest_worker(workers);
        if (chosen == nullptr)
          return ex->respond(no_worker_for_template());
        with_worker(chosen->registration.id);
      },
      answer_error(ex), actors::sc_workers_atom::value);
  };
  schema::template_version draft;
  for (const auto& [key, value] : recipe->defaults.env)
    draft.env.emplace_back(key, value);
  draft.workdir = recipe->workdir;
  draft.user = recipe->user;
  draft.start_cmd = recipe->start_cmd;
  if (recipe->base.empty())
    return start({}, {}, std::move(draft));
  // From a template: its version's files and defaults; the request's win.
  auto [base_name, pinned] = *actors::parse_template_ref(recipe->base);
  call_actor(
    *api->deps.system, api->deps.registry, api->call_timeout(),
    [ex, recipe, start, pinned, draft](schema::template_record& base) mutable {
      schema::sandbox_spec resolved;
      resolved.env = recipe->defaults.env;
      if (auto chosen = actors::choose_template_version(base, pinned, resolved); !chosen)
        return ex->respond(error_response(chosen));
      const auto* version = base.find(resolved.template_version);
      draft.env.assign(resolved.env.begin(), resolved.env.end());
      if (draft.workdir.empty())
        draft.workdir = version->workdir;
      if (draft.user.empty())
        draft.user = version->user;
      if (!recipe->has_start_cmd)
        draft.start_cmd = version->start_cmd;
      recipe->from = {{"template", base.name + ":" + std::to_string(resolved.template_version)}};
      start(resolved.template_worker_id, resolved.template_worker_name, std::move(draft));
    },
    answer_error(ex), actors::rg_tget_atom::value, base_name, scope_of(who));
}

/// DELETE /v1/templates/{name}[?version=N]: 409 at once while something
/// uses it (the operation checks again).
void delete_template(api_ptr api, exchange_ptr ex, caller who) {
  const std::string name(ex->path_param("name"));
  uint32_t version = 0;
  if (auto given = ex->query("version")) {
    auto parsed = actors::parse_template_ref(name + ":" + *given);
    if (!parsed)
      return ex->respond(bad_request("?version= must be a version number of 1 or more"));
    version = parsed->second;
  }
  call_actor(
    *api->deps.system, api->deps.registry, api->call_timeout(),
    [api, ex, who, name, version](schema::template_record& record) {
      if (record.tenant_id.empty() && !scope_of(who).empty())
        return ex->respond(json_error(http::status::forbidden, "permission_denied",
                                      "template " + name
                                        + " is shared by every tenant: only an admin key "
                                          "deletes it"));
      if (version != 0 && record.find(version) == nullptr)
        return ex->respond(
          json_error(http::status::not_found, "not_found",
                     "template " + name + " has no version " + std::to_string(version)));
      if (record.pool.size != 0 && (version == 0 || version == record.current_version))
        return ex->respond(json_error(
          http::status::conflict, "wrong_state",
          "template " + name + " keeps a warm pool of " + std::to_string(record.pool.size)
            + " per worker: set its size to 0 first (PUT /v1/templates/" + name
            + "/pool {\"size\": 0}), then delete once its members are gone"));
      call_actor(
        *api->deps.system, api->deps.registry, api->call_timeout(),
        [api, ex, who, name, version](std::vector<std::string>& users) {
          if (!users.empty()) {
            std::string list;
            for (const auto& id : users)
              list += (list.empty() ? "" : ", ") + id;
            return ex->respond(json_error(
              http::status::conflict, "wrong_state",
              "template " + name + (version == 0 ? "" : " version " + std::to_string(version))
                + " is in use by " + list + ": delete those sandboxes and checkpoints first"));
          }
          json params = json::object();
          if (version != 0)
            params["version"] = version;
          start_template_operation(api, ex, who, actors::kind_template_delete, name, params);
        },
        answer_error(ex), actors::rg_tusers_atom::value, name, version);
    },
    answer_error(ex), actors::rg_tget_atom::value, name, scope_of(who));
}

/// Reads a build log from the worker in chunks, up to log_read_bytes_max.
struct log_read : std::enable_shared_from_this<log_read> {
  api_ptr api;
  exchange_ptr ex;
  actors::node_actor node;
  std::string worker_name;
  uint64_t start = 0;
  uint64_t next = 0;
  std::string text;
  static constexpr size_t log_read_bytes_max = 1 << 20;

  void read_more() {
    auto me = shared_from_this();
    call_actor(
      *api->deps.system, node, api->call_timeout(),
      [me](schema::template_progress& at) {
        if (me->text.empty())
          me->start = at.log_offset;
        me->text += at.log;
        me->next = at.log_offset + at.log.size();
        if (!at.log.empty() && me->next < at.log_end && me->text.size() < log_read_bytes_max)
          return me->read_more();
        http_response response{http::status::ok, 11};
        response.set(http::field::content_type, "text/plain; charset=utf-8");
        response.set("X-Airlock-Log-Offset", std::to_string(me->start));
        response.set("X-Airlock-Log-Next-Offset", std::to_string(me->next));
        response.set("X-Airlock-Log-Complete",
                     !at.building && me->next >= at.log_end ? "true" : "false");
        response.body() = std::move(me->text);
        me->ex->respond(std::move(response));
      },
      answer_error(ex), actors::nd_twatch_atom::value, worker_name, next, false);
  }
};

/// GET /v1/templates/{name}/versions/{version}/log[?offset=N]: the build's
/// log as text (what the worker kept: its last MiB), read while the build
/// runs too; the X-Airlock-Log-* headers say where to go on from.
void get_build_log(api_ptr api, exchange_ptr ex, caller who) {
  const std::string name(ex->path_param("name"));
  const std::string number(ex->path_param("version"));
  uint32_t version = 0;
  if (auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), version);
      ec != std::errc{} || end != number.data() + number.size() || version == 0)
    return ex->respond(json_error(http::status::bad_request, "invalid_argument",
                                  "the version must be a positive number"));
  auto offset = ex->query_uint("offset", std::numeric_limits<uint64_t>::max());
  if (!offset)
    return ex->respond(error_response(offset.error()));
  call_actor(
    *api->deps.system, api->deps.registry, api->call_timeout(),
    [api, ex, name, version, offset = offset->value_or(0)](schema::template_record& record) {
      const auto* found = record.find(version);
      if (found == nullptr || found->worker_id.empty())
        return ex->respond(json_error(http::status::not_found, "not_found",
                                      "template " + name + " has no version "
                                        + std::to_string(version) + " built on a worker"));
      auto read = std::make_shared<log_read>();
      read->api = api;
      read->ex = ex;
      read->worker_name = found->worker_name;
      read->next = offset;
      call_actor(
        *api->deps.system, api->deps.scheduler, api->call_timeout(),
        [read](actors::placement& where) {
          read->node = where.node;
          read->read_more();
        },
        answer_error(ex), actors::sc_node_atom::value, found->worker_id);
    },
    answer_error(ex), actors::rg_tget_atom::value, name, scope_of(who));
}

} // namespace

/// Fills the spec from its template's record: the version (the current one
/// unless the request pins one with NAME:VERSION), that version's name and
/// worker, its env under the request's. A name the store does not know is
/// left to the worker, which knows the templates made there by hand.
void with_template_version(api_ptr api, exchange_ptr ex, const caller& who,
                           schema::sandbox_spec spec,
                           std::function<void(schema::sandbox_spec)> next, bool runtime_asked) {
  auto ref = actors::parse_template_ref(spec.template_name);
  if (!ref)
    return ex->respond(error_response(ref.error()));
  auto [name, pinned] = *ref;
  call_actor(
    *api->deps.system, api->deps.registry, api->call_timeout(),
    [ex, spec, pinned, next, runtime_asked](schema::template_record& record) mutable {
      if (auto chosen = actors::choose_template_version(record, pinned, spec, !runtime_asked);
          !chosen)
        return ex->respond(error_response(chosen));
      next(std::move(spec));
    },
    [ex, spec, name, pinned, next](caf::error& error) mutable {
      auto failure = to_status(error);
      if (failure.code != errc::not_found || pinned != 0)
        return ex->respond(error_response(failure));
      next(std::move(spec));
    },
    actors::rg_tget_atom::value, name, scope_of(who));
}

void add_template_routes(route_table& routes, const api_ptr& api, const route_options& json_body) {
  using http::verb;
  route_options archive_body{api->deps.options.template_archive_bytes_max, true};
  routes.add_async(verb::get, "/v1/templates", authed(api, list_templates));
  routes.add_async(verb::post, "/v1/templates", authed(api, build_template), json_body);
  routes.add_async(verb::get, "/v1/templates/{name}", authed(api, get_template));
  routes.add_async(verb::get, "/v1/templates/{name}/versions/{version}/log",
                   authed(api, get_build_log));
  routes.add_async(verb::put, "/v1/templates/{name}/archive", authed(api, upload_archive),
                   archive_body);
  routes.add_async(verb::delete_, "/v1/templates/{name}", authed(api, delete_template));
}

} // namespace airlock::gateway::control_detail
