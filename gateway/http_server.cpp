#include "gateway/http_server.hpp"

#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "gateway/http_server_state.hpp"

namespace airlock::gateway {

namespace {

using detail::metric_bytes;
using detail::metric_duration;
using detail::metric_requests;

} // namespace

http_server::http_server(std::unique_ptr<impl> state) : impl_(std::move(state)) {}

http_server::~http_server() { impl_->stop(); }

endpoint http_server::local_endpoint() const { return impl_->bound; }

void http_server::stop() { impl_->stop(); }

http_server_stats http_server::stats() const {
  http_server_stats out;
  out.connections_accepted = impl_->accepted.load();
  out.connections_refused = impl_->refused.load();
  out.requests = impl_->requests.load();
  out.requests_rejected = impl_->rejected.load();
  out.handler_timeouts = impl_->handler_timeouts.load();
  out.sse_streams_opened = impl_->sse_opened.load();
  out.sse_clients_dropped = impl_->sse_dropped.load();
  out.tls_handshakes_failed = impl_->tls_handshakes_failed.load();
  out.tls_reloads = impl_->tls_reloads.load();
  std::lock_guard<std::mutex> guard(impl_->mutex);
  out.connections_open = impl_->connections.size();
  return out;
}

void describe_http_metrics(metrics::metrics_registry& metrics) {
  metrics.describe(std::string(metric_requests),
                   "HTTP requests answered, by route pattern, method and status.", "counter");
  metrics.describe(std::string(metric_duration),
                   "Time from a request's first byte to the end of its response (to the header "
                   "of an event stream).",
                   "histogram");
  metrics.describe(std::string(metric_bytes),
                   "Response body bytes written, event streams included, by route pattern.",
                   "counter");
}

void add_metrics_route(route_table& routes, const metrics::metrics_registry& metrics) {
  routes.add(http::verb::get, "/metrics", [&metrics](const http_request&) {
    http_response response{http::status::ok, 11};
    response.set(http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
    response.body() = metrics.render();
    return response;
  });
}

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
