#include "bench/egress/report.hpp"

#include <cstdio>
#include <fstream>
#include <iostream>

namespace airlock::egress_bench {

using namespace airlock::worker::egress;

std::string load_average() {
  std::ifstream in{"/proc/loadavg"};
  std::string one, five, fifteen;
  in >> one >> five >> fifteen;
  return one + " " + five + " " + fifteen;
}

void print_stats(const egress_proxy& proxy, const counting_audit& audit,
                 const bench_credentials& credentials, const upstream_counts& upstream) {
  auto s = proxy.stats();
  std::printf(
    "proxy stats: connections %llu, tls_terminated %llu, allowed_requests %llu, credential_uses "
    "%llu, "
    "denied %llu, rate_limited %llu, upstream_failures %llu, unknown_peers %llu, active %llu, "
    "passthrough %llu, upgrades %llu\n",
    static_cast<unsigned long long>(s.connections),
    static_cast<unsigned long long>(s.tls_terminated),
    static_cast<unsigned long long>(s.allowed_requests),
    static_cast<unsigned long long>(s.credential_uses), static_cast<unsigned long long>(s.denied),
    static_cast<unsigned long long>(s.rate_limited),
    static_cast<unsigned long long>(s.upstream_failures),
    static_cast<unsigned long long>(s.unknown_peers),
    static_cast<unsigned long long>(s.active_connections),
    static_cast<unsigned long long>(s.passthrough), static_cast<unsigned long long>(s.upgrades));
  std::cout << "audit records:";
  for (const auto& [what, count] : audit.counts())
    std::cout << " " << what << " " << count << ";";
  std::cout << " credential fetches " << credentials.fetches << "\n";
  std::cout << "upstream: connections " << upstream.connections << ", requests "
            << upstream.requests << ", with the injected Authorization " << upstream.with_credential
            << ", other Authorization " << upstream.other_authorization << ", bad requests "
            << upstream.bad_requests << "\n";
}

/// Every proxy request used the credential once and reached the upstream
/// with it; no direct request carried it; nothing was denied or failed.
std::vector<std::string> check_counts(const bench_context& ctx, const egress_proxy& proxy,
                                      const counting_audit& audit,
                                      const upstream_counts& upstream) {
  auto s = proxy.stats();
  auto audits = audit.counts();
  const uint64_t via_proxy = ctx.requests[proxy_path];
  const uint64_t direct = ctx.requests[direct_path];
  std::vector<std::string> failures;
  auto expect = [&failures](const std::string& what, uint64_t got, uint64_t want) {
    if (got != want)
      failures.push_back(what + " is " + std::to_string(got) + ", expected "
                         + std::to_string(want));
  };
  expect("proxy credential_uses", s.credential_uses, via_proxy);
  expect("proxy allowed_requests", s.allowed_requests, via_proxy);
  expect("audit 'credential allowed' records", audits["credential allowed"], via_proxy);
  expect("upstream requests with the injected Authorization", upstream.with_credential, via_proxy);
  expect("upstream requests", upstream.requests, via_proxy + direct);
  expect("upstream requests with another Authorization", upstream.other_authorization, 0);
  expect("upstream bad requests", upstream.bad_requests, 0);
  expect("proxy denied", s.denied, 0);
  expect("proxy upstream_failures", s.upstream_failures, 0);
  if (!audit.first_denial().empty())
    failures.push_back("first denial in the audit: " + audit.first_denial());
  return failures;
}

} // namespace airlock::egress_bench
