#include "gateway/router.hpp"

#include <cctype>

#include <algorithm>
#include <set>

#include <nlohmann/json.hpp>

#include "schema/hex.hpp"

namespace airlock::gateway {

namespace {

std::vector<std::string_view> split_path(std::string_view path) {
  std::vector<std::string_view> out;
  if (!path.empty() && path.front() == '/')
    path.remove_prefix(1);
  for (;;) {
    size_t slash = path.find('/');
    out.push_back(path.substr(0, slash));
    if (slash == std::string_view::npos)
      return out;
    path.remove_prefix(slash + 1);
  }
}

std::vector<route_entry::segment> parse_pattern(std::string_view pattern) {
  std::vector<route_entry::segment> out;
  for (std::string_view part : split_path(pattern)) {
    bool param = part.size() >= 2 && part.front() == '{' && part.back() == '}';
    if (param)
      out.push_back({std::string(part.substr(1, part.size() - 2)), true});
    else
      out.push_back({std::string(part), false});
  }
  return out;
}

bool segments_match(const route_entry& route, const std::vector<std::string_view>& parts) {
  if (route.segments.size() != parts.size())
    return false;
  for (size_t i = 0; i < parts.size(); ++i) {
    const auto& segment = route.segments[i];
    // A parameter takes one whole, non-empty segment.
    if (segment.param ? parts[i].empty() : segment.text != parts[i])
      return false;
  }
  return true;
}

/// True when `a` takes precedence over `b` (both match the same path): the
/// first segment where one is exact and the other a parameter decides.
bool more_specific(const route_entry& a, const route_entry& b) {
  for (size_t i = 0; i < a.segments.size() && i < b.segments.size(); ++i) {
    if (a.segments[i].param != b.segments[i].param)
      return !a.segments[i].param;
  }
  return false;
}

std::string_view verb_name(http::verb verb) {
  auto name = http::to_string(verb);
  return {name.data(), name.size()};
}

} // namespace

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

std::string percent_encode(std::string_view text, bool keep_slash) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~'
        || (keep_slash && c == '/')) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(hex[c >> 4]);
      out.push_back(hex[c & 15]);
    }
  }
  return out;
}

std::string percent_decode(std::string_view text, bool plus_is_space) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '+' && plus_is_space) {
      out += ' ';
    } else if (c == '%' && i + 2 < text.size() && schema::hex_digit_value(text[i + 1]) >= 0
               && schema::hex_digit_value(text[i + 2]) >= 0) {
      out += static_cast<char>(schema::hex_digit_value(text[i + 1]) * 16
                               + schema::hex_digit_value(text[i + 2]));
      i += 2;
    } else {
      out += c;
    }
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> parse_query(std::string_view target) {
  std::vector<std::pair<std::string, std::string>> out;
  size_t question = target.find('?');
  if (question == std::string_view::npos)
    return out;
  std::string_view query = target.substr(question + 1);
  query = query.substr(0, query.find('#'));
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view part = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    if (part.empty())
      continue;
    size_t eq = part.find('=');
    std::string_view name = part.substr(0, eq);
    std::string_view value =
      eq == std::string_view::npos ? std::string_view{} : part.substr(eq + 1);
    out.emplace_back(percent_decode(name, true), percent_decode(value, true));
  }
  return out;
}

void route_table::insert(route_entry entry) {
  for (auto& existing : routes_) {
    if (existing.method == entry.method && existing.pattern == entry.pattern) {
      existing = std::move(entry);
      return;
    }
  }
  routes_.push_back(std::move(entry));
}

void route_table::add(http::verb method, std::string path, route_handler handler) {
  route_entry entry;
  entry.method = method;
  entry.segments = parse_pattern(path);
  entry.pattern = std::move(path);
  entry.handler = std::move(handler);
  insert(std::move(entry));
}

void route_table::add_async(http::verb method, std::string pattern, async_route_handler handler,
                            route_options options) {
  route_entry entry;
  entry.method = method;
  entry.segments = parse_pattern(pattern);
  entry.pattern = std::move(pattern);
  entry.async_handler = std::move(handler);
  entry.options = options;
  insert(std::move(entry));
}

std::vector<std::pair<http::verb, std::string>> route_table::routes() const {
  std::vector<std::pair<http::verb, std::string>> out;
  out.reserve(routes_.size());
  for (const auto& route : routes_)
    out.emplace_back(route.method, route.pattern);
  return out;
}

route_match route_table::match(http::verb method, std::string_view path) const {
  auto parts = split_path(path);
  const route_entry* best = nullptr;
  std::set<http::verb> allowed;
  for (const auto& route : routes_) {
    if (!segments_match(route, parts))
      continue;
    allowed.insert(route.method);
    if (route.method == method && (best == nullptr || more_specific(route, *best)))
      best = &route;
  }
  route_match out;
  if (best != nullptr) {
    out.result = route_match::outcome::found;
    out.route = best;
    for (size_t i = 0; i < parts.size(); ++i) {
      if (best->segments[i].param)
        out.params.emplace_back(best->segments[i].text, percent_decode(parts[i], false));
    }
    return out;
  }
  if (allowed.empty())
    return out;
  out.result = route_match::outcome::method_not_allowed;
  for (http::verb verb : allowed) {
    if (!out.allow.empty())
      out.allow += ", ";
    out.allow += verb_name(verb);
  }
  return out;
}

http_response route_not_found(std::string_view method, std::string_view path) {
  return json_error(http::status::not_found, "not_found",
                    "no route " + std::string(method) + " " + std::string(path)
                      + "; see /v1/openapi.json");
}

http_response route_method_not_allowed(std::string_view method, std::string_view path,
                                       const std::string& allow) {
  auto response = json_error(http::status::method_not_allowed, "method_not_allowed",
                             std::string(path) + " does not accept " + std::string(method)
                               + "; allowed: " + allow);
  response.set(http::field::allow, allow);
  return response;
}

http_response route_table::dispatch(const http_request& request) const {
  std::string_view target(request.target().data(), request.target().size());
  std::string_view path = path_of(target);
  std::string_view method(request.method_string().data(), request.method_string().size());
  auto found = match(request.method(), path);
  if (found.result == route_match::outcome::not_found)
    return route_not_found(method, path);
  if (found.result == route_match::outcome::method_not_allowed)
    return route_method_not_allowed(method, path, found.allow);
  if (!found.route->handler) {
    return json_error(http::status::internal_server_error, "internal",
                      "the route " + found.route->pattern
                        + " is asynchronous; it answers through the server");
  }
  return found.route->handler(request);
}

} // namespace airlock::gateway
