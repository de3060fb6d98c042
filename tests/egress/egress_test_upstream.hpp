#pragma once
// Test doubles for the egress proxy tests: "the internet" as an HTTP and an
// HTTPS server on loopback that record what reached them (headers included)
// and echo WebSocket messages; an audit sink and a credential source that
// record and answer from memory.

#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>

#include "worker/egress/egress_types.hpp"

namespace airlock::worker::egress::test_doubles {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

struct seen_request {
  std::string host;
  std::string target;
  std::map<std::string, std::string> headers; ///< lowercase names
  std::string body;
};

/// An HTTP/1.1 server (TLS when given a context) on 127.0.0.1, port 0.
class upstream_server {
public:
  explicit upstream_server(net::ssl::context* tls = nullptr) : tls_(tls) {
    net::ip::tcp::endpoint endpoint{net::ip::make_address_v4("127.0.0.1"), 0};
    acceptor_.open(endpoint.protocol());
    acceptor_.bind(endpoint);
    acceptor_.listen();
    port_ = acceptor_.local_endpoint().port();
    net::co_spawn(io_, accept_loop(), net::detached);
    thread_ = std::thread([this] { io_.run(); });
  }
  ~upstream_server() {
    io_.stop();
    thread_.join();
  }
  uint16_t port() const { return port_; }
  int connections() const { return connections_; }
  std::vector<seen_request> requests() const {
    std::lock_guard lock{mutex_};
    return requests_;
  }

private:
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
    co_await stream.async_handshake(net::ssl::stream_base::server, net::redirect_error(net::use_awaitable, ec));
    if (!ec) co_await session(stream);
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
      for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
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
      co_await http::async_read(stream, buffer, request, net::redirect_error(net::use_awaitable, ec));
      if (ec) co_return;
      remember(request);
      if (beast::websocket::is_upgrade(request)) {
        co_await echo_websocket(stream, request);
        co_return;
      }
      http::response<http::string_body> response{http::status::ok, request.version()};
      response.set(http::field::content_type, "text/plain");
      response.body() = "hello from " + std::string{request[http::field::host]} + " " +
                        std::string{request.target()} + " body=" + request.body();
      response.keep_alive(request.keep_alive());
      response.prepare_payload();
      co_await http::async_write(stream, response, net::redirect_error(net::use_awaitable, ec));
      if (ec || !request.keep_alive()) co_return;
    }
  }

  template <class Stream>
  net::awaitable<void> echo_websocket(Stream& stream, const http::request<http::string_body>& request) {
    beast::websocket::stream<Stream&> ws{stream};
    beast::error_code ec;
    co_await ws.async_accept(request, net::redirect_error(net::use_awaitable, ec));
    for (beast::flat_buffer message; !ec; message.clear()) {
      co_await ws.async_read(message, net::redirect_error(net::use_awaitable, ec));
      if (ec) break;
      ws.text(ws.got_text());
      co_await ws.async_write(message.data(), net::redirect_error(net::use_awaitable, ec));
    }
  }

  net::ssl::context* tls_;
  net::io_context io_;
  net::ip::tcp::acceptor acceptor_{io_};
  uint16_t port_ = 0;
  std::atomic<int> connections_{0};
  mutable std::mutex mutex_;
  std::vector<seen_request> requests_;
  std::thread thread_;
};

class recording_audit : public audit_sink {
public:
  void record(schema::audit_record record) override {
    std::lock_guard lock{mutex_};
    records_.push_back(std::move(record));
  }
  std::vector<schema::audit_record> records() const {
    std::lock_guard lock{mutex_};
    return records_;
  }

private:
  mutable std::mutex mutex_;
  std::vector<schema::audit_record> records_;
};

/// Answers fetch() from a settable list (or failure), counting calls.
class fixed_credentials : public credential_source {
public:
  void set(result<grants> answer) {
    std::lock_guard lock{mutex_};
    answer_ = std::move(answer);
  }
  void fetch(const sandbox_view&, std::function<void(result<grants>)> done) override {
    ++fetches;
    result<grants> answer = grants{};
    {
      std::lock_guard lock{mutex_};
      answer = answer_;
    }
    // From another thread, as the cluster link would.
    std::thread([done = std::move(done), answer = std::move(answer)]() mutable { done(std::move(answer)); })
        .detach();
  }
  std::atomic<int> fetches{0};

private:
  std::mutex mutex_;
  result<grants> answer_ = grants{};
};

} // namespace airlock::worker::egress::test_doubles
