// egress_bench: the three cases, each run over both paths (direct to the
// upstream, and through the egress proxy) with the same client:
//   small        sequential GET /small on one keep-alive connection per path
//   connections  GET /small per path, each on a fresh TCP + TLS connection
//   large        one GET of large_mb MiB per path
// Each prints its figures as it ends and adds a line to the context's summary.

#pragma once

#include <openssl/ssl.h>

#include <cstdint>
#include <string>
#include <vector>

#include "bench/egress/options.hpp"
#include "schema/errc.hpp"

namespace airlock::egress_bench {

enum path_index { direct_path = 0, proxy_path = 1 };
inline constexpr const char* path_names[2] = {"direct", "proxy "};

struct bench_context {
  SSL_CTX* client = nullptr;
  uint16_t ports[2] = {0, 0}; ///< by path_index: the upstream's, the egress proxy's
  uint64_t requests[2] = {0, 0};
  std::vector<std::string> summary; ///< one line per case, repeated at the end
};

/// A failure: a response that was wrong (status, length, body) or a connection that failed.
status bench_small(bench_context& ctx, const bench_options& opt);
status bench_connections(bench_context& ctx, const bench_options& opt);
status bench_large(bench_context& ctx, const bench_options& opt);

} // namespace airlock::egress_bench
