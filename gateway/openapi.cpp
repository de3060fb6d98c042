#include "gateway/openapi.hpp"

#include <map>
#include <string>
#include <utility>

namespace airlock::gateway {

namespace {

using nlohmann::json;

/// How a route is called and what it answers.
struct route_doc {
  const char* summary;
  const char* auth;   ///< "api_key", "data_plane" (API key or token), "none"
  int success;        ///< the status of success
  const char* body;   ///< "json", "bytes", "none"
  const char* answer; ///< "json", "sse", "bytes", "text"
};

using doc_key = std::pair<std::string, std::string>; // method, pattern

const std::map<doc_key, route_doc>& docs() {
  static const std::map<doc_key, route_doc> table = {
    {{"GET", "/healthz"}, {"The process is alive.", "none", 200, "none", "json"}},
    {{"GET", "/readyz"}, {"Store open and workers reachable.", "none", 200, "none", "json"}},
    {{"GET", "/metrics"}, {"Prometheus text exposition.", "none", 200, "none", "text"}},
    {{"GET", "/v1/openapi.json"}, {"This document.", "none", 200, "none", "json"}},
    {{"GET", "/ui"}, {"Dashboard (later release: 501).", "api_key", 501, "none", "json"}},
    {{"POST", "/e2b/v2/sandboxes"},
     {"E2B: create and wait until it runs (X-API-Key; docs/e2b.md).", "api_key", 201, "json",
      "json"}},
    {{"GET", "/e2b/v2/sandboxes"},
     {"E2B: list (?metadata, ?state, ?limit, ?nextToken; X-Next-Token).", "api_key", 200, "none",
      "json"}},
    {{"GET", "/e2b/sandboxes/{id}"}, {"E2B: one sandbox.", "api_key", 200, "none", "json"}},
    {{"DELETE", "/e2b/sandboxes/{id}"},
     {"E2B: kill and wait until it is gone.", "api_key", 204, "none", "none"}},
    {{"POST", "/e2b/sandboxes/{id}/timeout"},
     {"E2B: the sandbox ends `timeout` seconds from now.", "api_key", 204, "json", "none"}},
    {{"POST", "/e2b/sandboxes/{id}/pause"},
     {"E2B: pause (airlock's suspend); 409 if already paused.", "api_key", 204, "json", "none"}},
    {{"POST", "/e2b/v2/sandboxes/{id}/connect"},
     {"E2B: 200 if running, 201 after resuming a paused one.", "api_key", 200, "json", "json"}},
    {{"POST", "/e2b/sandboxes/{id}/refreshes"},
     {"E2B: keep alive {duration?: 0..3600 s, default 60}: runs at least that long from now.",
      "api_key", 204, "json", "none"}},
    {{"PUT", "/e2b/sandboxes/{id}/network"},
     {"E2B: egress from now on {allowOut, denyOut: [\"0.0.0.0/0\"], allow_internet_access}: 204.",
      "api_key", 204, "json", "none"}},
    {{"GET", "/e2b/sandboxes/{id}/logs"},
     {"E2B: 501, airlock keeps no sandbox logs.", "api_key", 501, "none", "json"}},
    {{"GET", "/e2b/v2/sandboxes/{id}/logs"},
     {"E2B: 501, airlock keeps no sandbox logs.", "api_key", 501, "none", "json"}},
    {{"POST", "/e2b/sandboxes/{id}/snapshots"},
     {"E2B: a snapshot {name?} (airlock's checkpoint): 201 {snapshotID, names}.", "api_key", 201,
      "json", "json"}},
    {{"GET", "/e2b/snapshots"},
     {"E2B: the caller's snapshots, newest first (?sandboxID, ?name, ?limit, ?nextToken).",
      "api_key", 200, "none", "json"}},
    {{"DELETE", "/e2b/templates/{id}"},
     {"E2B: delete a snapshot (ckpt_ id) or a template: 204.", "api_key", 204, "none", "none"}},
    {{"POST", "/e2b/sandboxes/{id}/fork"},
     {"E2B: fork {count?, timeout?}: 201 [{sandbox} | {error}].", "api_key", 201, "json", "json"}},
    {{"GET", "/e2b/sandboxes/{id}/metrics"},
     {"E2B: one resource reading now, [] outside ?start..?end or when paused.", "api_key", 200,
      "none", "json"}},
    {{"GET", "/e2b/sandbox-port/{port}"},
     {"E2B host name <port>-<sandbox>.<domain> for a port but envd's: 501.", "none", 501, "none",
      "json"}},
    {{"POST", "/e2b/sandbox-port/{port}"},
     {"E2B host name <port>-<sandbox>.<domain> for a port but envd's: 501.", "none", 501, "none",
      "json"}},
    {{"PUT", "/e2b/sandbox-port/{port}"},
     {"E2B host name <port>-<sandbox>.<domain> for a port but envd's: 501.", "none", 501, "none",
      "json"}},
    {{"DELETE", "/e2b/sandbox-port/{port}"},
     {"E2B host name <port>-<sandbox>.<domain> for a port but envd's: 501.", "none", 501, "none",
      "json"}},
    {{"PATCH", "/e2b/sandbox-port/{port}"},
     {"E2B host name <port>-<sandbox>.<domain> for a port but envd's: 501.", "none", 501, "none",
      "json"}},
    {{"HEAD", "/e2b/sandbox-port/{port}"},
     {"E2B host name <port>-<sandbox>.<domain> for a port but envd's: 501.", "none", 501, "none",
      "json"}},
    {{"OPTIONS", "/e2b/sandbox-port/{port}"},
     {"E2B host name <port>-<sandbox>.<domain> for a port but envd's: 501.", "none", 501, "none",
      "json"}},
    {{"POST", "/e2b/envd/{service}/{method}"},
     {"E2B envd: a Connect call of process.Process or filesystem.Filesystem (E2b-Sandbox-Id, "
      "X-Access-Token).",
      "data_plane", 200, "json", "json"}},
    {{"GET", "/e2b/envd/files"},
     {"E2B envd: download ?path= (E2b-Sandbox-Id, X-Access-Token).", "data_plane", 200, "none",
      "bytes"}},
    {{"POST", "/e2b/envd/files"},
     {"E2B envd: upload (multipart parts named by path, or octet-stream with ?path=).",
      "data_plane", 200, "bytes", "json"}},
    {{"GET", "/files"},
     {"E2B envd: a signed download URL (?path=&username=&signature=[&signature_expiration=]).",
      "data_plane", 200, "none", "bytes"}},
    {{"POST", "/files"},
     {"E2B envd: a signed upload URL (?path=&username=&signature=[&signature_expiration=]).",
      "data_plane", 200, "bytes", "json"}},
    {{"GET", "/e2b/envd/health"},
     {"E2B envd: 204 while the sandbox runs, 502 otherwise.", "data_plane", 204, "none", "none"}},
    {{"GET", "/v1/operations"},
     {"List operations (?target_id, ?state, ?limit, ?cursor).", "api_key", 200, "none", "json"}},
    {{"GET", "/v1/operations/{id}"},
     {"One operation; ?wait=SECONDS (max 60) holds until it ends.", "api_key", 200, "none",
      "json"}},
    {{"GET", "/v1/operations/{id}/events"},
     {"SSE: one `state` event per transition, ending after the terminal one.", "api_key", 200,
      "none", "sse"}},
    {{"POST", "/v1/operations/{id}/cancel"},
     {"Cancel; 409 if already ended.", "api_key", 202, "none", "json"}},
    {{"POST", "/v1/sandboxes"},
     {"Create a sandbox: 202 {sandbox_id, operation_id}. Idempotency-Key honoured.", "api_key", 202,
      "json", "json"}},
    {{"GET", "/v1/sandboxes"},
     {"List sandboxes (?state, ?metadata.KEY=VALUE, ?limit, ?cursor).", "api_key", 200, "none",
      "json"}},
    {{"GET", "/v1/sandboxes/{id}"}, {"One sandbox.", "api_key", 200, "none", "json"}},
    {{"PATCH", "/v1/sandboxes/{id}"},
     {"Change metadata, egress or idle_timeout_s.", "api_key", 200, "json", "json"}},
    {{"DELETE", "/v1/sandboxes/{id}"},
     {"Destroy: 202 operation; 409 if already destroyed.", "api_key", 202, "none", "json"}},
    {{"POST", "/v1/sandboxes/{id}/pause"},
     {"Pause (memory stays resident): 202 operation; 409 unless running.", "api_key", 202, "none",
      "json"}},
    {{"POST", "/v1/sandboxes/{id}/resume"},
     {"Resume: 202 operation; 409 unless paused.", "api_key", 202, "none", "json"}},
    {{"POST", "/v1/sandboxes/{id}/suspend"},
     {"Suspend: snapshot the files, release the worker (processes end): 202 operation whose "
      "result names snapshot_id; 409 unless running or paused.",
      "api_key", 202, "none", "json"}},
    {{"POST", "/v1/sandboxes/{id}/restore"},
     {"Restore from the suspend snapshot, or {checkpoint_id} to roll back to one of its own "
      "checkpoints: 202 operation whose result names restored_from; 409 where the state does not "
      "allow it.",
      "api_key", 202, "json", "json"}},
    {{"POST", "/v1/sandboxes/{id}/wake"},
     {"Back to running whatever the way: resume if paused, restore if suspended: 202 operation.",
      "api_key", 202, "none", "json"}},
    {{"POST", "/v1/sandboxes/{id}/fork"},
     {"Fork {count: 1..64, metadata?}: one checkpoint, then count sandboxes from it: 202 "
      "operation whose result lists checkpoint_id, sandbox_ids and failed.",
      "api_key", 202, "json", "json"}},
    {{"POST", "/v1/sandboxes/{id}/token"},
     {"A data-plane token for this sandbox {scope, ttl_s}: 201 {data_url, token, expires_at}.",
      "api_key", 201, "json", "json"}},
    {{"POST", "/v1/sandboxes/{id}/checkpoints"},
     {"Checkpoint {label?, include_memory?}: 202 operation; its result names checkpoint_id. A "
      "microvm sandbox's holds its memory (include_memory false is 400), a namespace sandbox's "
      "its files only (true is 400). 409 unless running or paused.",
      "api_key", 202, "json", "json"}},
    {{"GET", "/v1/sandboxes/{id}/checkpoints"},
     {"The sandbox's checkpoints, oldest first.", "api_key", 200, "none", "json"}},
    {{"GET", "/v1/checkpoints"},
     {"The caller's checkpoints of every sandbox (destroyed ones too), oldest first, at most "
      "1,000; ?sandbox_id= and ?label= filter.",
      "api_key", 200, "none", "json"}},
    {{"GET", "/v1/checkpoints/{id}"},
     {"One checkpoint; complete once every byte has landed.", "api_key", 200, "none", "json"}},
    {{"DELETE", "/v1/checkpoints/{id}"},
     {"Delete a checkpoint: 202 operation.", "api_key", 202, "none", "json"}},
    {{"POST", "/v1/sandboxes/{id}/processes"},
     {"Start a process: 201 {process_id, attach_url, attach_token, expires_at}.", "data_plane", 201,
      "json", "json"}},
    {{"GET", "/v1/sandboxes/{id}/processes"},
     {"Running and recently ended processes.", "data_plane", 200, "none", "json"}},
    {{"GET", "/v1/sandboxes/{id}/processes/{pid}"},
     {"One process; ?wait=SECONDS until it exits.", "data_plane", 200, "none", "json"}},
    {{"GET", "/v1/sandboxes/{id}/processes/{pid}/output"},
     {"SSE: stdout/stderr events (id = combined byte offset), then exit. Last-Event-ID "
      "resumes; 410 when the buffer no longer holds it. ?stdout=0|1&stderr=0|1.",
      "data_plane", 200, "none", "sse"}},
    {{"POST", "/v1/sandboxes/{id}/processes/{pid}/stdin"},
     {"Write raw stdin bytes.", "data_plane", 200, "bytes", "json"}},
    {{"POST", "/v1/sandboxes/{id}/processes/{pid}/stdin/close"},
     {"Close stdin.", "data_plane", 200, "none", "json"}},
    {{"POST", "/v1/sandboxes/{id}/processes/{pid}/signal"},
     {"Send {signal: \"TERM\"} to the process group.", "data_plane", 200, "json", "json"}},
    {{"POST", "/v1/sandboxes/{id}/processes/{pid}/resize"},
     {"Resize the PTY {rows, cols}.", "data_plane", 200, "json", "json"}},
    {{"GET", "/v1/sandboxes/{id}/usage"},
     {"Resource use now: {sampled_at, cpu_usage_ns, cpu_used_pct (of one CPU, since the previous "
      "reading), memory_bytes, disk_used_bytes, processes}. Not activity. 409 unless running or "
      "paused.",
      "data_plane", 200, "none", "json"}},
    {{"GET", "/v1/sandboxes/{id}/files"},
     {"Read ?path= (raw bytes; 404 missing, 400 a directory).", "data_plane", 200, "none",
      "bytes"}},
    {{"PUT", "/v1/sandboxes/{id}/files"},
     {"Write ?path=&mode= atomically, parents created: 201 {path, size_bytes}.", "data_plane", 201,
      "bytes", "json"}},
    {{"DELETE", "/v1/sandboxes/{id}/files"},
     {"Remove ?path= (&recursive=true for directories).", "data_plane", 200, "none", "json"}},
    {{"GET", "/v1/sandboxes/{id}/files/list"},
     {"List a directory ?path=.", "data_plane", 200, "none", "json"}},
    {{"GET", "/v1/sandboxes/{id}/files/stat"}, {"Stat ?path=.", "data_plane", 200, "none", "json"}},
    {{"POST", "/v1/sandboxes/{id}/files/mkdir"},
     {"mkdir -p ?path=.", "data_plane", 201, "none", "json"}},
    {{"POST", "/v1/sandboxes/{id}/files/move"},
     {"Rename ?path= to ?to= (both absolute): 200 {path, from}.", "data_plane", 200, "none",
      "json"}},
    {{"GET", "/v1/sandboxes/{id}/files/watch"},
     {"SSE: watch the directory ?path= (&recursive=true for its subdirectories): ready once "
      "watched, then fs {name (relative), type: create|write|remove|rename|chmod}, keepalive {} "
      "on a quiet stream, error {error: {code, message}} when the watch ends (directory removed, "
      "too many unread changes). 404 missing, 400 not a directory.",
      "data_plane", 200, "none", "sse"}},
    {{"POST", "/v1/api-keys"},
     {"Admin only: a new API key for {tenant_id}; shown once.", "api_key", 201, "json", "json"}},
    {{"GET", "/v1/workers"}, {"Admin only: the fleet.", "api_key", 200, "none", "json"}},
    {{"DELETE", "/v1/workers/{id}"},
     {"Admin only (control): forget a lost worker and revoke its certificate: 200 {id, state: "
      "removed}; 409 while it is ready (stop it first), 404 unknown.",
      "api_key", 200, "none", "json"}},
    {{"POST", "/v1/cluster/tokens"},
     {"Admin only (control): a single-use join token {ttl_s (60..604800, default 3600), name} "
      "that pins the control-plane CA: 201 {token, token_id, name, expires_at, ca_fingerprint}.",
      "api_key", 201, "json", "json"}},
    {{"GET", "/v1/cluster/ca"},
     {"The worker CA (PEM) that signs workers' certificates (control).", "api_key", 200, "none",
      "text"}},
    {{"POST", "/v1/cluster/join"},
     {"A worker's join (control; no API key, a MAC under the token's key): {token_id, csr, name, "
      "mac} -> 201 {worker_id, certificate, worker_ca, control_ca, cluster_port, mac}; 401 an "
      "invalid token or MAC, 403 a spent or expired token, 400 a bad CSR.",
      "none", 201, "json", "json"}},
    {{"POST", "/v1/workers/{id}/cordon"}, {"Later release: 501.", "api_key", 501, "none", "json"}},
    {{"POST", "/v1/workers/{id}/drain"}, {"Later release: 501.", "api_key", 501, "none", "json"}},
    {{"POST", "/v1/workers/{id}/uncordon"},
     {"Later release: 501.", "api_key", 501, "none", "json"}},
    {{"GET", "/v1/templates"},
     {"Templates the caller sees (its own and the shared ones) with their versions.", "api_key",
      200, "none", "json"}},
    {{"POST", "/v1/templates"},
     {"Build a new version of {name} from {from: {template: NAME[:N]} | {debootstrap: {suite, "
      "packages}}}, then {run} steps and {ready_cmd} in a build sandbox with {egress} (default "
      "none); {env}, {workdir}, {user}, {start_cmd} become its defaults. 202 with the "
      "template.build operation; a failing step fails it and is named.",
      "api_key", 202, "json", "json"}},
    {{"GET", "/v1/templates/{name}"},
     {"One template and its versions.", "api_key", 200, "none", "json"}},
    {{"GET", "/v1/templates/{name}/versions/{version}/log"},
     {"The version's build log as text (?offset= to go on from X-Airlock-Log-Next-Offset; "
      "X-Airlock-Log-Complete says whether the build ended), readable while it builds.",
      "api_key", 200, "none", "text"}},
    {{"PUT", "/v1/templates/{name}/archive"},
     {"A new version from the image in the body: ?format=oci|docker|tar (plain, gzip or zstd), "
      "?start_cmd= to replace the image's Entrypoint and Cmd. 202 with the template.build "
      "operation.",
      "api_key", 202, "bytes", "json"}},
    {{"DELETE", "/v1/templates/{name}"},
     {"Delete the template or ?version=N: 202 operation; 409 while a sandbox, checkpoint or "
      "pool uses it.",
      "api_key", 202, "none", "json"}},
    {{"PUT", "/v1/templates/{name}/pool"},
     {"Keep {size} warm sandboxes of the template's current version per worker (limits "
      "cpu_millis, memory_mb, disk_mb default to a create's); a matching create claims one. "
      "A shared template's pool is an admin's to set.",
      "api_key", 200, "json", "json"}},
    {{"GET", "/v1/templates/{name}/pool"},
     {"The pool: size, limits, ready and creating members, hits_total, misses_total.", "api_key",
      200, "none", "json"}},
    {{"POST", "/v1/credentials"},
     {"Create a credential {name, scope: {tenant|template|sandbox}, hosts, inject: {header, "
      "value_template with {secret}}, secret, rate_limit_per_min}: 201 without the secret, "
      "which can never be read back.",
      "api_key", 201, "json", "json"}},
    {{"GET", "/v1/credentials"},
     {"List credentials (?limit, ?cursor); never their secrets.", "api_key", 200, "none", "json"}},
    {{"GET", "/v1/credentials/{id}"},
     {"One credential, without its secret.", "api_key", 200, "none", "json"}},
    {{"DELETE", "/v1/credentials/{id}"},
     {"Delete a credential: 200 {id, deleted}.", "api_key", 200, "none", "json"}},
    {{"GET", "/v1/audit"},
     {"Audit records in time order: egress decisions, DNS answers, credential uses, lifecycle "
      "events (?sandbox_id, ?kind=egress|dns|credential|lifecycle, ?since=RFC3339|ms, ?limit, "
      "?cursor).",
      "api_key", 200, "none", "json"}},
  };
  return table;
}

json media(const char* kind) {
  if (std::string(kind) == "sse")
    return {{"text/event-stream", json::object()}};
  if (std::string(kind) == "bytes")
    return {{"application/octet-stream", json::object()}};
  if (std::string(kind) == "text")
    return {{"text/plain", json::object()}};
  return {{"application/json", json::object()}};
}

json describe(const route_doc& doc, const std::string& pattern) {
  json operation = {{"summary", doc.summary}};
  json parameters = json::array();
  for (size_t at = pattern.find('{'); at != std::string::npos; at = pattern.find('{', at + 1)) {
    auto name = pattern.substr(at + 1, pattern.find('}', at) - at - 1);
    parameters.push_back(
      {{"name", name}, {"in", "path"}, {"required", true}, {"schema", {{"type", "string"}}}});
  }
  if (!parameters.empty())
    operation["parameters"] = parameters;
  if (std::string(doc.body) != "none")
    operation["requestBody"] = {{"content", media(doc.body)}};
  operation["responses"] = {
    {std::to_string(doc.success), {{"description", "success"}, {"content", media(doc.answer)}}},
    {"default", {{"description", "error: {\"error\": {\"code\", \"message\"}}"}}}};
  if (std::string(doc.auth) == "api_key")
    operation["security"] = json::array({{{"api_key", json::array()}}});
  else if (std::string(doc.auth) == "data_plane")
    operation["security"] =
      json::array({{{"api_key", json::array()}}, {{"data_plane_token", json::array()}}});
  else
    operation["security"] = json::array();
  return operation;
}

} // namespace

nlohmann::json openapi_document(const route_table& routes) {
  json paths = json::object();
  json undocumented = json::array();
  for (const auto& [method, pattern] : routes.routes()) {
    std::string name(http::to_string(method));
    auto found = docs().find({name, pattern});
    if (found == docs().end()) {
      undocumented.push_back(name + " " + pattern);
      continue;
    }
    std::string lower;
    for (char c : name)
      lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    paths[pattern][lower] = describe(found->second, pattern);
  }
  json document = {{"openapi", "3.0.3"},
                   {"info", {{"title", "airlock API"}, {"version", "v1"}}},
                   {"paths", paths},
                   {"components",
                    {{"securitySchemes",
                      {{"api_key", {{"type", "http"}, {"scheme", "bearer"}}},
                       {"data_plane_token", {{"type", "http"}, {"scheme", "bearer"}}}}}}},
                   {"x-undocumented", undocumented}};
  return document;
}

void add_openapi_route(route_table& routes) {
  // Registered first so that it describes itself, then filled from a copy
  // of the finished table.
  routes.add(http::verb::get, "/v1/openapi.json",
             [](const http_request&) { return json_response(http::status::ok, json::object()); });
  auto document = std::make_shared<const std::string>(openapi_document(routes).dump());
  routes.add(http::verb::get, "/v1/openapi.json", [document](const http_request&) {
    http_response response{http::status::ok, 11};
    response.set(http::field::content_type, "application/json");
    response.body() = *document;
    return response;
  });
}

} // namespace airlock::gateway
