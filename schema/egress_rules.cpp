#include "schema/egress_rules.hpp"

#include <algorithm>
#include <charconv>
#include <vector>

namespace airlock::schema {
namespace {

constexpr size_t label_max = 63;
constexpr size_t name_max = 253;
constexpr size_t quoted_max = 80; // how much of a bad input a message repeats
constexpr std::string_view passthrough_prefix = "passthrough:";

/// The input as a message may quote it: printable ASCII, the rest escaped,
/// long inputs cut, so audit lines and errors stay one readable line.
std::string quoted(std::string_view text) {
  std::string out = "\"";
  for (size_t i = 0; i < text.size() && i < quoted_max; ++i) {
    auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
      out += static_cast<char>(c);
    } else {
      static constexpr char hex[] = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 0xf];
    }
  }
  if (text.size() > quoted_max)
    out += "...";
  out += '"';
  return out;
}

char lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

bool all_digits(std::string_view text) {
  if (text.empty())
    return false;
  for (char c : text)
    if (c < '0' || c > '9')
      return false;
  return true;
}

/// One part of an inet_aton address: decimal, octal (leading 0) or hex (0x).
bool is_aton_number(std::string_view part) {
  if (part.empty())
    return false;
  if (part.size() > 2 && part[0] == '0' && lower(part[1]) == 'x') {
    for (char c : part.substr(2))
      if (!((c >= '0' && c <= '9') || (lower(c) >= 'a' && lower(c) <= 'f')))
        return false;
    return true;
  }
  return all_digits(part);
}

bool is_ipv4_literal(std::string_view host) {
  size_t parts = 0;
  size_t start = 0;
  while (true) {
    size_t dot = host.find('.', start);
    auto part = host.substr(start, dot == std::string_view::npos ? host.npos : dot - start);
    if (!is_aton_number(part) || ++parts > 4)
      return false;
    if (dot == std::string_view::npos)
      return true;
    start = dot + 1;
  }
}

/// Why `name` (already lowercase, no trailing dot) is not a valid host name;
/// empty when it is.
std::string name_problem(std::string_view name) {
  if (name.empty())
    return "the name is empty";
  if (name.size() > name_max)
    return "the name is longer than 253 characters";
  size_t start = 0;
  std::string_view last;
  while (start <= name.size()) {
    size_t dot = name.find('.', start);
    auto label = name.substr(start, dot == std::string_view::npos ? name.npos : dot - start);
    if (label.empty())
      return "the name has an empty label";
    if (label.size() > label_max)
      return "a label is longer than 63 characters";
    for (char c : label)
      if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
        return "the name has a character outside [a-z0-9-]";
    if (label.front() == '-' || label.back() == '-')
      return "a label starts or ends with '-'";
    last = label;
    if (dot == std::string_view::npos)
      break;
    start = dot + 1;
  }
  if (all_digits(last))
    return "the last label is numeric (resolvers read such names as addresses)";
  return {};
}

std::string canonical(std::string_view host) {
  std::string out(host);
  for (char& c : out)
    c = lower(c);
  if (!out.empty() && out.back() == '.')
    out.pop_back();
  return out;
}

result<uint16_t> parse_port(std::string_view text, std::string_view entry) {
  unsigned value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size() || value == 0
      || value > 65535)
    return make_status(errc::invalid_argument, "allow entry " + quoted(entry)
                                                 + ": the port must be a number from 1 to 65535");
  return static_cast<uint16_t>(value);
}

bool rule_matches(const allow_rule& rule, std::string_view name) {
  if (!rule.wildcard)
    return name == rule.name;
  // "*.pypi.org" matches "x.pypi.org" and "a.b.pypi.org", never "pypi.org".
  return name.size() > rule.name.size() + 1 && name.ends_with(rule.name)
         && name[name.size() - rule.name.size() - 1] == '.';
}

egress_verdict judge(const egress_policy& policy, std::string_view host,
                     std::optional<uint16_t> port) {
  if (policy.profile == egress_profile::none)
    return {false, false, "egress profile is none"};
  if (is_ip_literal(host))
    return {false, false,
            quoted(host) + " is an IP address; connect by name so the egress proxy can judge it"};
  auto name = normalize_host_name(host);
  if (!name)
    return {false, false, quoted(host) + " is not a valid host name; connect by name"};
  if (policy.profile == egress_profile::open)
    return {true, false, "egress profile is open"};
  for (const auto& entry : policy.allow) {
    auto rule = parse_allow_rule(entry);
    if (!rule || !rule_matches(*rule, *name))
      continue;
    if (port && rule->port != 0 && rule->port != *port)
      continue;
    return {true, rule->passthrough, "allowed by rule " + quoted(entry)};
  }
  std::string where = port ? *name + ":" + std::to_string(*port) : *name;
  return {false, false, where + " is not in the sandbox's allowlist"};
}

} // namespace

std::optional<std::string> normalize_host_name(std::string_view host) {
  if (host.size() > name_max + 1 || is_ip_literal(host))
    return std::nullopt;
  auto name = canonical(host);
  if (!name_problem(name).empty())
    return std::nullopt;
  return name;
}

bool is_ip_literal(std::string_view host) {
  if (host.starts_with('[') || host.find(':') != std::string_view::npos)
    return true; // IPv6 (or an address with a port): never a host name
  if (host.ends_with('.'))
    host.remove_suffix(1);
  return is_ipv4_literal(host);
}

result<allow_rule> parse_allow_rule(std::string_view text) {
  allow_rule rule;
  std::string_view rest = text;
  if (canonical(rest.substr(0, passthrough_prefix.size())) == passthrough_prefix) {
    rule.passthrough = true;
    rest.remove_prefix(passthrough_prefix.size());
  }
  if (rest.starts_with('[') || std::count(rest.begin(), rest.end(), ':') > 1)
    return make_status(errc::invalid_argument,
                       "allow entry " + quoted(text) + " is an IP address; allow names only");
  if (auto colon = rest.find(':'); colon != std::string_view::npos) {
    auto port = parse_port(rest.substr(colon + 1), text);
    if (!port)
      return port.error();
    rule.port = *port;
    rest = rest.substr(0, colon);
  }
  if (rest.starts_with("*.")) {
    rule.wildcard = true;
    rest.remove_prefix(2);
  }
  if (rest.find('*') != std::string_view::npos)
    return make_status(errc::invalid_argument,
                       "allow entry " + quoted(text) + ": '*' is allowed only as a leading \"*.\"");
  if (is_ip_literal(rest))
    return make_status(errc::invalid_argument,
                       "allow entry " + quoted(text) + " is an IP address; allow names only");
  rule.name = canonical(rest);
  if (auto problem = name_problem(rule.name); !problem.empty())
    return make_status(errc::invalid_argument, "allow entry " + quoted(text) + ": " + problem);
  return rule;
}

status validate_egress_policy(const egress_policy& policy) {
  if (policy.allow.size() > egress_allow_rules_max)
    return make_status(errc::invalid_argument,
                       "egress allows at most " + std::to_string(egress_allow_rules_max)
                         + " entries, got " + std::to_string(policy.allow.size()));
  for (const auto& entry : policy.allow)
    if (auto rule = parse_allow_rule(entry); !rule)
      return rule.error();
  return status::ok();
}

egress_verdict judge_name(const egress_policy& policy, std::string_view host, uint16_t port) {
  return judge(policy, host, port);
}

egress_verdict judge_dns_name(const egress_policy& policy, std::string_view host) {
  return judge(policy, host, std::nullopt);
}

} // namespace airlock::schema
