#pragma once
// api_bench: a blocking keep-alive HTTP client (Beast) for the HTTP side.

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace airlock::api_bench {

namespace beast = boost::beast;
namespace http = beast::http;
using tcp = boost::asio::ip::tcp;

struct http_answer {
  int status = 0; ///< 0: the connection failed
  std::string body;
};

/// One keep-alive connection; reconnects once when the server closed it.
/// Not thread-safe: one per client thread.
class keepalive_client {
public:
  keepalive_client(std::string host, uint16_t port, std::string bearer)
      : host_(std::move(host)), port_(port), bearer_(std::move(bearer)), socket_(io_) {}

  http_answer send(http::verb method, const std::string& target, const std::string& body = {},
                   const std::string& bearer = {}) {
    for (int attempt = 0; attempt < 2; ++attempt) {
      if (!socket_.is_open() && !connect())
        return {};
      http::request<http::string_body> request{method, target, 11};
      request.set(http::field::host, host_);
      request.set(http::field::authorization, "Bearer " + (bearer.empty() ? bearer_ : bearer));
      request.keep_alive(true);
      if (!body.empty()) {
        request.set(http::field::content_type, "application/json");
        request.body() = body;
      }
      request.prepare_payload();
      beast::error_code ec;
      http::write(socket_, request, ec);
      http::response<http::string_body> response;
      if (!ec)
        http::read(socket_, buffer_, response, ec);
      if (ec) {
        socket_.close(ec);
        continue;
      }
      if (!response.keep_alive())
        socket_.close(ec);
      return {static_cast<int>(response.result_int()), std::move(response.body())};
    }
    return {};
  }

  /// GETs an SSE stream and hands each chunk of the body to `on_bytes`
  /// until the server ends it; the connection is closed afterwards.
  bool stream(const std::string& target, const std::string& bearer,
              const std::function<void(std::string_view)>& on_bytes) {
    if (!socket_.is_open() && !connect())
      return false;
    http::request<http::empty_body> request{http::verb::get, target, 11};
    request.set(http::field::host, host_);
    request.set(http::field::authorization, "Bearer " + bearer);
    request.set(http::field::accept, "text/event-stream");
    beast::error_code ec;
    http::write(socket_, request, ec);
    http::response_parser<http::buffer_body> parser;
    parser.body_limit(std::numeric_limits<uint64_t>::max());
    if (!ec)
      http::read_header(socket_, buffer_, parser, ec);
    std::vector<char> chunk(1 << 16);
    while (!ec && !parser.is_done()) {
      parser.get().body().data = chunk.data();
      parser.get().body().size = chunk.size();
      http::read(socket_, buffer_, parser, ec);
      if (ec == http::error::need_buffer)
        ec = {};
      on_bytes({chunk.data(), chunk.size() - parser.get().body().size});
    }
    socket_.close(ec);
    return parser.is_done();
  }

private:
  bool connect() {
    beast::error_code ec;
    tcp::resolver resolver(io_);
    auto found = resolver.resolve(host_, std::to_string(port_), ec);
    if (!ec)
      boost::asio::connect(socket_, found, ec);
    if (!ec)
      socket_.set_option(tcp::no_delay(true), ec);
    buffer_.clear();
    return !ec;
  }

  std::string host_;
  uint16_t port_;
  std::string bearer_;
  boost::asio::io_context io_;
  tcp::socket socket_;
  beast::flat_buffer buffer_;
};

} // namespace airlock::api_bench
