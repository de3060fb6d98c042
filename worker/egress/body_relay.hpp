#pragma once
// Moving one HTTP message's header and body between a guest and an upstream
// for the egress proxy's HTTP loop (egress_http.cpp): bodies with a length or
// ended by the connection are copied with plain large reads and writes under
// one stall watchdog; chunked bodies go through Beast's parser and
// serializer. Internal to worker/egress; not a public header.

#include <algorithm>
#include <chrono>
#include <functional>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <boost/beast/http.hpp>

#include "worker/egress/proxy_internal.hpp"

namespace airlock::worker::egress {

namespace http = beast::http;

enum class relay_failure { none, input, output };

/// Calls `stall` when progress() was not called for `idle`: one timer for a
/// whole body instead of Beast's tcp_stream timeouts, which arm and cancel a
/// timer around every read and write (two handler dispatches and a timerfd
/// update each). Lives in the relaying coroutine's frame and runs on its
/// executor; `stall` never runs after the watchdog is destroyed.
class stall_watchdog {
public:
  using clock = std::chrono::steady_clock;

  stall_watchdog(const net::any_io_executor& executor, milliseconds idle,
                 std::function<void()> stall)
      : state_(std::make_shared<state>(executor, idle, std::move(stall))) {
    arm(state_);
  }
  ~stall_watchdog() {
    state_->stopped = true;
    state_->timer.cancel();
  }
  stall_watchdog(const stall_watchdog&) = delete;
  stall_watchdog& operator=(const stall_watchdog&) = delete;

  void progress() { state_->last = clock::now(); }

private:
  struct state {
    state(const net::any_io_executor& executor, milliseconds idle_time,
          std::function<void()> on_stall)
        : timer(executor), idle(idle_time), stall(std::move(on_stall)) {}
    net::steady_timer timer;
    milliseconds idle;
    std::function<void()> stall;
    clock::time_point last = clock::now();
    bool stopped = false;
  };

  static void arm(const std::shared_ptr<state>& s) {
    s->timer.expires_at(s->last + s->idle);
    s->timer.async_wait([s](const beast::error_code&) {
      if (s->stopped)
        return;
      if (clock::now() - s->last >= s->idle)
        return s->stall();
      arm(s); // progress since: wait for the rest of the idle time
    });
  }

  std::shared_ptr<state> state_;
};

/// How a parsed message's body ends, once its header is read.
struct body_framing {
  uint64_t length = 0;      ///< Content-Length bytes still to come
  bool until_close = false; ///< a response whose body ends with the connection
  bool chunked = false;     ///< left to Beast's parser (relay_chunked)
};

template <bool is_request>
body_framing framing_of(const http::parser<is_request, http::buffer_body>& parser) {
  if (parser.is_done())
    return {}; // no body: HEAD, 1xx, 204, 304, length 0, bodiless request
  if (parser.chunked())
    return {0, false, true};
  if (auto length = parser.content_length_remaining())
    return {*length, false};
  return {0, true};
}

/// The header as it goes out (with any field the proxy set or erased).
template <bool is_request>
std::string serialized_header(const http::message<is_request, http::buffer_body>& message) {
  std::ostringstream text;
  text << message.base();
  return std::move(text).str();
}

/// Copies the rest of a body: plain large reads and writes, one watchdog for
/// the idle timeout.
template <class In, class Out>
awaitable<relay_failure> copy_body(const connection& conn, In& in, Out& out, bool until_close,
                                   uint64_t remaining, std::vector<char>& space) {
  auto executor = co_await net::this_coro::executor;
  stall_watchdog watchdog{executor, milliseconds(conn.state.options.idle_timeout_ms), [&in, &out] {
                            tunnel_detail::close_lowest(in);
                            tunnel_detail::close_lowest(out);
                          }};
  space.resize(std::max<std::size_t>(conn.state.options.relay_chunk_bytes, 1));
  beast::error_code ec;
  while (remaining > 0) {
    auto want = static_cast<std::size_t>(std::min<uint64_t>(space.size(), remaining));
    std::size_t count = co_await in.async_read_some(net::buffer(space.data(), want),
                                                    net::redirect_error(use_awaitable, ec));
    if (ec)
      co_return until_close&& ec == net::error::eof ? relay_failure::none : relay_failure::input;
    watchdog.progress();
    co_await net::async_write(out, net::buffer(space.data(), count),
                              net::redirect_error(use_awaitable, ec));
    if (ec)
      co_return relay_failure::output;
    watchdog.progress();
    remaining -= count;
  }
  co_return relay_failure::none;
}

/// Relays a message whose body is not chunked: the header and the body bytes
/// already read go out in one write; the rest is copied with plain large
/// reads and writes (no parser, no serializer, no per-operation timers).
template <bool is_request, class In, class Out>
awaitable<relay_failure> relay_delimited(const connection& conn, In& in,
                                         beast::flat_buffer& in_buffer,
                                         const http::parser<is_request, http::buffer_body>& parser,
                                         Out& out, std::vector<char>& space) {
  const body_framing framing = framing_of(parser);
  uint64_t remaining = framing.until_close ? std::numeric_limits<uint64_t>::max() : framing.length;
  std::string head = serialized_header(parser.get());
  auto take = static_cast<std::size_t>(std::min<uint64_t>(in_buffer.size(), remaining));
  head.append(static_cast<const char*>(in_buffer.data().data()), take);
  in_buffer.consume(take);
  remaining -= take;
  beast::error_code ec;
  beast::get_lowest_layer(out).expires_after(milliseconds(conn.state.options.idle_timeout_ms));
  co_await net::async_write(out, net::buffer(head), net::redirect_error(use_awaitable, ec));
  if (ec)
    co_return relay_failure::output;
  if (remaining == 0)
    co_return relay_failure::none;
  beast::get_lowest_layer(in).expires_never(); // the copy's watchdog takes over
  beast::get_lowest_layer(out).expires_never();
  const bool until_close = framing.until_close;
  co_return co_await copy_body(conn, in, out, until_close, remaining, space);
}

/// Beast's buffer_body relay for chunked bodies: writes the parsed header to
/// `out`, then moves the body chunk by chunk as it arrives from `in`.
template <bool is_request, class In, class Out>
awaitable<relay_failure> relay_chunked(const connection& conn, In& in,
                                       beast::flat_buffer& in_buffer,
                                       http::parser<is_request, http::buffer_body>& parser,
                                       Out& out, std::vector<char>& space) {
  auto idle = milliseconds(conn.state.options.idle_timeout_ms);
  space.resize(std::max<std::size_t>(conn.state.options.relay_chunk_bytes, 1));
  auto& chunk = space;
  http::serializer<is_request, http::buffer_body> serializer{parser.get()};
  beast::error_code ec;
  beast::get_lowest_layer(out).expires_after(idle);
  co_await http::async_write_header(out, serializer, net::redirect_error(use_awaitable, ec));
  if (ec)
    co_return relay_failure::output;
  do {
    auto& body = parser.get().body();
    if (!parser.is_done()) {
      body.data = chunk.data();
      body.size = chunk.size();
      beast::get_lowest_layer(in).expires_after(idle);
      co_await http::async_read(in, in_buffer, parser, net::redirect_error(use_awaitable, ec));
      if (ec == http::error::need_buffer)
        ec = {};
      if (ec)
        co_return relay_failure::input;
      body.size = chunk.size() - body.size;
      body.data = chunk.data();
      body.more = !parser.is_done();
    } else {
      body.data = nullptr;
      body.size = 0;
      body.more = false;
    }
    beast::get_lowest_layer(out).expires_after(idle);
    co_await http::async_write(out, serializer, net::redirect_error(use_awaitable, ec));
    if (ec == http::error::need_buffer)
      ec = {};
    if (ec)
      co_return relay_failure::output;
  } while (!parser.is_done() && !serializer.is_done());
  co_return relay_failure::none;
}

/// Writes a parsed message's header to `out` and relays its body from `in`.
template <bool is_request, class In, class Out>
awaitable<relay_failure> relay_message(const connection& conn, In& in,
                                       beast::flat_buffer& in_buffer,
                                       http::parser<is_request, http::buffer_body>& parser,
                                       Out& out, std::vector<char>& space) {
  if (framing_of(parser).chunked)
    co_return co_await relay_chunked(conn, in, in_buffer, parser, out, space);
  co_return co_await relay_delimited(conn, in, in_buffer, parser, out, space);
}

} // namespace airlock::worker::egress
