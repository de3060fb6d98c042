#include "schema/egress_rules.hpp"

#include <gtest/gtest.h>

namespace airlock::schema {
namespace {

egress_policy allowlist(std::vector<std::string> allow) {
  return {egress_profile::allowlist, std::move(allow)};
}

TEST(egress_rules, parses_exact_wildcard_port_and_passthrough_entries) {
  struct row {
    std::string_view text;
    allow_rule expected;
  };
  const row rows[] = {
    {"api.example.com", {"api.example.com", false, 0, false}},
    {"API.Example.COM.", {"api.example.com", false, 0, false}},
    {"*.pypi.org", {"pypi.org", true, 0, false}},
    {"host.example:8443", {"host.example", false, 8443, false}},
    {"*.example.com:443", {"example.com", true, 443, false}},
    {"passthrough:api.example.com", {"api.example.com", false, 0, true}},
    {"passthrough:api.example.com:443", {"api.example.com", false, 443, true}},
    {"PassThrough:*.example.com", {"example.com", true, 0, true}},
    {"xn--bcher-kva.example", {"xn--bcher-kva.example", false, 0, false}},
    {"1e100.net", {"1e100.net", false, 0, false}},
    {"localhost", {"localhost", false, 0, false}},
  };
  for (const auto& r : rows) {
    auto rule = parse_allow_rule(r.text);
    ASSERT_TRUE(rule) << r.text << ": " << rule.error().message;
    EXPECT_EQ(*rule, r.expected) << r.text;
  }
}

TEST(egress_rules, refuses_malformed_entries_with_a_sentence) {
  const std::string long_label(64, 'a');
  std::string long_name;
  while (long_name.size() < 250)
    long_name += "abcdefghi.";
  long_name += "comx"; // 254 characters
  const std::string refused[] = {
    "",
    ".",
    "a..b",
    ".example.com",
    "example.com..",
    long_label + ".com",
    long_name,
    "exa_mple.com",
    "exa mple.com",
    "-bad.example",
    "bad-.example",
    "*",
    "*.",
    "*.*.example.com",
    "api.*.example.com",
    "a*.example.com",
    "*example.com",
    "1.2.3.4",
    "1.2.3.4:443",
    "127.1",
    "0x7f000001",
    "example.123",
    "::1",
    "[::1]:443",
    "2001:db8::1",
    "host:0",
    "host:65536",
    "host:",
    "host:8x",
    "host:-1",
    "passthrough:",
    "passthrough:passthrough:host",
    "ex\xc3\xa4mple.com",
  };
  for (const auto& text : refused) {
    auto rule = parse_allow_rule(text);
    ASSERT_FALSE(rule) << "accepted: " << text;
    EXPECT_EQ(rule.code(), errc::invalid_argument) << text;
    EXPECT_FALSE(rule.error().message.empty()) << text;
  }
  // 63-character labels and 253-character names are the limits, not past them.
  EXPECT_TRUE(parse_allow_rule(std::string(63, 'a') + ".com"));
  EXPECT_TRUE(parse_allow_rule(long_name.substr(0, 250) + "com"));
}

TEST(egress_rules, validates_every_entry_of_a_policy) {
  EXPECT_TRUE(validate_egress_policy(allowlist({})));
  EXPECT_TRUE(validate_egress_policy(allowlist({"a.example", "*.b.example:443"})));
  auto bad = validate_egress_policy(allowlist({"a.example", "10.0.0.1"}));
  EXPECT_EQ(bad.code, errc::invalid_argument);
  EXPECT_NE(bad.message.find("10.0.0.1"), std::string::npos) << bad.message;
  EXPECT_FALSE(validate_egress_policy(
    allowlist(std::vector<std::string>(egress_allow_rules_max + 1, "a.example"))));
}

TEST(egress_rules, normalizes_host_names_and_rejects_addresses) {
  EXPECT_EQ(normalize_host_name("Api.Example.COM."), "api.example.com");
  EXPECT_EQ(normalize_host_name("localhost"), "localhost");
  EXPECT_EQ(normalize_host_name("1.2.3.4"), std::nullopt);
  EXPECT_EQ(normalize_host_name("1.2.3.4."), std::nullopt);
  EXPECT_EQ(normalize_host_name("[::1]"), std::nullopt);
  EXPECT_EQ(normalize_host_name("2130706433"), std::nullopt);
  EXPECT_EQ(normalize_host_name("a..b"), std::nullopt);
  EXPECT_EQ(normalize_host_name("*.example.com"), std::nullopt);
  EXPECT_EQ(normalize_host_name(""), std::nullopt);
  EXPECT_EQ(normalize_host_name(std::string_view("a\0b.com", 7)), std::nullopt);
}

TEST(egress_rules, recognizes_ip_literals_in_every_form_resolvers_accept) {
  for (std::string_view text : {"1.2.3.4", "127.1", "0x7f.1", "0x7f000001", "2130706433",
                                "017.0.0.1", "::1", "[::1]", "2001:db8::1", "::ffff:1.2.3.4"})
    EXPECT_TRUE(is_ip_literal(text)) << text;
  for (std::string_view text : {"example.com", "1e100.net", "deadbeef", "a.1.2.3", "0x.com"})
    EXPECT_FALSE(is_ip_literal(text)) << text;
}

TEST(egress_rules, judges_names_by_profile) {
  auto none = judge_name({egress_profile::none, {"a.example"}}, "a.example", 443);
  EXPECT_FALSE(none.allowed);
  EXPECT_EQ(none.reason, "egress profile is none");

  auto open = judge_name({egress_profile::open, {}}, "anything.example", 443);
  EXPECT_TRUE(open.allowed);
  EXPECT_FALSE(open.passthrough);

  auto ip = judge_name({egress_profile::open, {}}, "203.0.113.5", 443);
  EXPECT_FALSE(ip.allowed);
  EXPECT_NE(ip.reason.find("connect by name"), std::string::npos) << ip.reason;
  auto bad = judge_name({egress_profile::open, {}}, "bad_name.example", 80);
  EXPECT_FALSE(bad.allowed);
  EXPECT_NE(bad.reason.find("connect by name"), std::string::npos) << bad.reason;
}

TEST(egress_rules, matches_allowlist_rules_by_name_wildcard_and_port) {
  auto policy = allowlist({"api.example.com", "*.pypi.org", "alt.example:8443",
                           "passthrough:secure.example", "passthrough:*.tunnel.example:443"});
  struct row {
    std::string_view host;
    uint16_t port;
    bool allowed;
    bool passthrough;
  };
  const row rows[] = {
    {"api.example.com", 443, true, false},
    {"API.EXAMPLE.COM.", 80, true, false},
    {"other.example.com", 443, false, false},
    {"example.com", 443, false, false},
    {"files.pypi.org", 443, true, false},
    {"a.b.pypi.org", 443, true, false},
    {"pypi.org", 443, false, false},
    {"evilpypi.org", 443, false, false},
    {"pypi.org.evil.example", 443, false, false},
    {"alt.example", 8443, true, false},
    {"alt.example", 443, false, false},
    {"secure.example", 443, true, true},
    {"x.tunnel.example", 443, true, true},
    {"x.tunnel.example", 80, false, false},
  };
  for (const auto& r : rows) {
    auto verdict = judge_name(policy, r.host, r.port);
    EXPECT_EQ(verdict.allowed, r.allowed) << r.host << ":" << r.port << " " << verdict.reason;
    EXPECT_EQ(verdict.passthrough, r.passthrough) << r.host << ":" << r.port;
    EXPECT_FALSE(verdict.reason.empty());
  }
  auto denied = judge_name(policy, "other.example.com", 443);
  EXPECT_NE(denied.reason.find("not in the sandbox's allowlist"), std::string::npos);
}

TEST(egress_rules, first_matching_rule_decides_pass_through) {
  auto policy = allowlist({"api.example.com", "passthrough:api.example.com"});
  EXPECT_FALSE(judge_name(policy, "api.example.com", 443).passthrough);
  auto reversed = allowlist({"passthrough:api.example.com", "api.example.com"});
  EXPECT_TRUE(judge_name(reversed, "api.example.com", 443).passthrough);
}

TEST(egress_rules, dns_judgement_ignores_rule_ports) {
  auto policy = allowlist({"alt.example:8443", "*.pypi.org"});
  EXPECT_TRUE(judge_dns_name(policy, "alt.example").allowed);
  EXPECT_TRUE(judge_dns_name(policy, "files.pypi.org.").allowed);
  EXPECT_FALSE(judge_dns_name(policy, "pypi.org").allowed);
  EXPECT_FALSE(judge_dns_name(policy, "1.2.3.4").allowed);
  EXPECT_FALSE(judge_dns_name({egress_profile::none, {"alt.example"}}, "alt.example").allowed);
}

TEST(egress_rules, quotes_unprintable_input_in_reasons) {
  auto verdict = judge_name(allowlist({}), std::string_view("a\nb\0c", 5), 80);
  EXPECT_FALSE(verdict.allowed);
  EXPECT_EQ(verdict.reason.find('\n'), std::string::npos);
  EXPECT_EQ(verdict.reason.find('\0'), std::string::npos);
}

} // namespace
} // namespace airlock::schema
