// Byte tunnels for WebSocket upgrades and TLS pass-through; included by
// proxy_internal.hpp (templates over the plain and TLS stream types).
#pragma once

namespace airlock::worker::egress {
namespace tunnel_detail {

inline void close_lowest(tcp_stream& stream) {
  beast::error_code ignored;
  stream.socket().close(ignored);
}
inline void close_lowest(tls_stream& stream) { close_lowest(beast::get_lowest_layer(stream)); }

/// The reading side ended cleanly: a plain socket half-closes so the peer
/// sees end of input; a TLS stream cannot half-close without close_notify
/// choreography, so it closes.
inline void end_output(tcp_stream& stream) {
  beast::error_code ignored;
  stream.socket().shutdown(net::ip::tcp::socket::shutdown_send, ignored);
}
inline void end_output(tls_stream& stream) { close_lowest(stream); }

/// Copies from -> to with plain completion handlers on the streams' strand
/// (no nested coroutines: GCC 12 miscompiled a co_spawned pump). Calls
/// `done` once, after half-closing `to` on a clean end or closing both ends
/// on an error. Holds references only: the caller keeps both streams alive
/// until `done` ran.
template <class From, class To>
class pump : public std::enable_shared_from_this<pump<From, To>> {
public:
  pump(From& from, To& to, beast::flat_buffer& pending, milliseconds idle, std::size_t chunk,
       std::function<void()> done)
      : from_(from), to_(to), pending_(pending), idle_(idle), bytes_(chunk),
        done_(std::move(done)) {}

  void start() {
    if (pending_.size() == 0)
      return read();
    beast::get_lowest_layer(to_).expires_after(idle_);
    net::async_write(to_, pending_.data(),
                     [self = this->shared_from_this()](beast::error_code ec, std::size_t) {
                       self->pending_.consume(self->pending_.size());
                       self->on_write(ec);
                     });
  }

private:
  void read() {
    beast::get_lowest_layer(from_).expires_after(idle_);
    from_.async_read_some(net::buffer(bytes_),
                          [self = this->shared_from_this()](
                            beast::error_code ec, std::size_t count) { self->on_read(ec, count); });
  }
  void on_read(beast::error_code ec, std::size_t count) {
    if (ec)
      return finish(ec == net::error::eof || ec == net::ssl::error::stream_truncated);
    beast::get_lowest_layer(to_).expires_after(idle_);
    net::async_write(to_, net::buffer(bytes_.data(), count),
                     [self = this->shared_from_this()](beast::error_code write_ec, std::size_t) {
                       self->on_write(write_ec);
                     });
  }
  void on_write(beast::error_code ec) {
    if (ec)
      return finish(false);
    read();
  }
  void finish(bool clean) {
    if (clean) {
      end_output(to_);
    } else {
      close_lowest(from_);
      close_lowest(to_);
    }
    done_();
  }

  From& from_;
  To& to_;
  beast::flat_buffer& pending_;
  milliseconds idle_;
  std::vector<char> bytes_;
  std::function<void()> done_;
};

} // namespace tunnel_detail

template <class A, class B>
awaitable<void> tunnel(A& a, B& b, beast::flat_buffer& a_pending, beast::flat_buffer& b_pending,
                       milliseconds idle, std::size_t chunk) {
  auto executor = co_await net::this_coro::executor;
  net::steady_timer both_done{executor, net::steady_timer::time_point::max()};
  int running = 2;
  // Both pumps complete on this strand; this frame outlives them because it
  // waits until both called back.
  auto finished = [&running, &both_done] {
    if (--running == 0)
      both_done.cancel();
  };
  std::make_shared<tunnel_detail::pump<A, B>>(a, b, a_pending, idle, chunk, finished)->start();
  std::make_shared<tunnel_detail::pump<B, A>>(b, a, b_pending, idle, chunk, finished)->start();
  while (running > 0) {
    beast::error_code ignored;
    co_await both_done.async_wait(net::redirect_error(use_awaitable, ignored));
  }
  tunnel_detail::close_lowest(a);
  tunnel_detail::close_lowest(b);
}

} // namespace airlock::worker::egress
