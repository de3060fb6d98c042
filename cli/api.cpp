#include "cli/api.hpp"

namespace airlock::cli {

namespace {

errc errc_of(int http_status) {
  switch (http_status) {
    case 400:
    case 422: return errc::invalid_argument;
    case 401: return errc::unauthenticated;
    case 403: return errc::permission_denied;
    case 404: return errc::not_found;
    case 409: return errc::wrong_state;
    case 410: return errc::gone;
    case 413: return errc::too_large;
    case 429: return errc::resource_exhausted;
    case 503: return errc::unavailable;
    default: return http_status >= 500 ? errc::internal : errc::invalid_argument;
  }
}

std::string_view hint_of(int http_status) {
  switch (http_status) {
    case 401: return "check AIRLOCK_API_KEY or run airlockd serve once to create the admin key";
    case 403: return "this API key is not allowed to do that; use a key with the right role";
    case 404: return "check the id: airlock ls lists sandboxes, airlock ops operations";
    case 409: return "the current state does not allow this; see airlock get ID";
    case 410: return "the server no longer holds that data";
    case 413:
      return "the request is larger than the server accepts (see its --http-body-bytes-max)";
    case 429:
    case 503: return "the server is busy or not ready; try again shortly";
    default: return http_status >= 500 ? "see airlockd's log" : "";
  }
}

} // namespace

status api_failure(int http_status, std::string_view body) {
  std::string code = "http_" + std::to_string(http_status);
  std::string message = "the server answered HTTP " + std::to_string(http_status);
  auto doc = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (doc.is_object() && doc.contains("error") && doc["error"].is_object()) {
    const auto& error = doc["error"];
    if (error.contains("code") && error["code"].is_string())
      code = error["code"].get<std::string>();
    if (error.contains("message") && error["message"].is_string())
      message = error["message"].get<std::string>() + " (HTTP " + std::to_string(http_status) + ")";
  }
  std::string text = code + ": " + message;
  if (auto hint = hint_of(http_status); !hint.empty())
    text += "\nhint: " + std::string(hint);
  return make_status(errc_of(http_status), std::move(text));
}

status connection_failure(const status& failure, std::string_view url) {
  if (failure.code != errc::unavailable && failure.code != errc::timeout)
    return failure;
  return make_status(failure.code, failure.message + "\nhint: is airlockd running at "
                                     + std::string(url) + "? (set AIRLOCK_URL or --url)");
}

void api_client::authorize(http_request& request) const {
  for (const auto& [name, value] : request.headers) {
    if (name == "Authorization")
      return;
  }
  if (!config_.api_key.empty())
    request.headers.emplace_back("Authorization", "Bearer " + config_.api_key);
}

result<http_response> api_client::send(http_request request) const {
  authorize(request);
  auto response = http_send(request, http_);
  if (!response)
    return connection_failure(response.error(), config_.url);
  return response;
}

result<http_response>
api_client::stream(http_request request,
                   const std::function<bool(std::string_view)>& on_bytes) const {
  authorize(request);
  auto response = http_stream(request, http_, on_bytes);
  if (!response)
    return connection_failure(response.error(), config_.url);
  return response;
}

std::string api_client::absolute(std::string_view url_or_path) const {
  if (url_or_path.starts_with("/"))
    return config_.url + std::string(url_or_path);
  return std::string(url_or_path);
}

result<nlohmann::json> api_client::call(std::string_view method, const std::string& path,
                                        const nlohmann::json* body) const {
  http_request request{std::string(method), absolute(path), {}, {}};
  if (body) {
    request.headers.emplace_back("Content-Type", "application/json");
    request.body = body->dump();
  }
  auto response = send(std::move(request));
  if (!response)
    return response.error();
  if (response->status < 200 || response->status >= 300)
    return api_failure(response->status, response->body);
  if (response->body.empty())
    return nlohmann::json(nullptr);
  auto doc = nlohmann::json::parse(response->body, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded())
    return make_status(errc::internal, "the server's answer to " + std::string(method) + " " + path
                                         + " is not JSON");
  return doc;
}

} // namespace airlock::cli
