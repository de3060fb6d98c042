// The upstream test server's coroutines (egress_test_upstream.hpp): in one
// translation unit, since their instantiations are the slowest code to compile.

#include "tests/egress/egress_test_upstream.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace airlock::worker::egress::test_doubles {

struct upstream_server::impl {
  explicit impl(net::ssl::context* tls) : tls_(tls) {
    net::ip::tcp::endpoint endpoint{net::ip::make_address_v4("127.0.0.1"), 0};
    acceptor_.open(endpoint.protocol());
    acceptor_.bind(endpoint);
    acceptor_.listen();
    port_ = acceptor_.local_endpoint().port();
    net::co_spawn(io_, accept_loop(), net::detached);
    thread_ = std::thread([this] { io_.run(); });
  }
  ~impl() {
    io_.stop();
    thread_.join();
  }
  uint16_t port() const { return port_; }
  int connections() const { return connections_; }
  /// Bytes that reached a rogue switch's echo after its 101.
  uint64_t echoed_after_switch() const { return echoed_; }
  std::vector<seen_request> requests() const {
    std::lock_guard lock{mutex_};
    return requests_;
  }

  net::awaitable<void> accept_loop() {
    for (;;) {
      auto socket = co_await acceptor_.async_accept(net::use_awaitable);
      ++connections_;
      if (tls_) {
        beast::ssl_stream<beast::tcp_stream> stream{beast::tcp_stream{std::move(socket)}, *tls_};
        net::co_spawn(io_, tls_session(std::move(stream)), net::detached);
      } else {
        net::co_spawn(io_, plain_session(beast::tcp_stream{std::move(socket)}), net::detached);
      }
    }
  }

  net::awaitable<void> tls_session(beast::ssl_stream<beast::tcp_stream> stream) {
    beast::error_code ec;
    co_await stream.async_handshake(net::ssl::stream_base::server,
                                    net::redirect_error(net::use_awaitable, ec));
    if (!ec)
      co_await session(stream);
  }

  // Sessions take their stream by reference: GCC 12 miscompiles some
  // by-value arguments inside co_await expressions.
  net::awaitable<void> plain_session(beast::tcp_stream stream) { co_await session(stream); }

  void remember(const http::request<http::string_body>& request) {
    seen_request seen;
    seen.host = std::string{request[http::field::host]};
    seen.target = std::string{request.target()};
    for (const auto& field : request) {
      std::string name{field.name_string()};
      for (auto& c : name)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      seen.headers[name] = std::string{field.value()};
    }
    seen.body = request.body();
    std::lock_guard lock{mutex_};
    requests_.push_back(std::move(seen));
  }

  template <class Stream>
  net::awaitable<void> session(Stream& stream) {
    beast::flat_buffer buffer;
    for (;;) {
      http::request<http::string_body> request;
      beast::error_code ec;
      co_await http::async_read(stream, buffer, request,
                                net::redirect_error(net::use_awaitable, ec));
      if (ec)
        co_return;
      remember(request);
      if (request.target() == "/switch" || request.target() == "/bad-accept") {
        co_await rogue_switch(stream, buffer, request.target() == "/switch" ? "h2c" : "websocket");
        co_return;
      }
      if (beast::websocket::is_upgrade(request)) {
        co_await echo_websocket(stream, request);
        co_return;
      }
      const std::string target{request.target()};
      if (auto size = size_after(target, "/chunked/")) {
        co_await send_chunked(stream, *size);
        if (!request.keep_alive())
          co_return;
        continue;
      }
      if (auto size = size_after(target, "/until-close/")) {
        co_await send_until_close(stream, *size);
        co_return;
      }
      if (auto size = size_after(target, "/stall/")) {
        co_await send_stalled(stream, *size);
        co_return;
      }
      http::response<http::string_body> response{http::status::ok, request.version()};
      response.set(http::field::content_type, "text/plain");
      if (auto size = size_after(target, "/bytes/")) {
        response.body() = pattern_bytes(*size);
      } else {
        response.body() = "hello from " + std::string{request[http::field::host]} + " " + target
                          + " body=" + request.body();
      }
      response.keep_alive(request.keep_alive());
      response.prepare_payload();
      co_await http::async_write(stream, response, net::redirect_error(net::use_awaitable, ec));
      if (ec || !request.keep_alive())
        co_return;
    }
  }

  // Coroutines below pass named objects to co_await expressions: GCC 12
  // destroys some temporaries there twice.
  template <class Stream>
  net::awaitable<void> send_chunked(Stream& stream, std::size_t size) {
    http::response<http::empty_body> response{http::status::ok, 11};
    response.chunked(true);
    http::response_serializer<http::empty_body> serializer{response};
    beast::error_code ec;
    co_await http::async_write_header(stream, serializer,
                                      net::redirect_error(net::use_awaitable, ec));
    const std::string body = pattern_bytes(size);
    constexpr std::size_t chunk_bytes = 50000;
    for (std::size_t at = 0; at < size && !ec; at += chunk_bytes) {
      auto piece = net::buffer(body.data() + at, std::min(chunk_bytes, size - at));
      auto chunk = http::make_chunk(piece);
      co_await net::async_write(stream, chunk, net::redirect_error(net::use_awaitable, ec));
    }
    auto last = http::make_chunk_last();
    if (!ec)
      co_await net::async_write(stream, last, net::redirect_error(net::use_awaitable, ec));
  }

  template <class Stream>
  net::awaitable<void> send_until_close(Stream& stream, std::size_t size) {
    http::response<http::string_body> response{http::status::ok, 11};
    response.body() = pattern_bytes(size); // no prepare_payload(): no length
    beast::error_code ec;
    co_await http::async_write(stream, response, net::redirect_error(net::use_awaitable, ec));
    if (!ec)
      co_await end_stream(stream);
  }

  template <class Stream>
  net::awaitable<void> send_stalled(Stream& stream, std::size_t size) {
    std::string partial = "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(size) + "\r\n\r\n"
                          + pattern_bytes(size / 2);
    beast::error_code ec;
    co_await net::async_write(stream, net::buffer(partial),
                              net::redirect_error(net::use_awaitable, ec));
    char byte = 0;
    auto one = net::buffer(&byte, 1);
    while (!ec)
      co_await stream.async_read_some(one, net::redirect_error(net::use_awaitable, ec));
  }

  net::awaitable<void> end_stream(beast::tcp_stream& stream) {
    beast::error_code ignored;
    stream.socket().shutdown(net::ip::tcp::socket::shutdown_send, ignored);
    co_return;
  }
  net::awaitable<void> end_stream(beast::ssl_stream<beast::tcp_stream>& stream) {
    beast::error_code ignored;
    co_await stream.async_shutdown(net::redirect_error(net::use_awaitable, ignored));
  }

  template <class Stream>
  net::awaitable<void> rogue_switch(Stream& stream, beast::flat_buffer& buffer,
                                    const std::string& protocol) {
    std::string head =
      "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + protocol
      + "\r\nSec-WebSocket-Accept: AAAAAAAAAAAAAAAAAAAAAAAAAAA=\r\n\r\n";
    beast::error_code ec;
    co_await net::async_write(stream, net::buffer(head),
                              net::redirect_error(net::use_awaitable, ec));
    if (buffer.size() > 0 && !ec) {
      echoed_ += buffer.size();
      co_await net::async_write(stream, buffer.data(), net::redirect_error(net::use_awaitable, ec));
    }
    char bytes[4096];
    while (!ec) {
      auto count = co_await stream.async_read_some(net::buffer(bytes),
                                                   net::redirect_error(net::use_awaitable, ec));
      if (ec)
        break;
      echoed_ += count;
      co_await net::async_write(stream, net::buffer(bytes, count),
                                net::redirect_error(net::use_awaitable, ec));
    }
  }

  template <class Stream>
  net::awaitable<void> echo_websocket(Stream& stream,
                                      const http::request<http::string_body>& request) {
    beast::websocket::stream<Stream&> ws{stream};
    beast::error_code ec;
    co_await ws.async_accept(request, net::redirect_error(net::use_awaitable, ec));
    for (beast::flat_buffer message; !ec; message.clear()) {
      co_await ws.async_read(message, net::redirect_error(net::use_awaitable, ec));
      if (ec)
        break;
      ws.text(ws.got_text());
      co_await ws.async_write(message.data(), net::redirect_error(net::use_awaitable, ec));
    }
  }

  net::ssl::context* tls_;
  net::io_context io_;
  net::ip::tcp::acceptor acceptor_{io_};
  uint16_t port_ = 0;
  std::atomic<int> connections_{0};
  std::atomic<uint64_t> echoed_{0};
  mutable std::mutex mutex_;
  std::vector<seen_request> requests_;
  std::thread thread_;
};

upstream_server::upstream_server(net::ssl::context* tls) : impl_(std::make_unique<impl>(tls)) {}
upstream_server::~upstream_server() = default;
uint16_t upstream_server::port() const { return impl_->port(); }
int upstream_server::connections() const { return impl_->connections(); }
uint64_t upstream_server::echoed_after_switch() const { return impl_->echoed_after_switch(); }
std::vector<seen_request> upstream_server::requests() const { return impl_->requests(); }

} // namespace airlock::worker::egress::test_doubles
