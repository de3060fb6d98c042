#pragma once
// Calls one of airlock's own routes in-process, without a socket: a
// compatibility front (the E2B REST surface) translates its request into
// /v1 calls and maps their answers back, so that every call it makes is one
// of the API's own, with the same checks, operations and audit.

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gateway/router.hpp"

namespace airlock::gateway {

/// Gets the route's answer; runs on whatever thread answered (an actor's
/// continuation, or the caller's for a synchronous route).
using internal_answer = std::function<void(http_response)>;

/// Sends `method target` (target may carry a query string) with `body` (JSON,
/// or empty) and `api_key` as the bearer token through `routes`, and calls
/// `then` with the answer: 404/405 like the server when no route matches.
/// A route that reads its body in chunks gets them from `body`; routes that
/// answer with a stream are for call_stream_route (here: 500 internal).
/// The message of a /v1 error answer ({"error": {"code", "message"}}), or
/// "airlock answered <status>" when its body holds none.
std::string error_message_of(const http_response& answer);

void call_route(const route_table& routes, http::verb method, std::string target, std::string body,
                std::string_view api_key, internal_answer then);

/// One server-sent event of a streaming route.
struct internal_event {
  std::string event;
  std::string data;
  std::string id;
};

/// What a streaming internal call reports. Each runs on whatever thread
/// produced it; `answered` or `ended` comes once, last.
struct internal_stream_handlers {
  /// The route answered without a stream (an error, say).
  std::function<void(http_response)> answered;
  /// One event, in order.
  std::function<void(internal_event)> event;
  /// A byte body instead (a file download): its head, then its bytes in order.
  std::function<void(http_response head)> head;
  std::function<void(std::string bytes)> bytes;
  /// The stream ended: "closed" (the route finished it), "client_gone"
  /// (stopped), "slow_consumer".
  std::function<void(std::string_view reason)> ended;
  /// Called after each batch of events with `resume`: the route's stream
  /// stays full (and its producer paced) until `resume` runs. Absent: at once.
  std::function<void(std::function<void()> resume)> pace;
};

/// A streaming internal call in flight.
class internal_stream {
public:
  virtual ~internal_stream() = default;
  /// Ends the stream as if its client had gone; `ended` follows.
  virtual void stop() = 0;
};

/// Like call_route, for a route that answers with server-sent events (a
/// process's output) or a byte body (a file): they come to `handlers` as the
/// route sends them. A route that answers whole goes to `answered`.
/// `headers` go with the request (Last-Event-ID, say).
std::shared_ptr<internal_stream>
call_stream_route(const route_table& routes, http::verb method, std::string target,
                  std::string_view api_key, internal_stream_handlers handlers,
                  const std::vector<std::pair<std::string, std::string>>& headers = {});

} // namespace airlock::gateway
