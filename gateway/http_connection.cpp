// One HTTP connection of http_server: reading a request (header first, then
// the body with its route's limit), running its handler (synchronous, or
// asynchronous under handler_timeout_ms), watching the socket meanwhile,
// writing the response and closing (linger, drain).

#include <chrono>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>

#include "gateway/http_server_state.hpp"

namespace airlock::gateway::detail {

namespace {

/// Bytes asked for by each read that waits for a request's first bytes, or
/// that watches the socket while a handler works.
constexpr size_t first_read_bytes = 4096;

bool is_http_error(const beast::error_code& ec) {
  return &ec.category() == &beast::http::make_error_code(http::error::bad_method).category();
}

std::string_view as_view(beast::string_view text) { return {text.data(), text.size()}; }

} // namespace

connection::~connection() {
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

void connection::start() {
  net::dispatch(stream_.get_executor(), [self = shared_from_this()] {
    self->handshake_then(&connection::wait_for_request);
  });
}

void connection::refuse() {
  net::dispatch(stream_.get_executor(), [self = shared_from_this()] {
    self->record_metrics_ = false;
    self->keep_ = false;
    self->handshake_then(&connection::answer_unavailable);
  });
}

void connection::answer_unavailable() {
  send_response(json_error(http::status::service_unavailable, "unavailable",
                           "the server has too many open connections; retry later"));
}

void connection::handshake_then(void (connection::*next)()) {
  if (!stream_.is_tls())
    return (this->*next)();
  phase_ = phase::reading;
  stream_.tcp().expires_after(milliseconds(options().request_timeout_ms));
  stream_.tls().async_handshake(net::ssl::stream_base::server,
                                [self = shared_from_this(), next](beast::error_code ec) {
                                  if (ec) {
                                    // Scanners and clients that do not trust the certificate end
                                    // here: counted, not logged one by one.
                                    self->server_.tls_handshakes_failed.fetch_add(1);
                                    return self->close_now();
                                  }
                                  ((*self).*next)();
                                });
}

void connection::on_server_stop() {
  if (idle_)
    stream_.tcp().cancel();
  if (current_)
    current_->mark_client_gone();
  if (phase_ == phase::streaming && sse_) {
    sse_->finish("server_stopping");
    pump_sse();
  }
}

void connection::deliver(uint64_t sequence, http_response response) {
  net::post(stream_.get_executor(),
            [self = shared_from_this(), sequence, answer = std::move(response)]() mutable {
              self->on_answer(sequence, std::move(answer));
            });
}

// --- Reading a request ---

void connection::wait_for_request() {
  phase_ = phase::waiting;
  if (server_.stopping_flag.load())
    return close_now();
  if (buffer_.size() > 0)
    return read_request(); // a pipelined request is already here
  idle_ = true;
  stream_.tcp().expires_after(milliseconds(options().idle_timeout_ms));
  stream_.async_read_some(
    buffer_.prepare(first_read_bytes),
    [self = shared_from_this()](beast::error_code ec, size_t n) { self->on_first_bytes(ec, n); });
}

void connection::on_first_bytes(const beast::error_code& ec, size_t n) {
  idle_ = false;
  if (ec)
    return close_now(); // idle timeout, client gone, or the server is stopping
  buffer_.commit(n);
  read_request();
}

void connection::read_request() {
  phase_ = phase::reading;
  started_ = steady::now();
  route_label_ = unmatched_route;
  method_.clear();
  parser_.emplace();
  body_parser_.reset();
  body_streamed_ = false;
  body_done_ = false;
  parser_->header_limit(options().header_bytes_max);
  // The body limit depends on the route, known once the header is read;
  // Beast would otherwise refuse a Content-Length over its 1 MiB default.
  // (Not boost::none: Beast 1.74 compares a length with an empty optional
  // as "greater" and refuses every body.)
  parser_->body_limit(std::numeric_limits<uint64_t>::max());
  stream_.tcp().expires_after(milliseconds(options().request_timeout_ms));
  http::async_read_header(
    stream_, buffer_, *parser_,
    [self = shared_from_this()](beast::error_code ec, size_t) { self->on_header(ec); });
}

bool connection::read_failed(const beast::error_code& ec) {
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

void connection::on_header(const beast::error_code& ec) {
  if (read_failed(ec))
    return;
  if (options().rewrite_request)
    options().rewrite_request(parser_->get());
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
  const bool streamed =
    found && match_.route->options.stream_body && match_.route->async_handler != nullptr;
  if (!parser_->is_done() && beast::iequals(head[http::field::expect], "100-continue")) {
    static const std::string continue_line = "HTTP/1.1 100 Continue\r\n\r\n";
    return net::async_write(
      stream_, net::buffer(continue_line),
      [self = shared_from_this(), streamed](beast::error_code write_ec, size_t) {
        if (write_ec)
          return self->close_now();
        self->after_header(streamed);
      });
  }
  after_header(streamed);
}

void connection::after_header(bool streamed) {
  if (streamed)
    return start_streamed();
  read_body();
}

void connection::read_body() {
  http::async_read(
    stream_, buffer_, *parser_,
    [self = shared_from_this()](beast::error_code ec, size_t) { self->on_request(ec); });
}

void connection::on_request(const beast::error_code& ec) {
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
    return start_async(parser_->release(), false);
  send_response(run_sync(request));
}

// --- Handlers ---

http_response connection::run_sync(const http_request& request) {
  try {
    return match_.route->handler(request);
  } catch (const std::exception& e) {
    return handler_failed(e.what());
  } catch (...) {
    return handler_failed("unknown exception");
  }
}

http_response connection::handler_failed(const std::string& what) {
  server_.log.error("request handler failed",
                    {{"route", route_label_}, {"method", method_}, {"error", what}});
  return json_error(http::status::internal_server_error, "internal",
                    "the server failed to answer this request; see its log");
}

void connection::start_async(http_request message, bool body_streamed) {
  phase_ = phase::handling;
  auto request = std::make_shared<exchange>(
    std::move(message), match_.route->pattern, std::move(match_.params),
    std::weak_ptr<detail::exchange_transport>(shared_from_this()), ++sequence_, body_streamed);
  current_ = request;
  arm_handler_timer();
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

void connection::arm_handler_timer() {
  handler_timer_.expires_after(milliseconds(options().handler_timeout_ms));
  handler_timer_.async_wait([self = shared_from_this(), seq = sequence_](beast::error_code ec) {
    if (!ec)
      self->on_handler_timeout(seq);
  });
}

void connection::on_answer(uint64_t sequence, http_response response) {
  if (sequence != sequence_ || phase_ != phase::handling)
    return; // a late answer: the connection answered 504 or is closed
  handler_timer_.cancel();
  send_response(std::move(response));
}

void connection::on_handler_timeout(uint64_t sequence) {
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

void connection::start_watch() {
  if (watch_pending_ || phase_ == phase::closed)
    return;
  if (body_streamed_ && !body_done_)
    return; // the body's reads see the client go; two reads cannot be pending
  bool streaming = phase_ == phase::streaming || phase_ == phase::ending;
  if (!streaming && buffer_.size() >= options().header_bytes_max)
    return;
  watch_pending_ = true;
  stream_.tcp().expires_never(); // only the read: a write in flight keeps its timeout
  auto done = [self = shared_from_this(), streaming](beast::error_code ec, size_t n) {
    self->on_watch(ec, n, streaming);
  };
  if (streaming)
    stream_.async_read_some(net::buffer(drain_buffer_), std::move(done));
  else
    stream_.async_read_some(buffer_.prepare(first_read_bytes), std::move(done));
}

void connection::on_watch(const beast::error_code& ec, size_t n, bool into_drain) {
  watch_pending_ = false;
  if (closing_tls_)
    return close_tls();
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

void connection::on_client_gone(const beast::error_code& ec) {
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

void connection::send_response(http_response response) {
  phase_ = phase::writing;
  // A body the handler left unread cannot be told from the next request.
  bool keep = keep_ && options().keep_alive && !server_.stopping_flag.load() && !client_eof_
              && (!body_streamed_ || body_done_);
  response_ = std::move(response);
  response_.version(version_);
  response_.set(http::field::server, "airlock");
  response_.keep_alive(keep);
  response_.prepare_payload();
  stream_.tcp().expires_after(milliseconds(options().request_timeout_ms));
  http::async_write(
    stream_, response_,
    [self = shared_from_this(), keep](beast::error_code ec, size_t) { self->on_sent(ec, keep); });
}

void connection::on_sent(const beast::error_code& ec, bool keep) {
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

void connection::reject(http::status code, std::string_view error_code,
                        const std::string& message) {
  server_.rejected.fetch_add(1);
  keep_ = false;
  send_response(json_error(code, error_code, message));
}

void connection::record(unsigned status_code, size_t body_bytes) {
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

// --- Closing ---

void connection::linger() {
  phase_ = phase::ending;
  if (stream_.is_tls())
    return close_tls();
  beast::error_code ignored;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
  if (watch_pending_ || body_read_pending_)
    return arm_linger(); // the pending read sees the client close
  stream_.tcp().expires_after(milliseconds(options().linger_timeout_ms));
  drain();
}

void connection::close_tls() {
  if (phase_ == phase::closed || tls_shutdown_started_)
    return;
  closing_tls_ = true;
  if (watch_pending_ || body_read_pending_) {
    // Two reads cannot be pending on a TLS stream: the shutdown reads too.
    beast::error_code ignored;
    stream_.socket().cancel(ignored);
    arm_linger();
    return;
  }
  tls_shutdown_started_ = true;
  stream_.tcp().expires_after(milliseconds(options().linger_timeout_ms));
  stream_.tls().async_shutdown(
    [self = shared_from_this()](beast::error_code) { self->close_now(); });
}

void connection::drain() {
  stream_.async_read_some(net::buffer(drain_buffer_),
                          [self = shared_from_this()](beast::error_code ec, size_t) {
                            if (ec)
                              return self->close_now();
                            self->drain();
                          });
}

void connection::close_now() {
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
  stream_.tcp().close();
}

void connection::release_exchange() {
  if (current_) {
    current_->mark_client_gone();
    current_.reset();
  }
}

void connection::end_sse_with_connection() {
  if (sse_)
    sse_->finish(server_.stopping_flag.load() ? "server_stopping" : "client_gone");
}

} // namespace airlock::gateway::detail
