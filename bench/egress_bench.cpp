// HTTPS through the egress proxy against a direct connection to the same
// upstream, side by side in one run:
//   small        N sequential GET /small (100-byte body) on one keep-alive
//                connection per path, the two paths' requests interleaved so
//                that load from elsewhere on the machine falls on both alike
//   connections  M GET /small per path, each on a fresh TCP + TLS connection
//                (connect, handshake, request, response), interleaved too
//   large        one GET of S MiB per path: MiB/s and the ratio
// The egress proxy path is worker/egress's egress_proxy as the worker runs it:
// TLS terminated with a leaf minted for bench.test, the Host judged against
// the sandbox's allowlist, an Authorization header injected from a credential
// grant, bench.test resolved by the egress proxy itself (a static hosts file) and
// the upstream's certificate verified. Everything is in this process over
// loopback; no root needed:
//   - upstream: a blocking OpenSSL HTTPS server on its own threads (one per
//     connection), 127.0.0.1, with a leaf for bench.test from an "upstream"
//     intermediate of the bench's root CA;
//   - proxy: bound to 127.0.0.1, original destination injected (the
//     upstream's port: no nftables redirect here), 127.0.0.0/8 allowed, one
//     sandbox at 127.0.0.1 with profile allowlist ["bench.test"], its CA
//     another intermediate of the same root;
//   - client: blocking OpenSSL trusting only the root, the same code for both
//     paths (SNI and certificate name bench.test).
// After the cases it prints the egress proxy's stats and checks that every proxy
// request used the credential exactly once and reached the upstream with it,
// and that no direct request carried it.
//
//   egress_bench [--small N] [--connections M] [--large-mb S]
//                [--cases small,connections,large] [--egress-proxy-threads T]
//                [--relay-chunk-kb K] [--help]
// T and K set egress_proxy_options::network_threads and
// connection_proxy_options::relay_chunk_bytes (defaults: the egress proxy's own).
//
// Exit status: 0 measured (targets met or missed: printed), 1 a response was
// wrong (status, length, body) or a check failed, 2 bad flags (a one-line
// message, see bench/bench_flags.hpp).
//
// The pieces are in bench/egress/: tls_io (names, sizes, TLS byte I/O and
// headers), pki (certificates and TLS contexts), upstream_server, tls_client,
// proxy_setup (the egress proxy and its doubles), cases, report (stats and
// checks); this file runs them in order and parses the flags.

#include <openssl/crypto.h>

#include <csignal>
#include <iostream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "bench/bench_flags.hpp"
#include "bench/egress/cases.hpp"
#include "bench/egress/options.hpp"
#include "bench/egress/pki.hpp"
#include "bench/egress/proxy_setup.hpp"
#include "bench/egress/report.hpp"
#include "bench/egress/upstream_server.hpp"

namespace airlock::egress_bench {
namespace {

int run(const bench_options& opt) {
  std::signal(SIGPIPE, SIG_IGN); // raw sockets below; a peer that closed is an error, not a signal
  auto pki = make_pki();
  if (!pki)
    return std::cerr << "egress_bench: certificates: " << pki.error().message << "\n", 1;
  auto upstream_tls = server_context(pki->upstream_leaf);
  auto client_tls = client_context(pki->root.cert_pem);
  if (!upstream_tls || !client_tls)
    return std::cerr << "egress_bench: TLS contexts: "
                     << (upstream_tls ? client_tls.error() : upstream_tls.error()).message << "\n",
           1;
  auto upstream = upstream_server::start(upstream_tls->get());
  if (!upstream)
    return std::cerr << "egress_bench: upstream: " << upstream.error().message << "\n", 1;
  scratch_dir dir;
  auto setup = start_proxy(opt, *pki, dir, (*upstream)->port());
  if (!setup)
    return std::cerr << "egress_bench: proxy: " << setup.error().message << "\n", 1;
  bench_context ctx;
  ctx.client = client_tls->get();
  ctx.ports[direct_path] = (*upstream)->port();
  ctx.ports[proxy_path] = setup->proxy->proxy_port();
  std::cout << "egress_bench: " << std::thread::hardware_concurrency() << " cores, load average "
            << load_average() << "; upstream 127.0.0.1:" << ctx.ports[direct_path]
            << " (thread per connection), "
            << "proxy 127.0.0.1:" << ctx.ports[proxy_path] << " (" << opt.proxy_threads
            << " network thread(s), relay chunk "
            << (opt.relay_chunk_kb > 0 ? std::to_string(opt.relay_chunk_kb) + " KiB"
                                       : std::string("default"))
            << "), TLS via " << OpenSSL_version(OPENSSL_VERSION) << "\n";
  auto wanted = [&opt](std::string_view name) { return opt.cases.find(name) != std::string::npos; };
  status outcome = status::ok();
  if (outcome && wanted("small"))
    outcome = bench_small(ctx, opt);
  if (outcome && wanted("connections"))
    outcome = bench_connections(ctx, opt);
  if (outcome && wanted("large"))
    outcome = bench_large(ctx, opt);
  print_stats(*setup->proxy, *setup->audit, *setup->credentials, (*upstream)->counts());
  auto failures = check_counts(ctx, *setup->proxy, *setup->audit, (*upstream)->counts());
  setup->proxy->stop();
  (*upstream)->stop();
  if (!outcome) {
    std::cerr << "egress_bench: WRONG RESPONSE: " << outcome.message << "\n";
    return 1;
  }
  for (const auto& failure : failures)
    std::cerr << "egress_bench: CHECK FAILED: " << failure << "\n";
  if (!failures.empty())
    return 1;
  std::cout << "check: credential uses = proxy requests = upstream requests with the header = "
            << ctx.requests[proxy_path]
            << "; direct requests without it = " << ctx.requests[direct_path] << ": ok\n";
  std::cout << "summary (load average now " << load_average() << "):\n";
  for (const auto& line : ctx.summary)
    std::cout << "  " << line << "\n";
  return 0;
}

} // namespace
} // namespace airlock::egress_bench

int main(int argc, char** argv) {
  airlock::egress_bench::bench_options opt;
  airlock::bench::bench_flags flags{
    "egress_bench", "HTTPS through the egress proxy (TLS termination, credential injection)\n"
                    "against a direct connection to the same upstream, over loopback."};
  flags.integer("small", opt.small, "GET /small per path on one keep-alive connection", 1)
    .integer("connections", opt.connections, "GET /small per path, each on a fresh connection", 1)
    .integer("large-mb", opt.large_mb, "MiB of the one large GET per path", 1, 1 << 24)
    .names("cases", opt.cases, {"small", "connections", "large"}, "which cases run")
    .integer("egress-proxy-threads", opt.proxy_threads, "egress_proxy_options::network_threads", 1,
             1024)
    .integer("relay-chunk-kb", opt.relay_chunk_kb,
             "connection_proxy_options::relay_chunk_bytes / 1024; 0: the egress proxy's default", 0,
             1 << 20);
  if (auto status = flags.parse(argc, argv))
    return *status;
  try {
    return airlock::egress_bench::run(opt);
  } catch (const std::exception& e) {
    std::cerr << "egress_bench: " << e.what() << "\n";
    return 1;
  }
}
