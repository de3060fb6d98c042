#pragma once
// envd, E2B's in-sandbox API, served by airlock's data plane under
// /e2b/envd/ (docs/e2b.md): Connect calls of process.Process and
// filesystem.Filesystem (POST /e2b/envd/<package.Service>/<Method>, JSON or
// binary protobuf) and /health. The sandbox is the E2b-Sandbox-Id header's,
// the X-Access-Token header is its data-plane token, and each call is made of
// the data plane's own /v1 calls, in-process.

#include <cstdint>
#include <memory>
#include <string>

#include "actors/clock.hpp"
#include "gateway/router.hpp"

namespace airlock::gateway {

struct e2b_envd_options {
  /// The largest Connect request body. Default: 4 MiB.
  uint64_t message_bytes_max = 4 << 20;
  /// The largest POST /files body (held whole while its files are written).
  /// Default: 64 MiB.
  uint64_t upload_bytes_max = uint64_t{64} << 20;
  /// Where a relative path points: the default user's home. Default: /root,
  /// until templates carry E2B's `user` account.
  std::string home = "/root";
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
/// /v1 routes that the calls are made of; `clock` (which must outlive the
/// routes) times watchers out.
void add_e2b_envd_routes(route_table& routes, std::shared_ptr<const route_table> inner,
                         const wall_clock& clock, e2b_envd_options options = {});

} // namespace airlock::gateway
