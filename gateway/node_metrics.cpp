#include "gateway/node_metrics.hpp"

#include <utility>

#include "gateway/actor_call.hpp"
#include "gateway/exchange.hpp"

namespace airlock::gateway {

namespace {

std::string up_line(bool up) {
  return std::string("# HELP airlock_worker_metrics_up Whether the worker answered this scrape.\n"
                     "# TYPE airlock_worker_metrics_up gauge\n"
                     "airlock_worker_metrics_up ")
         + (up ? "1" : "0") + "\n";
}

} // namespace

void gather_node_metrics(caf::actor_system& system, const actors::node_actor& node,
                         std::chrono::milliseconds timeout, std::function<void(std::string)> done) {
  call_actor(
    system, node, timeout, [done](std::string& text) { done(std::move(text) + up_line(true)); },
    [done](caf::error&) { done(up_line(false)); }, actors::nd_metrics_atom::value);
}

void add_worker_metrics_route(route_table& routes, caf::actor_system& system,
                              const actors::node_actor& node,
                              const metrics::metrics_registry& listener,
                              std::chrono::milliseconds timeout) {
  routes.add_async(
    http::verb::get, "/metrics", [&system, node, &listener, timeout](std::shared_ptr<exchange> ex) {
      gather_node_metrics(system, node, timeout, [ex, &listener](std::string worker_text) {
        http_response response{http::status::ok, 11};
        response.set(http::field::content_type, "text/plain; version=0.0.4");
        response.body() = listener.render() + worker_text;
        ex->respond(std::move(response));
      });
    });
}

} // namespace airlock::gateway
