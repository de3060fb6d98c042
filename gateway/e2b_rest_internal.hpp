#pragma once
// Internal to gateway/: what the E2B front's REST route files share: the
// front's settings, one request's context (its exchange, the caller's key and
// the in-process /v1 calls it makes), and E2B's shapes of errors, sandboxes
// and timestamps.

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "gateway/e2b_routes.hpp"
#include "gateway/exchange.hpp"

namespace airlock::gateway::e2b_rest {

using nlohmann::json;

struct e2b_api {
  std::shared_ptr<const route_table> inner;
  const wall_clock* clock = nullptr;
  std::shared_ptr<envd_token_book> tokens;
  e2b_options options;
};

using e2b_ptr = std::shared_ptr<const e2b_api>;
using exchange_ptr = std::shared_ptr<exchange>;

/// E2B's error shape: the SDK reads the body's numeric code, which must equal
/// the HTTP status.
http_response e2b_error(unsigned status, std::string_view message);
/// A /v1 error answer in E2B's shape, with the same status.
http_response e2b_error_of(const http_response& answer);
http_response no_content();
/// The HTTP status E2B's SDK expects for an operation that failed with `code`.
unsigned status_of_failure(const std::string& code);
/// Unix ms of the API's "YYYY-MM-DDTHH:MM:SS.mmmZ"; 0 for null or malformed.
int64_t unix_ms_of(const json& stamp);
std::string rfc3339(int64_t unix_ms);
/// airlock's states as E2B's two: a paused or suspended sandbox is E2B's
/// paused; nullopt for one that E2B would not list (creating, ended, failed).
std::optional<std::string> e2b_state(const std::string& state);
/// Running time so far, in seconds: completed stretches plus the current one.
int64_t lifetime_used_s(const e2b_api& api, const json& sandbox);
/// When E2B's timeout ends the sandbox: its lifetime's end for one created
/// to be killed, its idle deadline for one created to pause.
int64_t end_at_ms(const e2b_api& api, const json& sandbox);
/// A /v1 sandbox as E2B's Sandbox (without its envd token).
json sandbox_json(const e2b_api& api, const json& sandbox);
/// A /v1 sandbox as E2B's SandboxDetail (get and list).
json detail_json(const e2b_api& api, const json& sandbox);
/// The X-API-Key header, which E2B's SDK sends instead of a bearer token.
std::optional<std::string> api_key_of(const exchange& ex);

/// One E2B request: its exchange, the caller's key and the /v1 calls it makes.
struct e2b_call {
  e2b_ptr api;
  exchange_ptr ex;
  std::string key;

  void v1(http::verb method, std::string target, const json& body,
          std::function<void(http_response)> then) const;

  /// Calls /v1 and, on a 2xx, `then` with its JSON; else answers E2B's error.
  void v1_json(http::verb method, std::string target, const json& body,
               std::function<void(json)> then) const;

  /// The sandbox of the path as /v1 shows it; a destroyed one is E2B's 404.
  void sandbox(std::function<void(json)> then) const;

  /// Sandbox `id` as E2B's Sandbox, with a data-plane token for envd (the
  /// SDK sends it back as X-Access-Token); answers E2B's error if /v1 fails.
  void sandbox_with_token(const std::string& id, std::function<void(json)> then) const;

  /// Answers `status` with sandbox `id` as E2B's Sandbox (sandbox_with_token).
  void answer_sandbox(const std::string& id, http::status status) const;

  /// Waits (bounded) for operation `id` to end; `then` with it once it
  /// succeeded, else E2B's error with the operation's reason.
  void await_operation(const std::string& id, int64_t deadline_ms,
                       std::function<void(json)> then) const;

  /// Starts a /v1 call that answers 202 with an operation, then waits for it
  /// and gives `then` the operation's result.
  void run_operation(http::verb method, std::string target, const json& body,
                     std::function<void(json)> then) const;
};

/// Wraps a handler: the caller must send X-API-Key (checked by /v1 as a key).
template <class Handler>
async_route_handler with_key(const e2b_ptr& api, Handler handler) {
  return [api, handler](exchange_ptr ex) {
    auto key = api_key_of(*ex);
    if (!key)
      return ex->respond(e2b_error(401, "send your airlock API key in the X-API-Key header"));
    handler(e2b_call{api, ex, *key});
  };
}

/// A JSON object body (empty: {}); nullopt after answering 400.
std::optional<json> object_body(const e2b_call& call);
/// A timeout in seconds from `body` (`field`), within 1..max; nullopt after answering 400.
std::optional<uint32_t> timeout_of(const e2b_call& call, const json& body, uint32_t fallback);
/// An optional `timeout` of `body` into `out` (absent or null: none); false
/// after answering 400.
bool optional_timeout(const e2b_call& call, const json& body, std::optional<int64_t>& out);
/// Makes `sandbox` time out `timeout` seconds of running from now (its idle
/// timeout for an autoPause one); then `then`.
void time_out_in(const e2b_call& call, const json& sandbox, int64_t timeout,
                 std::function<void()> then);

/// Adds the routes of snapshots, fork and metrics (e2b_snapshot_routes.cpp).
void add_e2b_snapshot_routes(route_table& routes, const e2b_ptr& api);

} // namespace airlock::gateway::e2b_rest
