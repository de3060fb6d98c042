#pragma once
// The routing table of airlock's HTTP listeners: method + path pattern -> handler.
// Synchronous handlers are plain functions of the request; asynchronous ones
// get an `exchange` and answer later from any thread. The table is tested
// without a socket; the server adds the connection headers afterwards.

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/verb.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace airlock::gateway {

namespace http = boost::beast::http;

using http_request = http::request<http::string_body>;
using http_response = http::response<http::string_body>;

class exchange;

/// Answers one request. Runs on an I/O thread: it must not block (hand slow
/// work to an actor and register the route with add_async instead).
using route_handler = std::function<http_response(const http_request&)>;

/// Starts answering one request; the answer may come later from any thread
/// through the exchange (see exchange.hpp). Runs on an I/O thread: it must not
/// block.
using async_route_handler = std::function<void(std::shared_ptr<exchange>)>;

/// Per-route settings.
struct route_options {
  /// Largest request body for this route; larger bodies get 413 before the body is read.
  /// 0: the server's body_bytes_max. Default: 0.
  uint64_t body_bytes_max = 0;
  /// The handler (an asynchronous one) reads the body itself, a chunk at a
  /// time, with exchange::read_body_chunk; the server reads from the socket
  /// only when asked, so a client sends no faster than the handler consumes
  /// and the body is never held whole. body_bytes_max still applies.
  /// Default: false (the body is read whole before the handler runs).
  bool stream_body = false;
};

/// A JSON answer with `status` and Content-Type application/json.
http_response json_response(http::status status, const nlohmann::json& body);

/// The API's error shape: {"error": {"code": CODE, "message": MESSAGE}}.
http_response json_error(http::status status, std::string_view code, std::string_view message);

/// The target without its query string ("/v1/x?y=1" -> "/v1/x").
std::string_view path_of(std::string_view target);

/// Decodes %XX escapes (and '+' as a space when `plus_is_space`); a malformed
/// escape is kept as it is.
std::string percent_decode(std::string_view text, bool plus_is_space);

/// RFC 3986 percent-encoding of all but the unreserved characters (and '/'
/// when `keep_slash`, for a path in a query value).
std::string percent_encode(std::string_view text, bool keep_slash = false);

/// The query parameters of `target` in order, names and values decoded
/// ('+' is a space); a parameter without '=' has the value "".
std::vector<std::pair<std::string, std::string>> parse_query(std::string_view target);

/// One registered route.
struct route_entry {
  http::verb method = http::verb::get;
  std::string pattern; ///< e.g. "/v1/sandboxes/{id}"
  /// The pattern split on '/'; a `{name}` segment is stored as its name with `param` set.
  struct segment {
    std::string text;
    bool param = false;
  };
  std::vector<segment> segments;
  route_handler handler;             ///< set for add()
  async_route_handler async_handler; ///< set for add_async()
  route_options options;
};

/// The outcome of looking a request up in the table.
struct route_match {
  enum class outcome { found, not_found, method_not_allowed };
  outcome result = outcome::not_found;
  const route_entry* route = nullptr; ///< when found; owned by the table
  /// Decoded `{name}` segments of the matched pattern, in pattern order.
  std::vector<std::pair<std::string, std::string>> params;
  /// For method_not_allowed: the methods the path accepts ("GET, POST").
  std::string allow;
};

/// Routes by method and path pattern. Not thread-safe to modify; built once
/// before the server starts and only read afterwards (then any thread may
/// look up routes).
class route_table {
public:
  /// Registers a synchronous `handler` for `method` on `path` (no query
  /// string; it may contain `{name}` segments like add_async). A second
  /// registration of the same pair replaces the first.
  void add(http::verb method, std::string path, route_handler handler);

  /// Registers an asynchronous handler. `pattern` is a path whose segments may be `{name}`
  /// (one whole segment each), e.g. "/v1/sandboxes/{id}/processes/{pid}". Exact segments
  /// win over `{name}` segments when both match (compared from the left). A second
  /// registration of the same (method, pattern) replaces the first.
  void add_async(http::verb method, std::string pattern, async_route_handler handler,
                 route_options options = {});

  /// Every registered (method, pattern), for the OpenAPI check, in registration order.
  std::vector<std::pair<http::verb, std::string>> routes() const;

  /// Looks up `path` (no query string). Among the patterns that match the
  /// path, the one with the method wins by precedence; when none has the
  /// method, method_not_allowed lists the methods of all matching patterns.
  route_match match(http::verb method, std::string_view path) const;

  /// Answers `request` with a synchronous route, without a server: the
  /// handler's answer, 404 `not_found`, 405 `method_not_allowed` (with an
  /// Allow header), or 500 `internal` for an asynchronous route. Exceptions
  /// from the handler propagate.
  http_response dispatch(const http_request& request) const;

private:
  void insert(route_entry entry);
  std::vector<route_entry> routes_;
};

/// 404 `not_found` naming the method and path.
http_response route_not_found(std::string_view method, std::string_view path);

/// 405 `method_not_allowed` with an Allow header.
http_response route_method_not_allowed(std::string_view method, std::string_view path,
                                       const std::string& allow);

} // namespace airlock::gateway
