#pragma once
// envd, E2B's in-sandbox API, served by airlock's data plane under
// /e2b/envd/ (docs/e2b.md): Connect calls of process.Process and
// filesystem.Filesystem (POST /e2b/envd/<package.Service>/<Method>, JSON or
// binary protobuf) and /health. The sandbox is the E2b-Sandbox-Id header's,
// the X-Access-Token header is its data-plane token, and each call is made of
// the data plane's own /v1 calls, in-process.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "actors/clock.hpp"
#include "gateway/e2b_token_book.hpp"
#include "gateway/router.hpp"

namespace airlock::gateway {

struct e2b_envd_options {
  /// The largest Connect request body. Default: 4 MiB.
  uint64_t message_bytes_max = 4 << 20;
  /// The largest POST /files body (held whole while its files are written).
  /// Default: 64 MiB.
  uint64_t upload_bytes_max = uint64_t{64} << 20;
  /// The most entries one ListDir answers (all its levels together); a
  /// deeper listing is refused with resource_exhausted. Default: 10000.
  size_t list_entries_max = 10000;
  /// The user a call runs as when it names none, if the sandbox has that
  /// account (its home, /home/<user>, exists); else root. E2B's templates
  /// and airlock's `base` have `user`.
  std::string default_user = "user";
  /// CreateWatcher's watchers kept at once (each holds a watch in its
  /// sandbox). Default: 64.
  size_t watchers_max = 64;
  /// Events a watcher holds for GetWatcherEvents; one more ends it
  /// (resource_exhausted at the next call). Default: 4096.
  size_t watcher_events_max = 4096;
  /// A watcher nobody polls for this long is stopped. Default: 60000.
  uint32_t watcher_idle_ms = 60'000;
};

/// Adds /e2b/envd/ to `routes`; `inner` is the table of the data plane's
/// /v1 routes that the calls are made of. `tokens` (may be null) are the envd
/// tokens the E2B front handed out: with them, GET and POST /files with a
/// signature (the SDK's signed URLs, which name no sandbox) find their
/// sandbox. `clock` (may be null: the system's; it must outlive the routes)
/// checks signature expiries and times watchers out.
void add_e2b_envd_routes(route_table& routes, std::shared_ptr<const route_table> inner,
                         std::shared_ptr<const envd_token_book> tokens, const wall_clock* clock,
                         e2b_envd_options options = {});

/// E2B's port in a sandbox's host name that is envd's.
inline constexpr uint16_t e2b_envd_port = 49983;

/// A request rewriter (http_server_options::rewrite_request) for E2B's
/// host-name addresses, which the SDK uses when E2B_SANDBOX_URL is unset:
/// `Host: 49983-<sandbox>.<domain>` becomes `/e2b/envd<target>` with that
/// sandbox's E2b-Sandbox-Id; another port becomes /e2b/sandbox-port/<port>,
/// which answers that airlock does not expose sandbox ports by host name.
/// Other hosts are left alone.
std::function<void(http::request_header<>&)> e2b_host_rewriter(std::string domain);

} // namespace airlock::gateway
