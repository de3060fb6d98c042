#pragma once
// A small synchronous HTTP/1.1 client (Boost.Beast) for the CLI: one
// connection per request, every step bounded by a timeout, response bodies
// either bounded in memory or streamed to a callback (downloads, SSE).
// Beast and Asio exceptions stay inside http.cpp; callers get status values.

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "schema/errc.hpp"

namespace airlock::cli {

struct http_client_options {
  /// Time to resolve and connect. Default: 10000.
  uint32_t connect_timeout_ms = 10'000;
  /// Time for each later step: sending the request, the response header, and
  /// each read of the body (so a stream may last longer, as long as bytes keep
  /// coming; the server's SSE heartbeat comes every 15 s). Long enough for the
  /// API's ?wait=60. Default: 90000.
  uint32_t io_timeout_ms = 90'000;
  /// Largest response header. Default: 65536.
  uint32_t header_bytes_max = 64 * 1024;
  /// Largest body kept in memory (JSON answers, error answers). Streamed
  /// bodies are not limited. Default: 67108864 (64 MiB).
  uint64_t response_bytes_max = uint64_t{64} << 20;
  /// Whom an https server's certificate must chain to: PEM certificates
  /// (a control plane's CA, or the cluster's worker CA from GET
  /// /v1/cluster/ca for attach URLs). Empty: the system's trust store. The
  /// name or IP address of the URL must be in the certificate either way.
  std::string ca_pem;
};

/// An absolute http:// or https:// URL taken apart.
struct url_parts {
  std::string scheme; ///< "http" or "https"
  std::string host;   ///< without brackets for IPv6
  std::string port;   ///< "80" (http) or "443" (https) when absent
  std::string target; ///< path and query; "/" when empty
};

/// invalid_argument for anything but http[s]://HOST[:PORT][/PATH][?QUERY].
result<url_parts> parse_url(std::string_view url);

/// Percent-encodes everything but RFC 3986 unreserved characters and '/'.
std::string url_encode(std::string_view text);

struct http_request {
  std::string method = "GET";
  std::string url; ///< absolute
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
};

struct http_response {
  int status = 0;
  std::string content_type;
  std::string body; ///< empty when the body was streamed
};

/// Sends `request` and returns the whole response. unavailable when no
/// connection can be made or it breaks, or an https server's certificate is
/// not trusted (the message names the URL and the reason), timeout when a step takes longer than
/// its limit, too_large for a body over response_bytes_max, invalid_argument for a bad URL.
result<http_response> http_send(const http_request& request, const http_client_options& options);

/// As http_send, but a 2xx body goes to `on_bytes` chunk by chunk as it
/// arrives and is not kept; reading stops early when on_bytes returns false
/// (then the result is the response, not an error). Other statuses come back
/// whole, without calling on_bytes. A connection that breaks mid-body is
/// unavailable, after the bytes that did arrive were delivered.
result<http_response> http_stream(const http_request& request, const http_client_options& options,
                                  const std::function<bool(std::string_view)>& on_bytes);

} // namespace airlock::cli
