#pragma once
// Calls one of airlock's own routes in-process, without a socket: a
// compatibility front (the E2B REST surface) translates its request into
// /v1 calls and maps their answers back, so that every call it makes is one
// of the API's own, with the same checks, operations and audit.

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "gateway/router.hpp"

namespace airlock::gateway {

/// Gets the route's answer; runs on whatever thread answered (an actor's
/// continuation, or the caller's for a synchronous route).
using internal_answer = std::function<void(http_response)>;

/// Sends `method target` (target may carry a query string) with `body` (JSON,
/// or empty) and `api_key` as the bearer token through `routes`, and calls
/// `then` with the answer: 404/405 like the server when no route matches.
/// Routes that stream (SSE, byte bodies, streamed request bodies) are not
/// for this: they answer 500 internal.
void call_route(const route_table& routes, http::verb method, std::string target, std::string body,
                std::string_view api_key, internal_answer then);

} // namespace airlock::gateway
