#pragma once
// The data plane (API.md "Processes" and "Files"): served by each worker at
// its data_url with control-plane-signed tokens, and by the control plane's
// own listener with API keys (it forwards to the sandbox's worker through
// the cluster protocol). `airlockd serve` has one listener doing both.

#include <caf/actor_system.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>

#include "actors/api_key_actor.hpp"
#include "actors/clock.hpp"
#include "actors/cluster_protocol.hpp"
#include "actors/sandbox_registry.hpp"
#include "gateway/api_json.hpp"
#include "gateway/attach_token.hpp"
#include "gateway/e2b_token_book.hpp"
#include "gateway/router.hpp"
#include "gateway/sse.hpp"
#include "metrics/metrics.hpp"

namespace airlock::gateway {

struct data_plane_options {
  /// Limits on process requests. Default: see spec_limits.
  spec_limits limits;
  /// Bound on one call to a node, registry or scheduler. Default: 15000.
  uint32_t call_timeout_ms = 15'000;
  /// Longest a process output read waits for bytes before the SSE stream
  /// gets a heartbeat instead. Default: 10000.
  uint32_t output_wait_ms = 10'000;
  /// A directory watch stream with no change for this long gets a
  /// `keepalive` event (envd's clients need an event, not an SSE comment,
  /// within their 300 s body timeout). Default: 50000.
  uint32_t watch_keepalive_ms = 50'000;
  /// Bytes one output read returns at most. Default: 65536.
  uint32_t output_read_bytes = 65'536;
  /// Largest file upload (PUT) and download. Default: 268435456 (256 MiB).
  uint64_t file_bytes_max = uint64_t{256} << 20;
  /// A download larger than this is streamed in reads of this size, one at
  /// a time (the listener holds about two); an upload larger than this goes
  /// to the worker in parts of this size through a write session, the next
  /// read from the client once the worker took the last. Default: 1048576
  /// (1 MiB).
  uint64_t file_chunk_bytes = uint64_t{1} << 20;
  /// Largest stdin body per request. Default: 1048576 (1 MiB).
  uint64_t stdin_bytes_max = uint64_t{1} << 20;
  /// Longest ?wait= on a process, in seconds. Default: 60.
  uint32_t wait_max_s = 60;
  /// Lifetime of the per-process attach token the control plane mints.
  /// Default: 86400.
  uint32_t attach_token_ttl_s = 86'400;
  /// Options of every output stream. Default: see sse_options.
  sse_options sse;
};

/// How this listener finds sandboxes and checks callers.
struct data_plane_deps {
  caf::actor_system* system = nullptr;
  const wall_clock* clock = nullptr;
  /// Verifies control-plane tokens; may return null (a worker that has not
  /// joined yet: token requests then get 503). Called on I/O threads.
  std::function<std::shared_ptr<const token_verifier>()> verifier;
  /// A worker's own node: every sandbox it is asked about runs there.
  std::optional<actors::node_actor> local_node;
  /// Control plane: API keys are accepted, and sandboxes are found through
  /// the registry and the scheduler.
  std::optional<actors::sandbox_registry_actor> registry;
  /// Control plane: checks API keys; set with `registry`.
  std::optional<actors::api_key_actor> api_keys;
  std::optional<actors::scheduler_actor> scheduler;
  /// Where relayed requests and bytes are counted; may be null.
  metrics::metrics_registry* metrics = nullptr;
  /// Control plane: signs per-process attach tokens for API-key callers.
  const token_signer* signer = nullptr;
  /// The base URL written into attach_url for token callers (a worker's
  /// data_url); API-key callers get the sandbox record's data_url.
  std::function<std::string()> public_url;
  /// Control plane: the envd tokens its E2B front handed out, to find the
  /// sandbox of a signed file URL; absent: signed URLs are refused.
  std::shared_ptr<const envd_token_book> envd_tokens;
  data_plane_options options;
};

/// Adds the process and file routes.
void add_data_routes(route_table& routes, const data_plane_deps& deps);

} // namespace airlock::gateway
