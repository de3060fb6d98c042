#pragma once
// A bounded HTTP/1.1 server (Boost.Beast on Asio) for airlock's listeners.
// Today it serves the operator routes /healthz and /readyz; the API server
// grows out of it by adding routes to its table.
//
// Every resource a client can make it hold is bounded by health_server_options:
// header and body bytes, time to send a request, idle keep-alive time,
// requests per connection and open connections.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "actors/log.hpp"
#include "gateway/endpoint.hpp"
#include "gateway/router.hpp"
#include "schema/errc.hpp"

namespace airlock::gateway {

struct health_server_options {
  /// Threads running the server's io_context. Default: 2.
  size_t threads = 2;
  /// Largest request line plus headers; larger requests get 431. Default: 8192 (8 KiB).
  uint32_t header_bytes_max = 8 * 1024;
  /// Largest request body; larger bodies get 413. Default: 1048576 (1 MiB).
  uint64_t body_bytes_max = uint64_t{1024} * 1024;
  /// Time to receive a whole request once its first byte has arrived, and to
  /// send a response; a slower client is disconnected. Default: 30000.
  uint32_t request_timeout_ms = 30'000;
  /// Time a connection may wait for its next request (keep-alive) or for its
  /// first one. Default: 60000.
  uint32_t idle_timeout_ms = 60'000;
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
  /// before closing, so that it reads the response instead of a reset. Default: 1000.
  uint32_t linger_timeout_ms = 1'000;
};

/// Counters for tests and (later) /metrics. A snapshot; values only grow
/// except `connections_open`.
struct health_server_stats {
  uint64_t connections_accepted = 0;
  uint64_t connections_refused = 0; ///< over connections_max
  uint64_t connections_open = 0;
  uint64_t requests = 0;
  uint64_t requests_rejected = 0; ///< malformed or over a size limit
};

/// Whether the process can take traffic: ok, or why not (the message is shown
/// to the client). Called on an I/O thread for every /readyz: must be cheap
/// and must not block (read an atomic, not the disk).
using readiness_check = std::function<status()>;

/// GET /healthz -> 200 {"status":"ok"}; GET /readyz -> 200 {"status":"ready"}
/// or 503 {"error":{"code":"not_ready","message":...}}.
void add_operator_routes(route_table& routes, readiness_check ready);

class health_server {
public:
  /// Resolves and binds `listen`, then serves `routes` on `options.threads`
  /// threads. io_error when the address cannot be resolved or bound,
  /// invalid_argument for options out of range. The sink of `log` must outlive
  /// the server.
  static result<std::unique_ptr<health_server>> start(const health_server_options& options,
                                                      const endpoint& listen, route_table routes,
                                                      const actors::logger& log);

  /// Stops the server (see stop()).
  ~health_server();
  health_server(const health_server&) = delete;
  health_server& operator=(const health_server&) = delete;

  /// The bound address, with the port the kernel chose for port 0.
  endpoint local_endpoint() const;

  /// Graceful stop: stops accepting, closes idle connections, lets requests
  /// in flight finish for up to shutdown_timeout_ms, then closes the rest and
  /// joins the threads. Blocking and idempotent; call it from a thread that is
  /// not one of the server's.
  void stop();

  health_server_stats stats() const;

  struct impl;

private:
  explicit health_server(std::unique_ptr<impl> state);
  std::unique_ptr<impl> impl_;
};

} // namespace airlock::gateway
