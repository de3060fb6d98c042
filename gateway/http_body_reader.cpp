// A request body that its handler reads a chunk at a time
// (route_options::stream_body): the header starts the handler, and each
// exchange::read_body_chunk reads at most the asked bytes from the socket.
// Nothing else reads the socket meanwhile, so a handler that does not ask
// leaves the body in the client's and the kernel's buffers: the client is
// slowed to the handler's pace, and memory holds one chunk per request.

#include <string>
#include <utility>

#include <boost/asio/post.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>

#include "gateway/http_server_state.hpp"

namespace airlock::gateway::detail {

namespace {

/// Bytes each socket read of a streamed body asks for at most.
constexpr size_t streamed_read_bytes = 64 * 1024;

} // namespace

void connection::start_streamed() {
  // Beast moves a parser that has read only the header to another body type.
  body_parser_.emplace(std::move(*parser_));
  body_parser_->body_limit(body_limit_);
  // Beast reads as much as the buffer's free capacity: the 4 KiB of a header
  // read would cost a system call and a wake-up per 4 KiB of body.
  buffer_.reserve(streamed_read_bytes);
  body_streamed_ = true;
  body_done_ = body_parser_->is_done();
  server_.requests.fetch_add(1);
  ++requests_served_;
  const auto& head = body_parser_->get();
  keep_ = head.keep_alive() && requests_served_ < options().connection_requests_max;
  version_ = head.version();
  start_async(http_request(http::request_header<>(head.base())), true);
}

void connection::read_body_chunk(uint64_t sequence, size_t max_bytes, body_chunk_handler then) {
  net::post(stream_.get_executor(),
            [self = shared_from_this(), sequence, max_bytes, then = std::move(then)]() mutable {
              self->on_body_wanted(sequence, max_bytes, std::move(then));
            });
}

void connection::on_body_wanted(uint64_t sequence, size_t max_bytes, body_chunk_handler then) {
  if (sequence != sequence_ || !body_streamed_ || phase_ == phase::closed || client_eof_)
    return then(body_failure(make_status(errc::unavailable, "the request is over")));
  if (body_read_pending_)
    return then(body_failure(make_status(errc::wrong_state, "a body read is already pending")));
  if (body_done_)
    return then(body_chunk{status::ok(), {}, true});
  body_read_pending_ = true;
  body_then_ = std::move(then);
  body_piece_.assign(max_bytes, '\0');
  auto& body = body_parser_->get().body();
  body.data = body_piece_.data();
  body.size = body_piece_.size();
  body.more = true;
  if (phase_ == phase::handling)
    arm_handler_timer(); // a long body is bounded per chunk, not whole
  stream_.tcp().expires_after(milliseconds(options().request_timeout_ms));
  http::async_read(
    stream_, buffer_, *body_parser_,
    [self = shared_from_this()](beast::error_code ec, size_t) { self->on_body_read(ec); });
}

void connection::on_body_read(beast::error_code ec) {
  body_read_pending_ = false;
  auto then = std::move(body_then_);
  body_then_ = nullptr;
  if (ec == http::error::need_buffer)
    ec = {}; // the chunk is full
  if (ec || phase_ == phase::closed) {
    auto failure = phase_ == phase::closed ? make_status(errc::unavailable, "the client went away")
                                           : body_read_failed(ec);
    body_piece_ = {};
    return then(body_failure(std::move(failure)));
  }
  body_piece_.resize(body_piece_.size() - body_parser_->get().body().size);
  body_done_ = body_parser_->is_done();
  body_chunk out{status::ok(), std::move(body_piece_), body_done_};
  body_piece_ = {};
  if (body_done_ && phase_ == phase::handling)
    start_watch();
  else if (phase_ == phase::ending) {
    // Answered early: what the client still sends is read and dropped.
    stream_.tcp().expires_after(milliseconds(options().linger_timeout_ms));
    drain();
  }
  then(std::move(out));
}

status connection::body_read_failed(const beast::error_code& ec) {
  status failure = make_status(errc::unavailable, "the client went away: " + ec.message());
  if (ec == http::error::body_limit)
    failure = make_status(errc::too_large,
                          "request body exceeds " + std::to_string(body_limit_) + " bytes");
  else if (&ec.category() == &http::make_error_code(http::error::bad_method).category()
           && ec != http::error::end_of_stream && ec != http::error::partial_message)
    failure = make_status(errc::invalid_argument, "malformed HTTP request: " + ec.message());
  if (phase_ == phase::handling && current_ && current_->claim()) {
    handler_timer_.cancel();
    (void)read_failed(ec); // answers 413 or 400, or closes
  } else if (phase_ != phase::writing) {
    close_now();
  } // else the handler's answer is being written; the connection ends after it
  return failure;
}

} // namespace airlock::gateway::detail
