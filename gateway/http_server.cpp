#include "gateway/http_server.hpp"

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <limits>
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
#include <boost/beast/core/string.hpp>
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
using steady = std::chrono::steady_clock;

namespace {

class connection;

/// Bytes asked for by each read that waits for a request's first bytes, or
/// that watches the socket while a handler works.
constexpr size_t first_read_bytes = 4096;
/// After shutdown_timeout_ms, how long stop() waits for force-closed
/// connections to unwind before it stops the io_context regardless.
constexpr milliseconds force_close_wait{1000};
/// Pause before accepting again after accept() failed (e.g. out of file
/// descriptors), so the failure does not become a busy loop.
constexpr milliseconds accept_retry_delay{100};

constexpr std::string_view metric_requests = "airlock_http_requests_total";
constexpr std::string_view metric_duration = "airlock_http_request_duration_seconds";
constexpr std::string_view metric_bytes = "airlock_http_response_bytes_total";
constexpr std::string_view unmatched_route = "unmatched";

bool is_http_error(const beast::error_code& ec) {
  return &ec.category() == &beast::http::make_error_code(http::error::bad_method).category();
}

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

std::string sse_header(unsigned version) {
  return std::string(version == 10 ? "HTTP/1.0" : "HTTP/1.1")
         + " 200 OK\r\nServer: airlock\r\nContent-Type: text/event-stream\r\n"
           "Cache-Control: no-cache\r\nConnection: keep-alive\r\nX-Accel-Buffering: no\r\n\r\n";
}

std::string_view as_view(beast::string_view text) { return {text.data(), text.size()}; }

} // namespace

struct http_server::impl {
  impl(const http_server_options& opts, route_table table, const actors::logger& logger,
       metrics_registry* registry)
      : options(opts), routes(std::move(table)), log(logger.with_component("gateway")),
        metrics(registry), io(std::make_unique<net::io_context>(static_cast<int>(opts.threads))) {}

  ~impl() {
    // Connections unregister themselves when destroyed; destroying the
    // io_context destroys the last of them, so it must go while the registry
    // below is still alive.
    accept_retry.reset();
    acceptor.reset();
    io.reset();
  }

  const http_server_options options;
  const route_table routes;
  const actors::logger log;
  metrics_registry* const metrics; ///< may be null; not owned
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
  std::atomic<uint64_t> handler_timeouts{0};
  std::atomic<uint64_t> sse_opened{0};
  std::atomic<uint64_t> sse_dropped{0};
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

/// One client connection. All of its handlers run on its own strand; the
/// exchange and the event stream reach it from other threads only through
/// deliver(), deliver_sse() and wake(), which post to that strand.
class connection : public std::enable_shared_from_this<connection>,
                   public detail::exchange_transport,
                   public detail::sse_writer {
public:
  using server_state = http_server::impl;

  /// `id` 0 marks a connection that is refused (not registered).
  connection(tcp::socket socket, server_state& server, uint64_t id)
      : stream_(std::move(socket)), handler_timer_(stream_.get_executor()),
        heartbeat_timer_(stream_.get_executor()), linger_timer_(stream_.get_executor()),
        server_(server), id_(id) {}

  ~connection() override {
    release_exchange();
    end_sse_with_connection();
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
      self->record_metrics_ = false;
      self->keep_ = false;
      self->send_response(json_error(http::status::service_unavailable, "unavailable",
                                     "the server has too many open connections; retry later"));
    });
  }

  /// The server is stopping: an idle connection closes now; a busy one closes
  /// after its current response (send_response() sees the stopping flag); an
  /// event stream ends after what is queued.
  void on_server_stop() {
    if (idle_)
      stream_.cancel();
    if (current_)
      current_->mark_client_gone();
    if (phase_ == phase::streaming && sse_) {
      sse_->finish("server_stopping");
      pump_sse();
    }
  }

  void force_close() { close_now(); }

  /// The strand every handler of this connection runs on.
  net::any_io_executor executor() { return stream_.get_executor(); }

  // detail::exchange_transport: any thread.
  void deliver(uint64_t sequence, http_response response) override {
    net::post(stream_.get_executor(),
              [self = shared_from_this(), sequence, answer = std::move(response)]() mutable {
                self->on_answer(sequence, std::move(answer));
              });
  }

  std::shared_ptr<sse_stream> deliver_sse(uint64_t sequence, const sse_options& options) override {
    auto stream =
      std::make_shared<sse_stream>(options, std::weak_ptr<detail::sse_writer>(shared_from_this()));
    net::post(stream_.get_executor(), [self = shared_from_this(), sequence, stream] {
      self->on_sse_open(sequence, stream);
    });
    return stream;
  }

  // detail::sse_writer: any thread.
  void wake() override {
    net::post(stream_.get_executor(), [self = shared_from_this()] { self->pump_sse(); });
  }

private:
  enum class phase { waiting, reading, handling, writing, streaming, ending, closed };

  const http_server_options& options() const { return server_.options; }

  // --- Reading a request ---

  void wait_for_request() {
    phase_ = phase::waiting;
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
    phase_ = phase::reading;
    started_ = steady::now();
    route_label_ = unmatched_route;
    method_.clear();
    parser_.emplace();
    parser_->header_limit(options().header_bytes_max);
    // The body limit depends on the route, known once the header is read;
    // Beast would otherwise refuse a Content-Length over its 1 MiB default.
    // (Not boost::none: Beast 1.74 compares a length with an empty optional
    // as "greater" and refuses every body.)
    parser_->body_limit(std::numeric_limits<uint64_t>::max());
    stream_.expires_after(milliseconds(options().request_timeout_ms));
    http::async_read_header(
      stream_, buffer_, *parser_,
      [self = shared_from_this()](beast::error_code ec, size_t) { self->on_header(ec); });
  }

  /// True when `ec` ended the request read; answers or closes.
  bool read_failed(const beast::error_code& ec) {
    if (!ec)
      return false;
    if (ec == http::error::header_limit) {
      reject(http::status::request_header_fields_too_large, "headers_too_large",
             "request headers exceed " + std::to_string(options().header_bytes_max) + " bytes");
    } else if (ec == http::error::body_limit) {
      reject(http::status::payload_too_large, "too_large",
             "request body exceeds " + std::to_string(body_limit_) + " bytes");
    } else if (is_http_error(ec) && ec != http::error::end_of_stream
               && ec != http::error::partial_message) {
      reject(http::status::bad_request, "bad_request", "malformed HTTP request: " + ec.message());
    } else {
      close_now(); // timeout or the client went away mid-request
    }
    return true;
  }

  void on_header(const beast::error_code& ec) {
    if (read_failed(ec))
      return;
    const auto& head = parser_->get();
    method_ = std::string(as_view(head.method_string()));
    std::string_view path = path_of(as_view(head.target()));
    match_ = server_.routes.match(head.method(), path);
    bool found = match_.result == route_match::outcome::found;
    if (found)
      route_label_ = match_.route->pattern;
    body_limit_ = found && match_.route->options.body_bytes_max > 0
                    ? match_.route->options.body_bytes_max
                    : options().body_bytes_max;
    // Refuse an announced body that is too big before reading any of it.
    if (auto length = parser_->content_length(); length && *length > body_limit_) {
      return reject(http::status::payload_too_large, "too_large",
                    "request body of " + std::to_string(*length) + " bytes exceeds "
                      + std::to_string(body_limit_) + " bytes");
    }
    parser_->body_limit(body_limit_);
    if (!parser_->is_done() && beast::iequals(head[http::field::expect], "100-continue")) {
      static const std::string continue_line = "HTTP/1.1 100 Continue\r\n\r\n";
      return net::async_write(stream_, net::buffer(continue_line),
                              [self = shared_from_this()](beast::error_code write_ec, size_t) {
                                if (write_ec)
                                  return self->close_now();
                                self->read_body();
                              });
    }
    read_body();
  }

  void read_body() {
    http::async_read(
      stream_, buffer_, *parser_,
      [self = shared_from_this()](beast::error_code ec, size_t) { self->on_request(ec); });
  }

  void on_request(const beast::error_code& ec) {
    if (read_failed(ec))
      return;
    server_.requests.fetch_add(1);
    ++requests_served_;
    const auto& request = parser_->get();
    keep_ = request.keep_alive() && requests_served_ < options().connection_requests_max;
    version_ = request.version();
    std::string_view path = path_of(as_view(request.target()));
    switch (match_.result) {
      case route_match::outcome::not_found: return send_response(route_not_found(method_, path));
      case route_match::outcome::method_not_allowed:
        return send_response(route_method_not_allowed(method_, path, match_.allow));
      case route_match::outcome::found: break;
    }
    if (match_.route->async_handler)
      return start_async();
    send_response(run_sync(request));
  }

  // --- Handlers ---

  http_response run_sync(const http_request& request) {
    try {
      return match_.route->handler(request);
    } catch (const std::exception& e) {
      return handler_failed(e.what());
    } catch (...) {
      return handler_failed("unknown exception");
    }
  }

  http_response handler_failed(const std::string& what) {
    server_.log.error("request handler failed",
                      {{"route", route_label_}, {"method", method_}, {"error", what}});
    return json_error(http::status::internal_server_error, "internal",
                      "the server failed to answer this request; see its log");
  }

  void start_async() {
    phase_ = phase::handling;
    auto request = std::make_shared<exchange>(
      parser_->release(), match_.route->pattern, std::move(match_.params),
      std::weak_ptr<detail::exchange_transport>(shared_from_this()), ++sequence_);
    current_ = request;
    handler_timer_.expires_after(milliseconds(options().handler_timeout_ms));
    handler_timer_.async_wait([self = shared_from_this(), seq = sequence_](beast::error_code ec) {
      if (!ec)
        self->on_handler_timeout(seq);
    });
    start_watch();
    std::optional<std::string> failure;
    try {
      match_.route->async_handler(request);
    } catch (const std::exception& e) {
      failure = e.what();
    } catch (...) {
      failure = "unknown exception";
    }
    if (failure && request->claim())
      on_answer(sequence_, handler_failed(*failure));
  }

  void on_answer(uint64_t sequence, http_response response) {
    if (sequence != sequence_ || phase_ != phase::handling)
      return; // a late answer: the connection answered 504 or is closed
    handler_timer_.cancel();
    send_response(std::move(response));
  }

  void on_handler_timeout(uint64_t sequence) {
    if (sequence != sequence_ || phase_ != phase::handling || !current_->claim())
      return; // answered meanwhile; the answer is on its way here
    server_.handler_timeouts.fetch_add(1);
    server_.log.warn(
      "request handler did not answer in time",
      {{"route", route_label_}, {"method", method_}, {"timeout_ms", options().handler_timeout_ms}});
    send_response(json_error(http::status::gateway_timeout, "timeout",
                             "the server did not answer within "
                               + std::to_string(options().handler_timeout_ms) + " ms"));
  }

  // --- Watching the socket while a handler works or events stream ---

  /// Keeps one read pending so that a client that goes away is noticed.
  /// Bytes of pipelined requests collect in buffer_ (at most
  /// header_bytes_max); while streaming, what the client sends is discarded.
  void start_watch() {
    if (watch_pending_ || phase_ == phase::closed)
      return;
    bool streaming = phase_ == phase::streaming || phase_ == phase::ending;
    if (!streaming && buffer_.size() >= options().header_bytes_max)
      return;
    watch_pending_ = true;
    stream_.expires_never(); // only the read: a write in flight keeps its timeout
    auto done = [self = shared_from_this(), streaming](beast::error_code ec, size_t n) {
      self->on_watch(ec, n, streaming);
    };
    if (streaming)
      stream_.async_read_some(net::buffer(drain_buffer_), std::move(done));
    else
      stream_.async_read_some(buffer_.prepare(first_read_bytes), std::move(done));
  }

  void on_watch(const beast::error_code& ec, size_t n, bool into_drain) {
    watch_pending_ = false;
    if (!ec && !into_drain)
      buffer_.commit(n);
    if (watch_cancelled_) {
      watch_cancelled_ = false;
      if (ec && ec != net::error::operation_aborted)
        return close_now();
      return wait_for_request();
    }
    if (phase_ == phase::closed)
      return;
    if (ec)
      return on_client_gone(ec);
    start_watch();
  }

  void on_client_gone(const beast::error_code& ec) {
    client_eof_ = true;
    if (current_)
      current_->mark_client_gone();
    switch (phase_) {
      case phase::streaming:
      case phase::ending:
        if (sse_)
          sse_->finish("client_gone");
        return close_now();
      case phase::handling:
        // A client that only half-closed may still read the answer.
        if (ec != net::error::eof)
          close_now();
        return;
      default: return; // writing: the write ends the connection (client_eof_)
    }
  }

  // --- Writing a response ---

  void send_response(http_response response) {
    phase_ = phase::writing;
    bool keep = keep_ && options().keep_alive && !server_.stopping_flag.load() && !client_eof_;
    response_ = std::move(response);
    response_.version(version_);
    response_.set(http::field::server, "airlock");
    response_.keep_alive(keep);
    response_.prepare_payload();
    stream_.expires_after(milliseconds(options().request_timeout_ms));
    http::async_write(
      stream_, response_,
      [self = shared_from_this(), keep](beast::error_code ec, size_t) { self->on_sent(ec, keep); });
  }

  void on_sent(const beast::error_code& ec, bool keep) {
    record(response_.result_int(), response_.body().size());
    release_exchange();
    response_ = {};
    if (ec)
      return close_now();
    if (!keep)
      return linger();
    if (watch_pending_) {
      // The watch read has no idle timeout: end it, then wait properly.
      watch_cancelled_ = true;
      beast::error_code ignored;
      stream_.socket().cancel(ignored);
      return;
    }
    wait_for_request();
  }

  void reject(http::status code, std::string_view error_code, const std::string& message) {
    server_.rejected.fetch_add(1);
    keep_ = false;
    send_response(json_error(code, error_code, message));
  }

  void record(unsigned status_code, size_t body_bytes) {
    if (server_.metrics == nullptr || !record_metrics_)
      return;
    auto& metrics = *server_.metrics;
    metrics.counter_add(
      metric_requests,
      {{"route", route_label_}, {"method", method_}, {"status", std::to_string(status_code)}});
    std::chrono::duration<double> took = steady::now() - started_;
    metrics.histogram_observe(metric_duration, {{"route", route_label_}}, took.count());
    metrics.counter_add(metric_bytes, {{"route", route_label_}}, static_cast<double>(body_bytes));
  }

  // --- Server-sent events ---

  void on_sse_open(uint64_t sequence, const std::shared_ptr<sse_stream>& stream) {
    if (sequence != sequence_ || phase_ != phase::handling) {
      stream->finish("client_gone");
      return;
    }
    handler_timer_.cancel();
    server_.sse_opened.fetch_add(1);
    sse_ = stream;
    phase_ = phase::streaming;
    header_pending_ = true;
    sse_header_ = sse_header(version_);
    stream_.expires_after(milliseconds(options().request_timeout_ms));
    net::async_write(stream_, net::buffer(sse_header_),
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       self->header_pending_ = false;
                       if (ec)
                         return self->fail_sse(ec);
                       self->record(200, 0);
                       self->arm_heartbeat();
                       self->pump_sse();
                     });
    start_watch();
  }

  /// Moves the stream forward: finishes a dropped client, writes what is
  /// queued, ends the response, or tells the producer the queue is empty.
  void pump_sse() {
    if (!sse_ || header_pending_ || (phase_ != phase::streaming && phase_ != phase::ending))
      return;
    auto step = sse_->next_step();
    if (step.finish_slow_consumer) {
      server_.sse_dropped.fetch_add(1);
      sse_->finish("slow_consumer");
      // The final error event gets linger_timeout_ms; a client that does not
      // read is not waited for longer.
      arm_linger();
    }
    if (!step.bytes.empty()) {
      sse_batch_ = std::move(step.bytes);
      stream_.expires_after(milliseconds(options().request_timeout_ms));
      net::async_write(stream_, net::buffer(sse_batch_),
                       [self = shared_from_this()](beast::error_code ec, size_t n) {
                         self->on_sse_written(ec, n);
                       });
      return;
    }
    if (step.end) {
      sse_->finish(step.end_reason);
      return end_stream();
    }
    if (step.drained)
      step.drained();
  }

  void on_sse_written(const beast::error_code& ec, size_t n) {
    sse_->write_done();
    sse_batch_.clear();
    if (server_.metrics != nullptr)
      server_.metrics->counter_add(metric_bytes, {{"route", route_label_}}, static_cast<double>(n));
    if (ec)
      return fail_sse(ec);
    arm_heartbeat();
    pump_sse();
  }

  void fail_sse(const beast::error_code& ec) {
    // A write that timed out means the client stopped reading.
    sse_->finish(ec == beast::error::timeout ? "slow_consumer" : "client_gone");
    close_now();
  }

  void arm_heartbeat() {
    if (phase_ != phase::streaming)
      return;
    heartbeat_timer_.expires_after(milliseconds(sse_->options().heartbeat_ms));
    heartbeat_timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (!ec && self->phase_ == phase::streaming && self->sse_->queue_heartbeat())
        self->pump_sse();
    });
  }

  /// Ends a close-delimited event stream: half-close, then wait (bounded) for
  /// the client to close so that it reads everything before a reset could.
  void end_stream() {
    if (phase_ == phase::ending)
      return;
    phase_ = phase::ending;
    heartbeat_timer_.cancel();
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    arm_linger();
    start_watch();
  }

  void arm_linger() {
    linger_timer_.expires_after(milliseconds(options().linger_timeout_ms));
    linger_timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (!ec)
        self->close_now();
    });
  }

  // --- Closing ---

  /// Half-closes and reads what the client still sends until it closes or
  /// linger_timeout_ms passes: closing with unread bytes would send a reset
  /// that can destroy the response before the client reads it.
  void linger() {
    phase_ = phase::ending;
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    if (watch_pending_)
      return arm_linger(); // the watch read sees the client close
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
    if (phase_ == phase::closed)
      return;
    phase_ = phase::closed;
    handler_timer_.cancel();
    heartbeat_timer_.cancel();
    linger_timer_.cancel();
    release_exchange();
    end_sse_with_connection();
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
  }

  /// Tells a producer still holding the exchange that nobody listens.
  void release_exchange() {
    if (current_) {
      current_->mark_client_gone();
      current_.reset();
    }
  }

  /// Ends the event stream, if any, because the connection ends (idempotent).
  void end_sse_with_connection() {
    if (sse_)
      sse_->finish(server_.stopping_flag.load() ? "server_stopping" : "client_gone");
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http_response response_;
  std::array<char, 4096> drain_buffer_{};
  net::steady_timer handler_timer_;   ///< handler_timeout_ms of the exchange in flight
  net::steady_timer heartbeat_timer_; ///< SSE heartbeat
  net::steady_timer linger_timer_;    ///< bounds the end of a stream or a drop
  server_state& server_;
  uint64_t id_;

  phase phase_ = phase::waiting;
  size_t requests_served_ = 0;
  bool idle_ = false; ///< waiting for the first byte of a request
  bool keep_ = true;  ///< the request in flight allows keep-alive
  unsigned version_ = 11;
  bool record_metrics_ = true;
  route_match match_;
  uint64_t body_limit_ = 0;
  std::string route_label_{unmatched_route};
  std::string method_;
  steady::time_point started_ = steady::now();

  uint64_t sequence_ = 0;             ///< of the exchange in flight
  std::shared_ptr<exchange> current_; ///< the async exchange in flight
  bool watch_pending_ = false;
  bool watch_cancelled_ = false; ///< cancelled to read the next request
  bool client_eof_ = false;

  std::shared_ptr<sse_stream> sse_;
  std::string sse_header_;
  std::string sse_batch_; ///< the bytes being written
  bool header_pending_ = false;
};

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
                                                        metrics_registry* metrics) {
  if (auto valid = validate(options); !valid)
    return valid;
  if (metrics != nullptr)
    describe_http_metrics(*metrics);
  auto state = std::make_unique<impl>(options, std::move(routes), log, metrics);
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
  std::lock_guard<std::mutex> guard(impl_->mutex);
  out.connections_open = impl_->connections.size();
  return out;
}

void describe_http_metrics(metrics_registry& metrics) {
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

void add_metrics_route(route_table& routes, const metrics_registry& metrics) {
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
