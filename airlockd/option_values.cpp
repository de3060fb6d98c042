// Parsing single option values (numbers, booleans, paths, endpoints, log
// levels, names) and the list-valued options (split_list, --template-egress).

#include <algorithm>
#include <cctype>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "actors/join_tokens.hpp"
#include "airlockd/option_spec.hpp"
#include "schema/egress_rules.hpp"

namespace airlock::airlockd::option_detail {

status invalid(std::string message) {
  return make_status(errc::invalid_argument, std::move(message));
}

status set_bool(bool& field, std::string_view text) {
  if (text == "true" || text == "1") {
    field = true;
  } else if (text == "false" || text == "0") {
    field = false;
  } else {
    return invalid("expected true or false, got '" + std::string(text) + "'");
  }
  return status::ok();
}

status set_path(std::string& field, std::string_view text) {
  if (text.empty())
    return invalid("expected a path, got an empty value");
  field = std::string(text);
  return status::ok();
}

status set_endpoint(gateway::endpoint& field, std::string_view text) {
  auto parsed = gateway::parse_endpoint(text);
  if (!parsed)
    return parsed.error();
  field = *parsed;
  return status::ok();
}

status set_log_level(actors::log_level& field, std::string_view text) {
  auto parsed = actors::parse_log_level(text);
  if (!parsed)
    return parsed.error();
  field = *parsed;
  return status::ok();
}

status set_name(std::string& field, std::string_view text) {
  bool ok = !text.empty() && text.size() <= 63 && std::all_of(text.begin(), text.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
  });
  if (!ok)
    return invalid("expected 1 to 63 letters, digits, '-', '_' or '.', got '" + std::string(text)
                   + "'");
  field = std::string(text);
  return status::ok();
}

status set_join_token(std::string& field, std::string_view text) {
  if (auto parsed = actors::parse_join_token(text); !parsed)
    return invalid(parsed.error().message);
  field = std::string(text);
  return status::ok();
}

status set_http_url(std::string& field, std::string_view text) {
  constexpr std::string_view scheme = "http://";
  if (text.substr(0, scheme.size()) != scheme)
    return invalid("expected http://HOST:PORT, got '" + std::string(text) + "'");
  std::string_view rest = text.substr(scheme.size());
  if (!rest.empty() && rest.back() == '/')
    rest.remove_suffix(1);
  gateway::endpoint checked;
  if (auto set = set_endpoint(checked, rest); !set)
    return invalid("expected http://HOST:PORT, got '" + std::string(text) + "'");
  field = std::string(scheme) + std::string(rest);
  return status::ok();
}

} // namespace airlock::airlockd::option_detail

namespace airlock::airlockd {

std::vector<std::string> split_list(std::string_view text, char separator) {
  std::vector<std::string> out;
  while (!text.empty()) {
    auto at = text.find(separator);
    if (auto item = text.substr(0, at); !item.empty())
      out.emplace_back(item);
    text = at == std::string_view::npos ? std::string_view{} : text.substr(at + 1);
  }
  return out;
}

result<std::map<std::string, schema::egress_policy>> parse_template_egress(std::string_view text) {
  std::map<std::string, schema::egress_policy> out;
  auto bad = [&text](const std::string& why) {
    return make_status(errc::invalid_argument,
                       "template egress '" + std::string(text) + "': " + why
                         + " (expected NAME=PROFILE[:HOST,...];... e.g. base=open)");
  };
  for (std::string_view item : split_list(text, ';')) {
    auto equals = item.find('=');
    if (equals == std::string_view::npos || equals == 0)
      return bad("'" + std::string(item) + "' has no NAME=");
    auto name = std::string(item.substr(0, equals));
    auto rest = item.substr(equals + 1);
    auto colon = rest.find(':');
    auto profile = schema::parse_egress_profile(rest.substr(0, colon));
    if (!profile)
      return bad("profile of " + name + " must be none, allowlist or open");
    schema::egress_policy policy;
    policy.profile = *profile;
    if (colon != std::string_view::npos)
      policy.allow = split_list(rest.substr(colon + 1), ',');
    if (auto valid = schema::validate_egress_policy(policy); !valid)
      return bad(name + ": " + valid.message);
    out[name] = std::move(policy);
  }
  return out;
}

} // namespace airlock::airlockd
