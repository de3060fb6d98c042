// egress_bench: what the run reports after its cases: the egress proxy's, the
// audit's and the upstream's counts, and the checks that every proxy
// request used the credential exactly once and reached the upstream with it,
// and that no direct request carried it.

#pragma once

#include <string>
#include <vector>

#include "bench/egress/cases.hpp"
#include "bench/egress/proxy_setup.hpp"
#include "bench/egress/upstream_server.hpp"

namespace airlock::egress_bench {

/// The machine's load averages (1, 5, 15 minutes), as /proc/loadavg has them.
std::string load_average();

void print_stats(const worker::egress::egress_proxy& proxy, const counting_audit& audit,
                 const bench_credentials& credentials, const upstream_counts& upstream);

/// Every proxy request used the credential once and reached the upstream
/// with it; no direct request carried it; nothing was denied or failed.
/// Returns one line per check that failed.
std::vector<std::string> check_counts(const bench_context& ctx,
                                      const worker::egress::egress_proxy& proxy,
                                      const counting_audit& audit, const upstream_counts& upstream);

} // namespace airlock::egress_bench
