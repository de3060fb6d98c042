#pragma once
// A bounded HTTP/1.1 server (Boost.Beast on Asio) for airlock's listeners:
// synchronous and asynchronous routes, per-route body limits, server-sent
// events and request metrics; and the operator routes every listener serves
// (/healthz, /readyz, /metrics).
//
// Every resource a client can make it hold is bounded by http_server_options:
// header and body bytes, time to send a request, idle keep-alive time,
// requests per connection, open connections, time a handler may take, and
// (per stream, sse_options) queued events.
//
// A connection reads a request's header first, finds the route, and only then
// reads the body with the route's limit. While a handler works, the
// connection keeps reading (bounded) so that a client that goes away is
// noticed (exchange::client_gone); pipelined requests wait for the answer.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "actors/log.hpp"
#include "gateway/endpoint.hpp"
#include "gateway/exchange.hpp"
#include "gateway/router.hpp"
#include "gateway/sse.hpp"
#include "metrics/metrics.hpp"
#include "schema/errc.hpp"

namespace airlock::gateway {

/// A listener's TLS: PEM files (the certificate first, then any chain).
struct http_tls_files {
  std::string certificate_file;
  std::string key_file;
};

struct http_server_options {
  /// Threads running the server's io_context. Default: 2.
  size_t threads = 2;
  /// Largest request line plus headers; larger requests get 431. Also bounds
  /// the bytes read ahead (pipelined requests) while a handler works. Default: 8192 (8 KiB).
  uint32_t header_bytes_max = 8 * 1024;
  /// Largest request body of a route without its own route_options limit;
  /// larger bodies get 413 `too_large`. Default: 1048576 (1 MiB).
  uint64_t body_bytes_max = uint64_t{1024} * 1024;
  /// Time to receive a whole request once its first byte has arrived, and to
  /// send a response (or one batch of events); a slower client is disconnected.
  /// Default: 30000.
  uint32_t request_timeout_ms = 30'000;
  /// Time a connection may wait for its next request (keep-alive) or for its
  /// first one. Default: 60000.
  uint32_t idle_timeout_ms = 60'000;
  /// Time an asynchronous handler may take to answer (respond or open_sse);
  /// then the server answers 504 `timeout` and ignores the late answer. Long
  /// enough for ?wait=60 long polls. Default: 120000.
  uint32_t handler_timeout_ms = 120'000;
  /// Open connections; one more is answered 503 `unavailable` and closed. Default: 1024.
  size_t connections_max = 1024;
  /// Whether connections stay open for further requests. Default: true.
  bool keep_alive = true;
  /// Requests served on one connection before it is closed (so a client
  /// cannot pin a connection forever). Default: 1000.
  size_t connection_requests_max = 1000;
  /// On stop: how long in-flight requests may take to finish before their
  /// connections are closed. Default: 10000.
  uint32_t shutdown_timeout_ms = 10'000;
  /// After a final response, how long to drain what the client still sends
  /// before closing, so that it reads the response instead of a reset; also
  /// how long the final event of a dropped SSE client may take. Default: 1000.
  uint32_t linger_timeout_ms = 1'000;
  /// Rewrites a request's header before its route is looked up (virtual
  /// hosts, such as E2B's `49983-<sandbox>.<domain>` addresses). Runs on
  /// the connection's thread; must not block. Default: none.
  std::function<void(http::request_header<>&)> rewrite_request;
  /// Serve TLS 1.2 or later with these files instead of plain HTTP. Files
  /// replaced on disk are used from the next connection on (looked at once a
  /// second at most; open connections keep theirs); a replacement that does
  /// not load is logged and the files in use are kept. Default: none (plain).
  std::optional<http_tls_files> tls;
};

/// Counters for tests. A snapshot; values only grow except the `_open` ones.
struct http_server_stats {
  uint64_t connections_accepted = 0;
  uint64_t connections_refused = 0; ///< over connections_max
  uint64_t connections_open = 0;
  uint64_t requests = 0;
  uint64_t requests_rejected = 0; ///< malformed or over a size limit
  uint64_t handler_timeouts = 0;  ///< answered 504 for a handler
  uint64_t sse_streams_opened = 0;
  uint64_t sse_clients_dropped = 0; ///< slow consumers
  uint64_t tls_handshakes_failed = 0;
  uint64_t tls_reloads = 0; ///< certificates re-read after the files changed
};

/// Metric families the server records into a registry given to start():
/// airlock_http_requests_total{route,method,status},
/// airlock_http_request_duration_seconds{route} (histogram, to the end of the
/// response or the SSE header), airlock_http_response_bytes_total{route} (body
/// bytes written, SSE events included). route is the pattern, or "unmatched".
void describe_http_metrics(metrics::metrics_registry& metrics);

class http_server {
public:
  /// Resolves and binds `listen`, then serves `routes` on `options.threads`
  /// threads. io_error when the address cannot be resolved or bound,
  /// invalid_argument for options out of range. The sink of `log` and
  /// `metrics` (optional) must outlive the server.
  static result<std::unique_ptr<http_server>> start(const http_server_options& options,
                                                    const endpoint& listen, route_table routes,
                                                    const actors::logger& log,
                                                    metrics::metrics_registry* metrics = nullptr);

  /// Stops the server (see stop()).
  ~http_server();
  http_server(const http_server&) = delete;
  http_server& operator=(const http_server&) = delete;

  /// The bound address, with the port the kernel chose for port 0.
  endpoint local_endpoint() const;

  /// Graceful stop: stops accepting, closes idle connections, ends event
  /// streams (on_close "server_stopping", then what is queued is written),
  /// marks exchanges in flight client_gone and lets them answer for up to
  /// shutdown_timeout_ms, then closes the rest and joins the threads.
  /// Blocking and idempotent; call it from a thread that is not one of the
  /// server's.
  void stop();

  http_server_stats stats() const;

  struct impl;

private:
  explicit http_server(std::unique_ptr<impl> state);
  std::unique_ptr<impl> impl_;
};

/// GET /metrics -> 200 text/plain; version=0.0.4 with `metrics.render()`.
/// `metrics` must outlive the server.
void add_metrics_route(route_table& routes, const metrics::metrics_registry& metrics);

/// Whether the process can take traffic: ok, or why not (the message is shown
/// to the client). Called on an I/O thread for every /readyz: must be cheap
/// and must not block (read an atomic, not the disk).
using readiness_check = std::function<status()>;

/// GET /healthz -> 200 {"status":"ok"}; GET /readyz -> 200 {"status":"ready"}
/// or 503 {"error":{"code":"not_ready","message":...}}.
void add_operator_routes(route_table& routes, readiness_check ready);

} // namespace airlock::gateway
