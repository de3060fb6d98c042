#include "gateway/health_server.hpp"

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <nlohmann/json.hpp>

namespace airlock::gateway {

namespace net = boost::asio;
namespace beast = boost::beast;
using tcp = net::ip::tcp;
using std::chrono::milliseconds;

namespace {

class connection;

/// Bytes asked for by the read that waits for a request's first bytes.
constexpr size_t first_read_bytes = 4096;
/// After shutdown_timeout_ms, how long stop() waits for force-closed
/// connections to unwind before it stops the io_context regardless.
constexpr milliseconds force_close_wait{1000};
/// Pause before accepting again after accept() failed (e.g. out of file
/// descriptors), so the failure does not become a busy loop.
constexpr milliseconds accept_retry_delay{100};

bool is_http_error(const beast::error_code& ec) {
  return &ec.category() == &beast::http::make_error_code(http::error::bad_method).category();
}

status validate(const health_server_options& options) {
  auto bad = [](std::string what) {
    return make_status(errc::invalid_argument, "health server: " + std::move(what));
  };
  if (options.threads < 1 || options.threads > 256)
    return bad("threads must be in 1..256");
  if (options.connections_max < 1)
    return bad("connections_max must be at least 1");
  if (options.connection_requests_max < 1)
    return bad("connection_requests_max must be at least 1");
  if (options.header_bytes_max < 256)
    return bad("header_bytes_max must be at least 256");
  if (options.request_timeout_ms < 1 || options.idle_timeout_ms < 1)
    return bad("timeouts must be at least 1 ms");
  return status::ok();
}

} // namespace

struct health_server::impl {
  impl(const health_server_options& opts, route_table table, const actors::logger& logger)
      : options(opts), routes(std::move(table)), log(logger.with_component("gateway")),
        io(std::make_unique<net::io_context>(static_cast<int>(opts.threads))) {}

  ~impl() {
    // Connections unregister themselves when destroyed; destroying the
    // io_context destroys the last of them, so it must go while the registry
    // below is still alive.
    accept_retry.reset();
    acceptor.reset();
    io.reset();
  }

  const health_server_options options;
  const route_table routes;
  const actors::logger log;
  endpoint bound;

  std::mutex mutex;                   ///< guards the fields below up to `stopping`
  std::condition_variable all_closed; ///< signalled when `connections` becomes empty
  std::map<uint64_t, std::weak_ptr<connection>> connections;
  uint64_t next_connection_id = 0;
  bool stopping = false;
  std::atomic<bool> stopping_flag{false}; ///< lock-free copy of `stopping` for I/O threads

  std::atomic<uint64_t> accepted{0};
  std::atomic<uint64_t> refused{0};
  std::atomic<uint64_t> requests{0};
  std::atomic<uint64_t> rejected{0};
  std::atomic<uint64_t> refusing{0}; ///< refusal answers being written right now

  std::unique_ptr<net::io_context> io;
  std::unique_ptr<tcp::acceptor> acceptor;         ///< runs on its own strand
  std::unique_ptr<net::steady_timer> accept_retry; ///< same strand as the acceptor
  std::vector<std::thread> threads;

  void accept_next();
  void on_accept(const beast::error_code& ec, tcp::socket socket);
  void admit(tcp::socket socket);
  void run_io();
  void stop();
  void notify_all_connections(void (connection::*what)());
};

namespace {

/// One client connection. All of its handlers run on its own strand.
class connection : public std::enable_shared_from_this<connection> {
public:
  using server_state = health_server::impl;

  /// `id` 0 marks a connection that is refused (not registered).
  connection(tcp::socket socket, server_state& server, uint64_t id)
      : stream_(std::move(socket)), server_(server), id_(id) {}

  ~connection() {
    if (id_ == 0) {
      server_.refusing.fetch_sub(1);
      return;
    }
    std::lock_guard<std::mutex> guard(server_.mutex);
    server_.connections.erase(id_);
    if (server_.connections.empty())
      server_.all_closed.notify_all();
  }

  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;

  void start() {
    net::dispatch(stream_.get_executor(),
                  [self = shared_from_this()] { self->wait_for_request(); });
  }

  /// Answers 503 and closes: the server is at connections_max.
  void refuse() {
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] {
      self->send(json_error(http::status::service_unavailable, "unavailable",
                            "the server has too many open connections; retry later"),
                 11, false);
    });
  }

  /// The server is stopping: an idle connection closes now; a busy one closes
  /// after its current response (send() sees the stopping flag).
  void on_server_stop() {
    if (idle_)
      stream_.cancel();
  }

  void force_close() { stream_.close(); }

  /// The strand every handler of this connection runs on.
  net::any_io_executor executor() { return stream_.get_executor(); }

private:
  const health_server_options& options() const { return server_.options; }

  void wait_for_request() {
    if (server_.stopping_flag.load())
      return close_now();
    if (buffer_.size() > 0)
      return read_request(); // a pipelined request is already here
    idle_ = true;
    stream_.expires_after(milliseconds(options().idle_timeout_ms));
    stream_.async_read_some(
      buffer_.prepare(first_read_bytes),
      [self = shared_from_this()](beast::error_code ec, size_t n) { self->on_first_bytes(ec, n); });
  }

  void on_first_bytes(const beast::error_code& ec, size_t n) {
    idle_ = false;
    if (ec)
      return close_now(); // idle timeout, client gone, or the server is stopping
    buffer_.commit(n);
    read_request();
  }

  void read_request() {
    parser_.emplace();
    parser_->header_limit(options().header_bytes_max);
    parser_->body_limit(options().body_bytes_max);
    stream_.expires_after(milliseconds(options().request_timeout_ms));
    http::async_read(
      stream_, buffer_, *parser_,
      [self = shared_from_this()](beast::error_code ec, size_t) { self->on_request(ec); });
  }

  void on_request(const beast::error_code& ec) {
    if (ec == http::error::header_limit) {
      return reject(http::status::request_header_fields_too_large, "headers_too_large",
                    "request headers exceed " + std::to_string(options().header_bytes_max)
                      + " bytes");
    }
    if (ec == http::error::body_limit) {
      return reject(http::status::payload_too_large, "body_too_large",
                    "request body exceeds " + std::to_string(options().body_bytes_max) + " bytes");
    }
    bool client_gone = ec == http::error::end_of_stream || ec == http::error::partial_message;
    if (ec && is_http_error(ec) && !client_gone)
      return reject(http::status::bad_request, "bad_request",
                    "malformed HTTP request: " + ec.message());
    if (ec)
      return close_now(); // timeout or the client went away mid-request
    answer(parser_->get());
  }

  void answer(const http_request& request) {
    server_.requests.fetch_add(1);
    ++requests_served_;
    http_response response = dispatch(request);
    if (server_.log.enabled(actors::log_level::debug)) {
      server_.log.debug("request", {{"method", std::string(request.method_string())},
                                    {"target", std::string(request.target())},
                                    {"status", response.result_int()}});
    }
    bool keep = request.keep_alive() && requests_served_ < options().connection_requests_max;
    send(std::move(response), request.version(), keep);
  }

  http_response dispatch(const http_request& request) {
    try {
      return server_.routes.dispatch(request);
    } catch (const std::exception& e) {
      server_.log.error("request handler failed",
                        {{"target", std::string(request.target())}, {"error", e.what()}});
      return json_error(http::status::internal_server_error, "internal",
                        "the server failed to answer this request; see its log");
    }
  }

  void reject(http::status code, std::string_view error_code, const std::string& message) {
    server_.rejected.fetch_add(1);
    send(json_error(code, error_code, message), 11, false);
  }

  void send(http_response response, unsigned version, bool keep_alive_wanted) {
    bool keep = keep_alive_wanted && options().keep_alive && !server_.stopping_flag.load();
    response_ = std::move(response);
    response_.version(version);
    response_.set(http::field::server, "airlock");
    response_.keep_alive(keep);
    response_.prepare_payload();
    stream_.expires_after(milliseconds(options().request_timeout_ms));
    http::async_write(
      stream_, response_,
      [self = shared_from_this(), keep](beast::error_code ec, size_t) { self->on_sent(ec, keep); });
  }

  void on_sent(const beast::error_code& ec, bool keep) {
    if (ec)
      return close_now();
    if (!keep)
      return linger();
    wait_for_request();
  }

  /// Half-closes and reads what the client still sends until it closes or
  /// linger_timeout_ms passes: closing with unread bytes would send a reset
  /// that can destroy the response before the client reads it.
  void linger() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.expires_after(milliseconds(options().linger_timeout_ms));
    drain();
  }

  void drain() {
    stream_.async_read_some(net::buffer(drain_buffer_),
                            [self = shared_from_this()](beast::error_code ec, size_t) {
                              if (ec)
                                return self->close_now();
                              self->drain();
                            });
  }

  void close_now() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http_response response_;
  std::array<char, 4096> drain_buffer_{};
  server_state& server_;
  uint64_t id_;
  size_t requests_served_ = 0;
  bool idle_ = false; ///< waiting for the first byte of a request
};

} // namespace

void health_server::impl::accept_next() {
  acceptor->async_accept(net::make_strand(*io), [this](beast::error_code ec, tcp::socket socket) {
    on_accept(ec, std::move(socket));
  });
}

void health_server::impl::on_accept(const beast::error_code& ec, tcp::socket socket) {
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

void health_server::impl::admit(tcp::socket socket) {
  std::unique_lock<std::mutex> lock(mutex);
  if (stopping)
    return; // the socket closes as it goes out of scope
  if (connections.size() < options.connections_max) {
    uint64_t id = ++next_connection_id;
    auto conn = std::make_shared<connection>(std::move(socket), *this, id);
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
  std::make_shared<connection>(std::move(socket), *this, 0)->refuse();
}

void health_server::impl::run_io() {
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

void health_server::impl::notify_all_connections(void (connection::*what)()) {
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

void health_server::impl::stop() {
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

result<std::unique_ptr<health_server>> health_server::start(const health_server_options& options,
                                                            const endpoint& listen,
                                                            route_table routes,
                                                            const actors::logger& log) {
  if (auto valid = validate(options); !valid)
    return valid;
  auto state = std::make_unique<impl>(options, std::move(routes), log);
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
  return std::unique_ptr<health_server>(new health_server(std::move(state)));
}

health_server::health_server(std::unique_ptr<impl> state) : impl_(std::move(state)) {}

health_server::~health_server() { impl_->stop(); }

endpoint health_server::local_endpoint() const { return impl_->bound; }

void health_server::stop() { impl_->stop(); }

health_server_stats health_server::stats() const {
  health_server_stats out;
  out.connections_accepted = impl_->accepted.load();
  out.connections_refused = impl_->refused.load();
  out.requests = impl_->requests.load();
  out.requests_rejected = impl_->rejected.load();
  std::lock_guard<std::mutex> guard(impl_->mutex);
  out.connections_open = impl_->connections.size();
  return out;
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
