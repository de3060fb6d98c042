#pragma once
// The CLI's view of airlockd's HTTP API (API.md; docs/api.md): requests with
// the API key, JSON answers, and failures turned into one sentence with the
// server's error code and a hint about what to do next.

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "cli/config.hpp"
#include "cli/http.hpp"
#include "schema/errc.hpp"

namespace airlock::cli {

/// The failure for a non-2xx answer: errc by HTTP status, message
/// "CODE: MESSAGE (HTTP N)" from the body's {"error": {...}} (or the status
/// line when the body is not that), then a line "hint: ..." when one fits.
status api_failure(int http_status, std::string_view body);

/// A connection failure with the hint "is airlockd running at URL?".
status connection_failure(const status& failure, std::string_view url);

/// Client of the control plane at `config.url`. Stateless; each call opens
/// its own connection, so an api_client may be used from several threads.
class api_client {
public:
  api_client(connection_config config, http_client_options http)
      : config_(std::move(config)), http_(http) {}

  /// METHOD url+path with the API key and, when `body` is not null, a JSON
  /// body; the answer's JSON (null for an empty body). Failures as above;
  /// internal when a 2xx body is not JSON.
  result<nlohmann::json> call(std::string_view method, const std::string& path,
                              const nlohmann::json* body = nullptr) const;

  /// `request` with the API key added (unless it carries an Authorization
  /// header); connection failures get their hint, statuses are left to the caller.
  result<http_response> send(http_request request) const;
  /// As send(), streaming a 2xx body to `on_bytes` (see http_stream).
  result<http_response> stream(http_request request,
                               const std::function<bool(std::string_view)>& on_bytes) const;

  /// An absolute URL for `url_or_path` ("/v1/..." is joined to the base URL).
  std::string absolute(std::string_view url_or_path) const;

  const connection_config& config() const { return config_; }
  const http_client_options& http() const { return http_; }

private:
  void authorize(http_request& request) const;

  connection_config config_;
  http_client_options http_;
};

} // namespace airlock::cli
