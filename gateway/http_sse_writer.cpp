// The streaming half of an HTTP connection (detail::sse_writer): opening an
// event stream or a byte body, writing what is queued in batches,
// heartbeats, dropping a slow consumer and ending a close-delimited stream.

#include <chrono>
#include <memory>
#include <string>
#include <utility>

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/error.hpp>

#include "gateway/http_server_state.hpp"

namespace airlock::gateway::detail {

namespace {

std::string sse_header(unsigned version) {
  return std::string(version == 10 ? "HTTP/1.0" : "HTTP/1.1")
         + " 200 OK\r\nServer: airlock\r\nContent-Type: text/event-stream\r\n"
           "Cache-Control: no-cache\r\nConnection: keep-alive\r\nX-Accel-Buffering: no\r\n\r\n";
}

/// The header of a byte body: the handler's status and fields, then ours.
/// The connection closes after the body (the stream ends it), so it says so.
std::string body_stream_header(unsigned version, const http_response& head) {
  std::string out = std::string(version == 10 ? "HTTP/1.0 " : "HTTP/1.1 ")
                    + std::to_string(head.result_int()) + " " + std::string(head.reason()) + "\r\n";
  for (const auto& field : head.base()) {
    if (field.name() == http::field::connection || field.name() == http::field::server
        || field.name() == http::field::transfer_encoding)
      continue;
    out.append(field.name_string().data(), field.name_string().size()).append(": ");
    out.append(field.value().data(), field.value().size()).append("\r\n");
  }
  return out + "Server: airlock\r\nConnection: close\r\n\r\n";
}

} // namespace

std::shared_ptr<sse_stream> connection::deliver_sse(uint64_t sequence, const sse_options& options) {
  auto stream =
    std::make_shared<sse_stream>(options, std::weak_ptr<detail::sse_writer>(shared_from_this()));
  net::post(stream_.get_executor(), [self = shared_from_this(), sequence, stream] {
    self->on_sse_open(sequence, stream, {});
  });
  return stream;
}

std::shared_ptr<sse_stream> connection::deliver_body_stream(uint64_t sequence, http_response head,
                                                            const sse_options& options) {
  auto stream = std::make_shared<sse_stream>(
    options, std::weak_ptr<detail::sse_writer>(shared_from_this()), stream_body::bytes);
  net::post(stream_.get_executor(),
            [self = shared_from_this(), sequence, stream, head = std::move(head)] {
              self->on_sse_open(sequence, stream, body_stream_header(self->version_, head));
            });
  return stream;
}

void connection::wake() {
  net::post(stream_.get_executor(), [self = shared_from_this()] { self->pump_sse(); });
}

// --- Server-sent events ---

void connection::on_sse_open(uint64_t sequence, const std::shared_ptr<sse_stream>& stream,
                             std::string header) {
  if (sequence != sequence_ || phase_ != phase::handling) {
    stream->finish("client_gone");
    return;
  }
  handler_timer_.cancel();
  server_.sse_opened.fetch_add(1);
  sse_ = stream;
  phase_ = phase::streaming;
  header_pending_ = true;
  sse_header_ = header.empty() ? sse_header(version_) : std::move(header);
  stream_.tcp().expires_after(milliseconds(options().request_timeout_ms));
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

void connection::pump_sse() {
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
    stream_.tcp().expires_after(milliseconds(options().request_timeout_ms));
    net::async_write(
      stream_, net::buffer(sse_batch_),
      [self = shared_from_this()](beast::error_code ec, size_t n) { self->on_sse_written(ec, n); });
    return;
  }
  if (step.end) {
    sse_->finish(step.end_reason);
    return end_stream();
  }
  if (step.drained)
    step.drained();
}

void connection::on_sse_written(const beast::error_code& ec, size_t n) {
  sse_->write_done();
  sse_batch_.clear();
  if (server_.metrics != nullptr)
    server_.metrics->counter_add(metric_bytes, {{"route", route_label_}}, static_cast<double>(n));
  if (ec)
    return fail_sse(ec);
  arm_heartbeat();
  pump_sse();
}

void connection::fail_sse(const beast::error_code& ec) {
  // A write that timed out means the client stopped reading.
  sse_->finish(ec == beast::error::timeout ? "slow_consumer" : "client_gone");
  close_now();
}

void connection::arm_heartbeat() {
  // A byte body without heartbeat_bytes has none (queue_heartbeat refuses them).
  if (phase_ != phase::streaming || sse_->options().heartbeat_ms == 0)
    return;
  heartbeat_timer_.expires_after(milliseconds(sse_->options().heartbeat_ms));
  heartbeat_timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
    if (!ec && self->phase_ == phase::streaming && self->sse_->queue_heartbeat())
      self->pump_sse();
  });
}

void connection::end_stream() {
  if (phase_ == phase::ending)
    return;
  phase_ = phase::ending;
  heartbeat_timer_.cancel();
  if (stream_.is_tls())
    return close_tls();
  beast::error_code ignored;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
  arm_linger();
  start_watch();
}

void connection::arm_linger() {
  linger_timer_.expires_after(milliseconds(options().linger_timeout_ms));
  linger_timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
    if (!ec)
      self->close_now();
  });
}

} // namespace airlock::gateway::detail
