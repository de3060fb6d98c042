// http_server's listener: validating options, resolving and binding the
// address, the accept loop (admission under connections_max, refusals with
// 503), the I/O threads and the graceful stop.

#include <chrono>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core/error.hpp>

#include "gateway/http_server_state.hpp"

namespace airlock::gateway {

namespace {

using detail::connection;

/// After shutdown_timeout_ms, how long stop() waits for force-closed
/// connections to unwind before it stops the io_context regardless.
constexpr milliseconds force_close_wait{1000};
/// Pause before accepting again after accept() failed (e.g. out of file
/// descriptors), so the failure does not become a busy loop.
constexpr milliseconds accept_retry_delay{100};

status validate(const http_server_options& options) {
  auto bad = [](std::string what) {
    return make_status(errc::invalid_argument, "http server: " + std::move(what));
  };
  if (options.threads < 1 || options.threads > 256)
    return bad("threads must be in 1..256");
  if (options.connections_max < 1)
    return bad("connections_max must be at least 1");
  if (options.connection_requests_max < 1)
    return bad("connection_requests_max must be at least 1");
  if (options.header_bytes_max < 256)
    return bad("header_bytes_max must be at least 256");
  if (options.request_timeout_ms < 1 || options.idle_timeout_ms < 1
      || options.handler_timeout_ms < 1)
    return bad("timeouts must be at least 1 ms");
  return status::ok();
}

} // namespace

void http_server::impl::accept_next() {
  acceptor->async_accept(net::make_strand(*io), [this](beast::error_code ec, tcp::socket socket) {
    on_accept(ec, std::move(socket));
  });
}

void http_server::impl::on_accept(const beast::error_code& ec, tcp::socket socket) {
  if (ec == net::error::operation_aborted || !acceptor->is_open())
    return; // stop() closed the acceptor
  if (ec) {
    log.warn("accept failed; retrying", {{"error", ec.message()}});
    accept_retry->expires_after(accept_retry_delay);
    accept_retry->async_wait([this](beast::error_code wait_ec) {
      if (!wait_ec)
        accept_next();
    });
    return;
  }
  accepted.fetch_add(1);
  admit(std::move(socket));
  accept_next();
}

void http_server::impl::admit(tcp::socket socket) {
  std::unique_lock<std::mutex> lock(mutex);
  if (stopping)
    return; // the socket closes as it goes out of scope
  if (connections.size() < options.connections_max) {
    uint64_t id = ++next_connection_id;
    auto conn =
      std::make_shared<connection>(std::move(socket), tls_for_next_connection(), *this, id);
    connections.emplace(id, conn);
    lock.unlock();
    conn->start();
    return;
  }
  lock.unlock();
  refused.fetch_add(1);
  // Refusals are bounded too: past connections_max of them in flight, the
  // extra client gets a plain close instead of a 503.
  if (refusing.fetch_add(1) >= options.connections_max) {
    refusing.fetch_sub(1);
    return;
  }
  std::make_shared<connection>(std::move(socket), tls_for_next_connection(), *this, 0)->refuse();
}

void http_server::impl::run_io() {
  for (;;) {
    try {
      io->run();
      return;
    } catch (const std::exception& e) {
      // Handlers catch their own failures; reaching here is a bug, but the
      // other connections deserve a running server.
      log.error("I/O thread caught an exception", {{"error", e.what()}});
    }
  }
}

void http_server::impl::notify_all_connections(void (connection::*what)()) {
  std::vector<std::shared_ptr<connection>> open;
  {
    std::lock_guard<std::mutex> guard(mutex);
    for (auto& [id, weak] : connections) {
      if (auto conn = weak.lock())
        open.push_back(std::move(conn));
    }
  }
  for (auto& conn : open) {
    net::post(conn->executor(), [conn, what] { ((*conn).*what)(); });
  }
}

void http_server::impl::stop() {
  {
    std::lock_guard<std::mutex> guard(mutex);
    if (stopping)
      return;
    stopping = true;
    stopping_flag.store(true);
  }
  net::post(acceptor->get_executor(), [this] {
    beast::error_code ignored;
    acceptor->close(ignored);
    accept_retry->cancel();
  });
  notify_all_connections(&connection::on_server_stop);
  std::unique_lock<std::mutex> lock(mutex);
  bool drained = all_closed.wait_for(lock, milliseconds(options.shutdown_timeout_ms),
                                     [this] { return connections.empty(); });
  if (!drained) {
    log.warn("closing connections still busy at the shutdown deadline",
             {{"connections", connections.size()}});
    lock.unlock();
    notify_all_connections(&connection::force_close);
    lock.lock();
    all_closed.wait_for(lock, force_close_wait, [this] { return connections.empty(); });
  }
  lock.unlock();
  io->stop();
  for (auto& thread : threads)
    thread.join();
  threads.clear();
}

result<std::unique_ptr<http_server>> http_server::start(const http_server_options& options,
                                                        const endpoint& listen, route_table routes,
                                                        const actors::logger& log,
                                                        metrics::metrics_registry* metrics) {
  if (auto valid = validate(options); !valid)
    return valid;
  if (metrics != nullptr)
    describe_http_metrics(*metrics);
  auto state = std::make_unique<impl>(options, std::move(routes), log, metrics);
  if (auto tls = state->start_tls(); !tls)
    return tls;
  auto failed = [&listen](const std::string& what, const beast::error_code& ec) {
    return make_status(errc::io_error,
                       "cannot listen on " + to_string(listen) + ": " + what + ec.message());
  };
  beast::error_code ec;
  tcp::resolver resolver(*state->io);
  auto found = resolver.resolve(listen.host, std::to_string(listen.port),
                                tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec || found.empty())
    return failed("cannot resolve the host: ", ec);
  tcp::endpoint address = found.begin()->endpoint();
  auto strand = net::make_strand(*state->io);
  state->acceptor = std::make_unique<tcp::acceptor>(strand);
  state->accept_retry = std::make_unique<net::steady_timer>(strand);
  tcp::acceptor& acceptor = *state->acceptor;
  if (acceptor.open(address.protocol(), ec); ec)
    return failed("", ec);
  if (acceptor.set_option(net::socket_base::reuse_address(true), ec); ec)
    return failed("", ec);
  if (acceptor.bind(address, ec); ec)
    return failed("", ec);
  if (acceptor.listen(net::socket_base::max_listen_connections, ec); ec)
    return failed("", ec);
  auto local = acceptor.local_endpoint(ec);
  if (ec)
    return failed("", ec);
  state->bound = endpoint{local.address().to_string(), local.port()};
  state->accept_next();
  for (size_t i = 0; i < options.threads; ++i)
    state->threads.emplace_back([raw = state.get()] { raw->run_io(); });
  return std::unique_ptr<http_server>(new http_server(std::move(state)));
}

} // namespace airlock::gateway
