#include "bench/egress/cases.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>

#include "bench/egress/tls_client.hpp"
#include "bench/egress/tls_io.hpp"

namespace airlock::egress_bench {

namespace {

using clock_type = std::chrono::steady_clock;

constexpr int warmup_requests = 20; ///< per path, before the small case's timing

double ms_since(clock_type::time_point start) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - start).count();
}

struct quantiles {
  double p50 = 0, p90 = 0, p99 = 0;
};

quantiles quantiles_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  auto at = [&v](double q) {
    return v.empty()
             ? 0.0
             : v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
  };
  return {at(0.5), at(0.9), at(0.99)};
}

std::string format_quantiles(const std::vector<double>& v) {
  auto q = quantiles_of(v);
  char line[128];
  std::snprintf(line, sizeof line, "p50 %8.3f  p90 %8.3f  p99 %8.3f ms  (n=%zu)", q.p50, q.p90,
                q.p99, v.size());
  return line;
}

const char* verdict(bool met) { return met ? "met" : "MISSED"; }

status path_failed(int path, const status& failure) {
  return make_status(failure.code, std::string(path_names[path]) + " path: " + failure.message);
}

void print_latencies(bench_context& ctx, const char* name, const std::vector<double> (&times)[2],
                     const char* target) {
  for (int p : {direct_path, proxy_path})
    std::cout << "  " << path_names[p] << "  " << format_quantiles(times[p]) << "\n";
  double direct = quantiles_of(times[direct_path]).p50;
  double proxy = quantiles_of(times[proxy_path]).p50;
  char line[256];
  std::snprintf(line, sizeof line, "%s p50: direct %.3f ms, proxy %.3f ms, difference %+.3f ms%s",
                name, direct, proxy, proxy - direct, target);
  std::printf("  p50 difference %+.3f ms%s\n", proxy - direct, target);
  std::fflush(stdout);
  ctx.summary.push_back(line);
}

} // namespace

status bench_small(bench_context& ctx, const bench_options& opt) {
  std::unique_ptr<tls_connection> conns[2];
  for (int p : {direct_path, proxy_path}) {
    auto conn = tls_connection::open(ctx.client, ctx.ports[p]);
    if (!conn)
      return path_failed(p, conn.error());
    conns[p] = std::move(conn.value());
  }
  const std::string body = small_body();
  std::vector<double> times[2];
  for (int i = -warmup_requests; i < opt.small; ++i) {
    for (int p : {direct_path, proxy_path}) {
      auto start = clock_type::now();
      auto got = conns[p]->get("/small", body.size(), &body);
      double elapsed = ms_since(start);
      if (!got)
        return path_failed(p, got.error());
      ++ctx.requests[p];
      if (i >= 0)
        times[p].push_back(elapsed);
    }
  }
  std::cout.flush();
  std::cout << "small: GET /small (" << body.size()
            << " B body), one keep-alive connection per path, " << opt.small
            << " requests each after " << warmup_requests << " unmeasured, interleaved\n";
  bool met = quantiles_of(times[proxy_path]).p50 - quantiles_of(times[direct_path]).p50 <= 1.0;
  print_latencies(ctx, "small", times,
                  met ? "  (target <= +1 ms: met)" : "  (target <= +1 ms: MISSED)");
  return status::ok();
}

status bench_connections(bench_context& ctx, const bench_options& opt) {
  const std::string body = small_body();
  std::vector<double> times[2];
  for (int i = 0; i < opt.connections; ++i) {
    for (int p : {direct_path, proxy_path}) {
      auto start = clock_type::now();
      auto conn = tls_connection::open(ctx.client, ctx.ports[p]);
      if (!conn)
        return path_failed(p, conn.error());
      auto got = (*conn)->get("/small", body.size(), &body);
      double elapsed = ms_since(start);
      if (!got)
        return path_failed(p, got.error());
      ++ctx.requests[p];
      times[p].push_back(elapsed); // the close (close_notify) is not timed
    }
  }
  std::cout << "connections: TCP connect + TLS handshake + GET /small on a fresh connection, "
            << opt.connections
            << " per path, interleaved (proxy: two handshakes, the guest's and the upstream's)\n";
  print_latencies(ctx, "connections", times, "  (no target)");
  return status::ok();
}

status bench_large(bench_context& ctx, const bench_options& opt) {
  const uint64_t bytes = opt.large_mb << 20;
  double mib_per_s[2] = {0, 0};
  std::cout << "large: one GET of " << opt.large_mb
            << " MiB per path, direct first (connection set up untimed)\n";
  for (int p : {direct_path, proxy_path}) {
    auto conn = tls_connection::open(ctx.client, ctx.ports[p]);
    if (!conn)
      return path_failed(p, conn.error());
    auto start = clock_type::now();
    auto got = (*conn)->get("/large/" + std::to_string(bytes), bytes, nullptr);
    double seconds = ms_since(start) / 1000.0;
    if (!got)
      return path_failed(p, got.error());
    ++ctx.requests[p];
    mib_per_s[p] = static_cast<double>(bytes) / (1 << 20) / seconds;
    std::printf("  %s  %9.1f MiB/s  (%llu bytes in %.3f s)\n", path_names[p], mib_per_s[p],
                static_cast<unsigned long long>(bytes), seconds);
  }
  double ratio = 100.0 * mib_per_s[proxy_path] / mib_per_s[direct_path];
  std::printf("  proxy/direct %.1f %%  (target >= 50 %%: %s)\n", ratio, verdict(ratio >= 50.0));
  char line[256];
  std::snprintf(line, sizeof line,
                "large %llu MiB: direct %.1f MiB/s, proxy %.1f MiB/s, ratio %.1f %%",
                static_cast<unsigned long long>(opt.large_mb), mib_per_s[direct_path],
                mib_per_s[proxy_path], ratio);
  ctx.summary.push_back(line);
  std::cout.flush();
  return status::ok();
}

} // namespace airlock::egress_bench
