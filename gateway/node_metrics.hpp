#pragma once
// A worker's figures on /metrics. The worker keeps its own (its sandboxes,
// its egress proxy's counters) and hands them over as Prometheus text in one
// actor message (nd_metrics), the same way whether it runs in this process
// (`serve`, which appends them to the control plane's /metrics) or on
// another host (a split-mode worker serves them on its own data listener).

#include <caf/actor_system.hpp>

#include <chrono>
#include <functional>
#include <string>

#include "actors/cluster_protocol.hpp"
#include "gateway/router.hpp"
#include "metrics/metrics.hpp"

namespace airlock::gateway {

/// Asks `node` for its figures and calls `done` (on a CAF thread) with their
/// text followed by `airlock_worker_metrics_up 1`, or with only
/// `airlock_worker_metrics_up 0` when the node fails or does not answer
/// within `timeout`: a scrape shows the worker is missing instead of failing.
void gather_node_metrics(caf::actor_system& system, const actors::node_actor& node,
                         std::chrono::milliseconds timeout, std::function<void(std::string)> done);

/// GET /metrics of a split-mode worker's data listener: the listener's own
/// figures (`listener`, which must outlive the routes), then the node's.
void add_worker_metrics_route(route_table& routes, caf::actor_system& system,
                              const actors::node_actor& node,
                              const metrics::metrics_registry& listener,
                              std::chrono::milliseconds timeout);

} // namespace airlock::gateway
