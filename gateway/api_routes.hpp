#pragma once
// The control plane's HTTP API (API.md): operations, sandboxes, tokens,
// workers, operator routes, the OpenAPI document, and 501 answers for what
// later releases add. Handlers authenticate, validate, ask an actor and
// answer from its reply; none blocks an I/O thread.
//
// The data-plane routes (processes, files) are added by data_routes.hpp.

#include <caf/actor_system.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "actors/api_key_actor.hpp"
#include "actors/audit_actor.hpp"
#include "actors/clock.hpp"
#include "actors/cluster_protocol.hpp"
#include "actors/credential_actor.hpp"
#include "actors/join_tokens.hpp"
#include "actors/log.hpp"
#include "actors/operation_engine.hpp"
#include "actors/pool_actor.hpp"
#include "actors/sandbox_registry.hpp"
#include "crypto/certificates.hpp"
#include "crypto/cluster_certificates.hpp"
#include "gateway/api_json.hpp"
#include "gateway/attach_token.hpp"
#include "gateway/e2b_token_book.hpp"
#include "gateway/router.hpp"
#include "metrics/metrics.hpp"

namespace airlock::gateway {

struct api_options {
  /// Limits on sandbox specs and process requests. Default: see spec_limits.
  spec_limits limits;
  /// Bound on one call to an actor (engine, registry, scheduler). Default: 10000.
  uint32_t actor_call_timeout_ms = 10'000;
  /// Longest ?wait= on an operation, in seconds. Default: 60.
  uint32_t wait_max_s = 60;
  /// Longest lifetime of a data-plane token. Default: 86400 (a day).
  uint32_t token_ttl_max_s = 86'400;
  /// Lifetime of a token when the request names none. Default: 3600.
  uint32_t token_ttl_default_s = 3600;
  /// Largest ?limit= on a list. Default: 1000.
  uint32_t list_limit_max = 1000;
  /// Largest JSON body on control routes. Default: 65536.
  uint64_t json_body_bytes_max = 65'536;
  /// Egress of a sandbox whose create request names none, by template; a
  /// template not listed gets profile none. Default: empty.
  std::map<std::string, schema::egress_policy> template_egress;
  /// Retry-After of a create refused for want of capacity, in seconds:
  /// about how long sandboxes take to come and go. Default: 5.
  uint32_t no_capacity_retry_after_s = 5;
  /// Bounds on a template upload (PUT /v1/templates/{name}/archive) and its
  /// import (docs/templates.md): the archive as sent, the files unpacked
  /// from it, its entries, one entry's path. Defaults: 8 GiB, 32 GiB,
  /// 1000000, 4096.
  uint64_t template_archive_bytes_max = uint64_t{8} << 30;
  uint64_t template_unpacked_bytes_max = uint64_t{32} << 30;
  uint64_t template_entries_max = 1'000'000;
  uint32_t template_path_bytes_max = 4096;
  /// Bytes of an upload sent to the worker in one message. Default: 1 MiB.
  size_t template_chunk_bytes = size_t{1} << 20;
  /// POST /v1/templates: run steps, bytes of one, debootstrap packages.
  /// Defaults: 64, 16384, 256.
  size_t template_run_steps_max = 64;
  size_t template_step_bytes_max = 16384;
  size_t template_packages_max = 256;
  /// Most warm pool members a template may keep per worker. Default: 64.
  uint32_t pool_size_max = 64;
};

/// What the control routes work with. Every pointee outlives the server.
/// What the cluster's admission routes need (`control`): POST
/// /v1/cluster/tokens, GET /v1/cluster/ca and POST /v1/cluster/join.
struct cluster_admission {
  actors::join_token_book* tokens = nullptr;
  /// DELETE /v1/workers/{id} revokes the removed worker's certificate here.
  actors::revocation_list* revocations = nullptr;
  crypto::key_and_cert worker_ca;     ///< signs the workers' certificates
  std::string control_ca_pem;         ///< what workers pin
  std::string control_ca_fingerprint; ///< "sha256:" + 64 hex digits
  uint16_t cluster_port = 0;          ///< where an admitted worker connects
  int member_valid_days = crypto::member_valid_days;
  /// Counts and logs a refused join: reason, detail. Optional.
  std::function<void(std::string_view, const std::string&)> on_refused;
};

struct control_api_deps {
  caf::actor_system* system = nullptr;
  actors::operation_engine_actor engine;
  actors::sandbox_registry_actor registry;
  /// Authenticates every request and creates tenant keys.
  actors::api_key_actor api_keys;
  actors::scheduler_actor scheduler;
  const token_signer* signer = nullptr;
  const wall_clock* clock = nullptr;
  entropy_source* entropy = nullptr; ///< thread-safe (system_entropy)
  metrics::metrics_registry* metrics = nullptr;
  /// POST/GET/DELETE /v1/credentials; absent: those routes answer 503.
  actors::credential_actor credentials;
  /// GET /v1/audit; absent: 503.
  actors::audit_actor audit;
  /// Where the routes report what they cannot tell the client (a worker that
  /// did not take a PATCHed egress policy). Absent: not reported.
  std::optional<actors::logger> log;
  /// `serve`: the local worker, whose figures (nd_metrics) each /metrics
  /// scrape appends. Absent (`control`): workers serve their own.
  std::optional<actors::node_actor> local_node;
  /// Warm pools (PUT /v1/templates/{name}/pool, creates that claim a
  /// member); absent: pools answer 503 and every create starts a sandbox.
  std::optional<actors::pool_actor> pools;
  /// The envd tokens the E2B front hands out, shared with the data plane's
  /// envd routes (signed file URLs); absent: not kept.
  std::shared_ptr<envd_token_book> envd_tokens;
  /// The cluster's admission; absent (`serve`, whose worker is in-process):
  /// the /v1/cluster routes answer 404 saying so.
  std::shared_ptr<const cluster_admission> cluster;
  api_options options;
};

/// Adds every control-plane route to `routes` but the E2B front, which the
/// daemon adds last (add_e2b_routes), since it is made of these and of the
/// data plane's routes.
void add_control_routes(route_table& routes, const control_api_deps& deps);

/// Registers the families /metrics shows beyond the HTTP server's own.
void describe_control_metrics(metrics::metrics_registry& metrics);

/// Counts an ended operation (kind, state) and its latency; the engine's
/// on_terminal hook.
void record_operation_metrics(metrics::metrics_registry& metrics,
                              const schema::operation_record& record);

} // namespace airlock::gateway
