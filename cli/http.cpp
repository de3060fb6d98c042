#include "cli/http.hpp"

#include <array>
#include <chrono>
#include <limits>
#include <optional>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

namespace airlock::cli {

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

/// Bytes read per step of a streamed body.
constexpr size_t read_chunk_bytes = 64 * 1024;

/// The synchronous steps of one exchange, each run as an asynchronous Asio
/// operation to completion so that tcp_stream's timeouts apply (they do not
/// apply to Beast's synchronous calls).
class exchange {
public:
  exchange(const url_parts& url, const http_client_options& options)
      : url_(url), options_(options) {}

  status connect();
  /// https: the handshake, checking the certificate against options.ca_pem
  /// (or the system's store) and the URL's host.
  status start_tls();
  status write(const http_request& request);
  status read_header();
  int status_code() const { return parser_.get().result_int(); }
  std::string content_type() const { return std::string(parser_.get()[http::field::content_type]); }
  /// The next piece of the body; empty once the body is complete.
  result<std::string> read_some();

private:
  /// Runs `step` with the stream in use: TLS over TCP, or TCP.
  template <class Step>
  auto with_stream(Step step) {
    if (tls_)
      return step(*tls_);
    return step(stream_);
  }

  template <class Start>
  beast::error_code run(Start start) {
    beast::error_code outcome = asio::error::would_block;
    start([&outcome](beast::error_code ec, auto&&...) { outcome = ec; });
    io_.restart();
    io_.run();
    return outcome;
  }

  status failed(std::string_view step, const beast::error_code& ec) const;

  url_parts url_;
  http_client_options options_;
  asio::io_context io_;
  beast::tcp_stream stream_{io_};
  std::optional<asio::ssl::context> tls_context_;
  std::optional<asio::ssl::stream<beast::tcp_stream&>> tls_;
  beast::flat_buffer buffer_;
  http::response_parser<http::buffer_body> parser_;
};

std::string where(const url_parts& url) { return url.scheme + "://" + url.host + ":" + url.port; }

status exchange::failed(std::string_view step, const beast::error_code& ec) const {
  if (ec == beast::error::timeout)
    return make_status(errc::timeout, std::string(step) + " " + where(url_) + " timed out");
  return make_status(errc::unavailable,
                     std::string(step) + " " + where(url_) + " failed: " + ec.message());
}

status exchange::connect() {
  tcp::resolver resolver(io_);
  beast::error_code ec;
  auto endpoints = resolver.resolve(url_.host, url_.port, ec);
  if (ec)
    return failed("resolving", ec);
  stream_.expires_after(std::chrono::milliseconds(options_.connect_timeout_ms));
  ec = run([this, &endpoints](auto handler) { stream_.async_connect(endpoints, handler); });
  if (ec)
    return failed("connecting to", ec);
  return url_.scheme == "https" ? start_tls() : status::ok();
}

status exchange::start_tls() {
  auto untrusted = [this](const std::string& why) {
    return make_status(errc::unavailable, "TLS with " + where(url_) + " failed: " + why);
  };
  beast::error_code ec;
  tls_context_.emplace(asio::ssl::context::tls_client);
  tls_context_->set_options(asio::ssl::context::no_sslv2 | asio::ssl::context::no_sslv3
                              | asio::ssl::context::no_tlsv1 | asio::ssl::context::no_tlsv1_1,
                            ec);
  if (options_.ca_pem.empty())
    tls_context_->set_default_verify_paths(ec);
  else
    tls_context_->add_certificate_authority(asio::buffer(options_.ca_pem), ec);
  if (ec)
    return untrusted("cannot use the trusted certificates: " + ec.message());
  tls_context_->set_verify_mode(asio::ssl::verify_peer);
  tls_.emplace(stream_, *tls_context_);
  SSL* ssl = tls_->native_handle();
  // The certificate must name the host of the URL: an IP address as an IP
  // SAN, a name as a DNS SAN (and SNI).
  beast::error_code not_ip;
  asio::ip::make_address(url_.host, not_ip);
  if (!not_ip) {
    if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), url_.host.c_str()) != 1)
      return untrusted("bad IP address " + url_.host);
  } else if (SSL_set1_host(ssl, url_.host.c_str()) != 1
             || SSL_set_tlsext_host_name(ssl, url_.host.c_str()) != 1) {
    return untrusted("bad host name " + url_.host);
  }
  stream_.expires_after(std::chrono::milliseconds(options_.connect_timeout_ms));
  ec =
    run([this](auto handler) { tls_->async_handshake(asio::ssl::stream_base::client, handler); });
  if (!ec)
    return status::ok();
  if (ec == beast::error::timeout)
    return failed("the TLS handshake with", ec);
  std::string why = ec.message();
  if (long verified = SSL_get_verify_result(ssl); verified != X509_V_OK)
    why = std::string("the server's certificate is not trusted: ")
          + X509_verify_cert_error_string(verified)
          + " (give the CA that signed it: --ca-file, AIRLOCK_CA_FILE or \"ca_file\")";
  return untrusted(why);
}

status exchange::write(const http_request& request) {
  http::request<http::string_body> message{http::string_to_verb(request.method), url_.target, 11};
  message.set(http::field::host, url_.host + ":" + url_.port);
  message.set(http::field::user_agent, "airlock-cli");
  for (const auto& [name, value] : request.headers)
    message.set(name, value);
  message.body() = request.body;
  message.prepare_payload();
  stream_.expires_after(std::chrono::milliseconds(options_.io_timeout_ms));
  auto ec = run([this, &message](auto handler) {
    with_stream([&](auto& stream) { http::async_write(stream, message, handler); });
  });
  return ec ? failed("sending a request to", ec) : status::ok();
}

status exchange::read_header() {
  parser_.header_limit(options_.header_bytes_max);
  // Bounded by the caller, which sees every chunk. Not boost::none: Beast
  // 1.74 compares a Content-Length against the empty optional and fails.
  parser_.body_limit(std::numeric_limits<std::uint64_t>::max());
  stream_.expires_after(std::chrono::milliseconds(options_.io_timeout_ms));
  auto ec = run([this](auto handler) {
    with_stream([&](auto& stream) { http::async_read_header(stream, buffer_, parser_, handler); });
  });
  return ec ? failed("reading the response of", ec) : status::ok();
}

result<std::string> exchange::read_some() {
  std::array<char, read_chunk_bytes> chunk{};
  while (!parser_.is_done()) {
    parser_.get().body().data = chunk.data();
    parser_.get().body().size = chunk.size();
    stream_.expires_after(std::chrono::milliseconds(options_.io_timeout_ms));
    auto ec = run([this](auto handler) {
      with_stream([&](auto& stream) { http::async_read_some(stream, buffer_, parser_, handler); });
    });
    if (ec && ec != http::error::need_buffer)
      return failed("reading the response of", ec);
    size_t used = chunk.size() - parser_.get().body().size;
    if (used > 0)
      return std::string(chunk.data(), used);
  }
  return std::string();
}

result<http_response> stream_or_collect(const http_request& request,
                                        const http_client_options& options,
                                        const std::function<bool(std::string_view)>* on_bytes) {
  auto url = parse_url(request.url);
  if (!url)
    return url.error();
  exchange ex(*url, options);
  if (auto s = ex.connect(); !s)
    return s;
  if (auto s = ex.write(request); !s)
    return s;
  if (auto s = ex.read_header(); !s)
    return s;
  http_response response{ex.status_code(), ex.content_type(), {}};
  bool stream = on_bytes != nullptr && response.status >= 200 && response.status < 300;
  for (;;) {
    auto piece = ex.read_some();
    if (!piece)
      return piece.error();
    if (piece->empty())
      return response;
    if (stream) {
      if (!(*on_bytes)(*piece))
        return response;
      continue;
    }
    if (response.body.size() + piece->size() > options.response_bytes_max)
      return make_status(errc::too_large, "the response of " + request.url + " is larger than "
                                            + std::to_string(options.response_bytes_max)
                                            + " bytes");
    response.body += *piece;
  }
}

} // namespace

result<url_parts> parse_url(std::string_view url) {
  auto bad = [url](const std::string& why) {
    return make_status(errc::invalid_argument, "bad URL " + std::string(url) + ": " + why);
  };
  const bool tls = url.starts_with("https://");
  if (!tls && !url.starts_with("http://"))
    return bad("expected http://HOST:PORT or https://HOST:PORT");
  url_parts parts{tls ? "https" : "http", {}, tls ? "443" : "80", "/"};
  std::string_view rest = url.substr(tls ? 8 : 7);
  auto slash = rest.find_first_of("/?");
  std::string_view authority = rest.substr(0, slash);
  if (slash != std::string_view::npos)
    parts.target = std::string(rest.substr(slash));
  if (parts.target.front() == '?')
    parts.target.insert(0, "/");
  if (authority.starts_with("[")) {
    auto close = authority.find(']');
    if (close == std::string_view::npos)
      return bad("unclosed '[' in the host");
    parts.host = std::string(authority.substr(1, close - 1));
    authority.remove_prefix(close + 1);
    if (!authority.empty() && authority.front() != ':')
      return bad("expected ':' after ']'");
  } else {
    parts.host = std::string(authority.substr(0, authority.find(':')));
    authority.remove_prefix(parts.host.size());
  }
  if (!authority.empty()) {
    parts.port = std::string(authority.substr(1));
    bool digits = !parts.port.empty() && parts.port.size() <= 5
                  && parts.port.find_first_not_of("0123456789") == std::string::npos;
    if (!digits || std::stoi(parts.port) > 65535)
      return bad("the port must be a number up to 65535");
  }
  if (parts.host.empty())
    return bad("the host is missing");
  return parts;
}

std::string url_encode(std::string_view text) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    bool plain = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')
                 || c == '-' || c == '.' || c == '_' || c == '~' || c == '/';
    if (plain) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 0xf];
    }
  }
  return out;
}

result<http_response> http_send(const http_request& request, const http_client_options& options) {
  try {
    return stream_or_collect(request, options, nullptr);
  } catch (const std::exception& e) {
    return make_status(errc::unavailable,
                       "HTTP request to " + request.url + " failed: " + e.what());
  }
}

result<http_response> http_stream(const http_request& request, const http_client_options& options,
                                  const std::function<bool(std::string_view)>& on_bytes) {
  try {
    return stream_or_collect(request, options, &on_bytes);
  } catch (const std::exception& e) {
    return make_status(errc::unavailable,
                       "HTTP request to " + request.url + " failed: " + e.what());
  }
}

} // namespace airlock::cli
