#include "gateway/api_common.hpp"

namespace airlock::gateway::detail {

std::optional<std::string> header_bearer_of(const exchange& ex) {
  auto field = ex.request()[http::field::authorization];
  std::string_view header(field.data(), field.size());
  constexpr std::string_view scheme = "Bearer ";
  if (header.size() > scheme.size() && header.substr(0, scheme.size()) == scheme)
    return std::string(header.substr(scheme.size()));
  return std::nullopt;
}

std::optional<std::string> bearer_of(const exchange& ex) {
  if (auto header = header_bearer_of(ex))
    return header;
  if (auto token = ex.query("token"); token && !token->empty())
    return token;
  return std::nullopt;
}

http_response missing_credentials() {
  return json_error(http::status::unauthorized, "unauthenticated",
                    "send Authorization: Bearer <API key> (see the admin key printed by the "
                    "first `airlockd serve`)");
}

void authenticate(caf::actor_system& system, const actors::api_key_actor& api_keys,
                  std::chrono::milliseconds timeout, exchange_ptr ex,
                  std::function<void(actors::caller_identity)> next) {
  // A URL ends up in proxy logs, browser history and Referer headers: fine
  // for a short-lived token scoped to one sandbox, not for an API key.
  auto key = header_bearer_of(*ex);
  if (!key && ex->query("token"))
    return ex->respond(json_error(http::status::unauthorized, "unauthenticated",
                                  "API keys are accepted only in the Authorization header: send "
                                  "Authorization: Bearer <API key> (?token= takes only "
                                  "data-plane tokens, from POST /v1/sandboxes/{id}/token)"));
  if (!key)
    return ex->respond(missing_credentials());
  call_actor(
    system, api_keys, timeout,
    [next = std::move(next)](actors::caller_identity& who) { next(std::move(who)); },
    answer_error(ex), actors::key_auth_atom::value, *key);
}

result<size_t> list_limit(const exchange& ex, size_t max) {
  auto limit = ex.query_uint("limit", max);
  if (!limit)
    return limit.error();
  if (*limit && **limit == 0)
    return make_status(errc::invalid_argument, "?limit= must be 1.." + std::to_string(max));
  return static_cast<size_t>(limit->value_or(100));
}

} // namespace airlock::gateway::detail
