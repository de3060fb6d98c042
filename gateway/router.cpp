#include "gateway/router.hpp"

#include <nlohmann/json.hpp>

namespace airlock::gateway {

http_response json_response(http::status status, const nlohmann::json& body) {
  http_response response{status, 11};
  response.set(http::field::content_type, "application/json");
  response.body() = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  response.body() += '\n';
  return response;
}

http_response json_error(http::status status, std::string_view code, std::string_view message) {
  nlohmann::json body;
  body["error"] = {{"code", std::string(code)}, {"message", std::string(message)}};
  return json_response(status, body);
}

std::string_view path_of(std::string_view target) { return target.substr(0, target.find('?')); }

void route_table::add(http::verb method, std::string path, route_handler handler) {
  routes_[std::move(path)][method] = std::move(handler);
}

http_response route_table::dispatch(const http_request& request) const {
  std::string_view target(request.target().data(), request.target().size());
  std::string_view path = path_of(target);
  std::string_view method(request.method_string().data(), request.method_string().size());
  auto by_path = routes_.find(path);
  if (by_path == routes_.end()) {
    return json_error(http::status::not_found, "not_found",
                      "no route " + std::string(method) + " " + std::string(path)
                        + "; see /v1/openapi.json");
  }
  auto handler = by_path->second.find(request.method());
  if (handler == by_path->second.end()) {
    std::string allow;
    for (const auto& [verb, unused] : by_path->second) {
      if (!allow.empty())
        allow += ", ";
      auto name = http::to_string(verb);
      allow.append(name.data(), name.size());
    }
    auto response = json_error(http::status::method_not_allowed, "method_not_allowed",
                               std::string(path) + " does not accept " + std::string(method)
                                 + "; allowed: " + allow);
    response.set(http::field::allow, allow);
    return response;
  }
  return handler->second(request);
}

} // namespace airlock::gateway
