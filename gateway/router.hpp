#pragma once
// The routing table of airlock's HTTP listeners: method + path -> handler.
// Handlers are plain functions of the request so that the table can be tested
// without a socket; the server adds the connection headers afterwards.

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/verb.hpp>

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>

#include <nlohmann/json_fwd.hpp>

namespace airlock::gateway {

namespace http = boost::beast::http;

using http_request = http::request<http::string_body>;
using http_response = http::response<http::string_body>;

/// Answers one request. Runs on an I/O thread: it must not block (hand slow
/// work to an actor; later versions of the table gain asynchronous handlers).
using route_handler = std::function<http_response(const http_request&)>;

/// A JSON answer with `status` and Content-Type application/json.
http_response json_response(http::status status, const nlohmann::json& body);

/// The API's error shape: {"error": {"code": CODE, "message": MESSAGE}}.
http_response json_error(http::status status, std::string_view code, std::string_view message);

/// Exact-path routes. Not thread-safe to modify; built once before the server
/// starts and only read afterwards (then any thread may dispatch).
class route_table {
public:
  /// Registers `handler` for `method` on `path` (no query string). A second
  /// registration of the same pair replaces the first.
  void add(http::verb method, std::string path, route_handler handler);

  /// The handler's answer; 404 `not_found` for an unknown path, 405
  /// `method_not_allowed` (with an Allow header) for a known path and another
  /// method. Exceptions from the handler propagate: the server turns them
  /// into a logged 500.
  http_response dispatch(const http_request& request) const;

private:
  // path -> method -> handler; std::map keeps the Allow header in a stable order.
  std::map<std::string, std::map<http::verb, route_handler>, std::less<>> routes_;
};

/// The target without its query string ("/v1/x?y=1" -> "/v1/x").
std::string_view path_of(std::string_view target);

} // namespace airlock::gateway
