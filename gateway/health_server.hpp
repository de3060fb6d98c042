#pragma once
// The operator routes (/healthz, /readyz) and the server's former name.
// health_server is http_server (http_server.hpp); the aliases keep callers
// written against the first version compiling.

#include <functional>

#include "gateway/http_server.hpp"
#include "gateway/router.hpp"
#include "schema/errc.hpp"

namespace airlock::gateway {

using health_server = http_server;
using health_server_options = http_server_options;
using health_server_stats = http_server_stats;

/// Whether the process can take traffic: ok, or why not (the message is shown
/// to the client). Called on an I/O thread for every /readyz: must be cheap
/// and must not block (read an atomic, not the disk).
using readiness_check = std::function<status()>;

/// GET /healthz -> 200 {"status":"ok"}; GET /readyz -> 200 {"status":"ready"}
/// or 503 {"error":{"code":"not_ready","message":...}}.
void add_operator_routes(route_table& routes, readiness_check ready);

} // namespace airlock::gateway
