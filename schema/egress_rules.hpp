#pragma once
// Egress policy rules: parsing the `allow` entries of an egress_policy and
// judging a host name against them. One implementation shared by the API
// (validation at create/PATCH), the egress proxy and its DNS resolver, so
// that what the API accepts is exactly what the egress proxy enforces.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "schema/errc.hpp"
#include "schema/sandbox.hpp"

namespace airlock::schema {

/// Most `allow` entries one policy may hold; the egress proxy scans them per
/// connection, so the list stays bounded.
inline constexpr size_t egress_allow_rules_max = 1024;

/// One parsed `allow` entry.
struct allow_rule {
  std::string name;         ///< lowercase, no trailing dot; without the "*." when wildcard
  bool wildcard = false;    ///< "*.name": matches any name strictly below `name`
  uint16_t port = 0;        ///< 0: any port
  bool passthrough = false; ///< TLS pass-through: SNI checked, no termination (weaker)
  bool operator==(const allow_rule&) const = default;
};

/// Parses "api.example.com", "*.pypi.org" (matches sub.pypi.org and
/// a.b.pypi.org, not pypi.org), "host:8443" and
/// "passthrough:api.example.com[:443]". Lowercases and strips one trailing
/// dot. Refuses empty labels, labels over 63 or names over 253 characters,
/// characters outside [a-z0-9-], labels starting or ending with '-', IP
/// literals (and names whose last label is numeric, which resolvers read as
/// addresses), "*" anywhere but a leading "*.", and ports 0 or over 65535:
/// errc::invalid_argument with a sentence naming the entry.
result<allow_rule> parse_allow_rule(std::string_view text);

/// Every `allow` entry parses and there are at most egress_allow_rules_max of
/// them. The allowlist may be empty (then nothing is allowed).
status validate_egress_policy(const egress_policy& policy);

/// The canonical form of a host name (lowercase, no trailing dot) when it is a
/// valid DNS host name; nullopt otherwise, IP literals included.
std::optional<std::string> normalize_host_name(std::string_view host);

/// True for an IPv4 address in any form inet_aton accepts ("1.2.3.4",
/// "127.1", "0x7f000001", "017.0.0.1") and for IPv6 with or without [].
bool is_ip_literal(std::string_view host);

/// The egress proxy's answer for one name.
struct egress_verdict {
  bool allowed = false;
  bool passthrough = false; ///< allowed by a pass-through rule: do not terminate TLS
  std::string reason;       ///< a sentence for the audit log
};

/// none: denied ("egress profile is none"); open: allowed for any valid name;
/// allowlist: the first rule matching the name (and the port, when the rule
/// has one). An IP literal or an invalid name is denied with a reason saying
/// to connect by name.
egress_verdict judge_name(const egress_policy& policy, std::string_view host, uint16_t port);

/// judge_name for the resolver: no port, so a rule with a port still lets its
/// name resolve.
egress_verdict judge_dns_name(const egress_policy& policy, std::string_view host);

} // namespace airlock::schema
