#include "airlockd/http_call.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>

#include "gateway/endpoint.hpp"

namespace airlock::airlockd {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;

result<http_answer> http_call(std::string_view base_url, std::string_view method,
                              std::string_view target, std::string_view body,
                              std::string_view bearer, std::chrono::milliseconds timeout) {
  constexpr std::string_view scheme = "http://";
  if (base_url.substr(0, scheme.size()) != scheme)
    return make_status(errc::invalid_argument,
                       "expected an http://HOST:PORT URL, got '" + std::string(base_url) + "'");
  auto where = gateway::parse_endpoint(base_url.substr(scheme.size()));
  if (!where)
    return where.error();
  const http::verb verb = http::string_to_verb(beast::string_view(method.data(), method.size()));
  if (verb == http::verb::unknown)
    return make_status(errc::invalid_argument, "unknown HTTP method " + std::string(method));
  const std::string url(base_url);
  try {
    net::io_context io;
    net::ip::tcp::resolver resolver(io);
    beast::tcp_stream stream(io);
    stream.expires_after(timeout);
    auto addresses = resolver.resolve(where->host, std::to_string(where->port));
    stream.connect(addresses);
    http::request<http::string_body> request{verb, beast::string_view(target.data(), target.size()),
                                             11};
    request.set(http::field::host, where->host);
    request.set(http::field::user_agent, "airlockd");
    if (!bearer.empty())
      request.set(http::field::authorization, "Bearer " + std::string(bearer));
    if (!body.empty()) {
      request.set(http::field::content_type, "application/json");
      request.body() = std::string(body);
    }
    request.prepare_payload();
    http::write(stream, request);
    beast::flat_buffer buffer;
    http::response_parser<http::string_body> parser;
    parser.body_limit(http_answer_bytes_max);
    http::read(stream, buffer, parser);
    beast::error_code ignored;
    stream.socket().shutdown(net::ip::tcp::socket::shutdown_both, ignored);
    return http_answer{parser.get().result_int(), std::move(parser.get().body())};
  } catch (const boost::system::system_error& e) {
    return make_status(errc::unavailable,
                       "cannot reach " + url + std::string(target) + ": " + e.code().message());
  }
}

} // namespace airlock::airlockd
