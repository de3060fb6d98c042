#pragma once
// Internal to gateway/: what the control and data-plane route files share
// (bearer credentials, authentication through the API-key actor, answering an
// exchange from an actor error, query parsing).

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "actors/api_key_actor.hpp"
#include "actors/errors.hpp"
#include "actors/sandbox_registry.hpp"
#include "gateway/actor_call.hpp"
#include "gateway/api_json.hpp"
#include "gateway/exchange.hpp"

namespace airlock::gateway::detail {

using exchange_ptr = std::shared_ptr<exchange>;

/// The credential of `Authorization: Bearer X` only: where API keys go.
std::optional<std::string> header_bearer_of(const exchange& ex);

/// The credential of `Authorization: Bearer X`, else of `?token=X`: where
/// data-plane tokens may go (SSE clients cannot set headers).
std::optional<std::string> bearer_of(const exchange& ex);

/// An error handler (for call_actor) that answers `ex` with the error.
inline auto answer_error(exchange_ptr ex) {
  return [ex](caf::error& error) { ex->respond(error_response(to_status(error))); };
}

/// Answers 401 when there is no credential at all.
http_response missing_credentials();

/// Resolves the API key of `ex` to its caller, then runs `next` (on a CAF
/// thread); answers 401 itself when the key is missing or wrong.
void authenticate(caf::actor_system& system, const actors::api_key_actor& api_keys,
                  std::chrono::milliseconds timeout, exchange_ptr ex,
                  std::function<void(actors::caller_identity)> next);

/// ?limit= within 1..max (default 100); invalid_argument otherwise.
result<size_t> list_limit(const exchange& ex, size_t max);

} // namespace airlock::gateway::detail
