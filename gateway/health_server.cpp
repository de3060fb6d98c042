#include "gateway/health_server.hpp"

#include <utility>

#include <nlohmann/json.hpp>

namespace airlock::gateway {

void add_operator_routes(route_table& routes, readiness_check ready) {
  routes.add(http::verb::get, "/healthz", [](const http_request&) {
    return json_response(http::status::ok, nlohmann::json{{"status", "ok"}});
  });
  routes.add(http::verb::get, "/readyz", [ready = std::move(ready)](const http_request&) {
    status state = ready ? ready() : status::ok();
    if (state)
      return json_response(http::status::ok, nlohmann::json{{"status", "ready"}});
    return json_error(http::status::service_unavailable, "not_ready", state.message);
  });
}

} // namespace airlock::gateway
