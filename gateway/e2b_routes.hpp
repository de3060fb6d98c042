#pragma once
// The E2B REST surface under /e2b/ (docs/e2b.md): the sandbox calls of E2B's
// API that the official SDK makes (create, get, list, kill, timeout, pause,
// connect, snapshots, fork, metrics), answered in E2B's shapes and error codes. Each call is one or
// more of airlock's own /v1 calls made in-process, so it gets the same checks, operations, tenants
// and audit as the API's.

#include <cstdint>
#include <memory>
#include <string>

#include "actors/clock.hpp"
#include "gateway/e2b_token_book.hpp"
#include "gateway/router.hpp"

namespace airlock::gateway {

struct e2b_options {
  /// The envd version reported to the SDK; it gates SDK features on it
  /// (0.6.4 or later for everything that e2b 2.51 uses).
  const char* envd_version = "0.6.4";
  /// Longest a create, kill, pause or connect waits for its operation, in
  /// seconds (the SDK's own request timeout is 60 s).
  uint32_t operation_wait_s = 120;
  /// One hold of GET /v1/operations/{id}?wait= while waiting.
  uint32_t operation_poll_s = 30;
  /// E2B's default timeout of a sandbox, in seconds, when a create gives none.
  uint32_t default_timeout_s = 300;
  /// The longest timeout a create or setTimeout may ask for (24 h, as E2B's Pro tier).
  uint32_t max_timeout_s = 86'400;
  /// Lifetime of the envd access token a create or connect hands out: the
  /// longest a sandbox runs without a connect (which hands out a new one).
  uint32_t envd_token_ttl_s = 86'400;
  /// The domain of envd's host-name addresses (`49983-<sandbox>.<domain>`),
  /// reported as a sandbox's `domain`; empty: null, and the SDK must be
  /// given E2B_SANDBOX_URL.
  std::string domain;
};

/// Adds the /e2b/ REST routes to `routes`. `inner` is the table of /v1 routes
/// they call (a copy of the control plane's, taken after it is complete);
/// `clock` times lifetimes.
/// `tokens` (may be null) keeps the envd tokens handed out.
void add_e2b_routes(route_table& routes, std::shared_ptr<const route_table> inner,
                    const wall_clock* clock, std::shared_ptr<envd_token_book> tokens,
                    e2b_options options = {});

} // namespace airlock::gateway
