#include "bench/api/common.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <mutex>
#include <thread>

#include "bench/bench_flags.hpp"

namespace airlock::api_bench {

double ms_since(clock_type::time_point start) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - start).count();
}

figures percentiles(std::vector<double> v) {
  figures out;
  if (v.empty())
    return out;
  std::sort(v.begin(), v.end());
  auto at = [&v](double q) {
    return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
  };
  return {at(0.5), at(0.9), at(0.99), v.size()};
}

std::vector<double> run_clients(int clients, int total, const std::function<bool(int, int)>& body) {
  std::vector<double> all;
  std::mutex mutex;
  std::vector<std::thread> threads;
  std::atomic<int> next{0};
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      std::vector<double> mine;
      for (int i; (i = next.fetch_add(1)) < total;) {
        auto start = clock_type::now();
        if (!body(c, i))
          break;
        mine.push_back(ms_since(start));
      }
      std::lock_guard lock(mutex);
      all.insert(all.end(), mine.begin(), mine.end());
    });
  }
  for (auto& thread : threads)
    thread.join();
  return all;
}

std::string output_command(const bench_options& opt) {
  // 1023 x's and a newline per line: JSON-safe but for one escape a line,
  // and busybox yes writes far faster than busybox tr.
  return "yes " + std::string(1023, 'x') + " | head -c " + std::to_string(opt.output_mb << 20);
}

void print_row(const row& r) {
  std::printf("%-22s %8.2f %8.2f %8.2f | %8.2f %8.2f %8.2f | %+8.2f  (n=%zu/%zu)\n", r.what.c_str(),
              r.http.p50, r.http.p90, r.http.p99, r.node.p50, r.node.p90, r.node.p99,
              r.http.p50 - r.node.p50, r.http.n, r.node.n);
}

std::optional<int> parse_args(int argc, char** argv, bench_options& opt) {
  bench::bench_flags flags{
    "api_bench", "The HTTP API (a child `airlockd serve`) against the node actor underneath\n"
                 "it: create, exec and output. Needs root."};
  flags.text("airlockd", opt.airlockd, "PATH", "the airlockd binary run as the HTTP side")
    .text("data-dir", opt.data_dir, "DIR", "btrfs images and templates (kept between runs)")
    .integer("creates", opt.creates, "creates per concurrency level", 1)
    .integer("execs", opt.execs, "execs per concurrency level", 1)
    .integer("output-mb", opt.output_mb, "MiB read in the output phase; 0: none", 0, 1 << 24)
    .integer("clients", opt.clients, "the concurrent level (the other is 1)", 1, 1024)
    .integer("output-cpu-millis", opt.output_cpu_millis, "cpu of the output phase's sandbox", 1,
             1'000'000);
  return flags.parse(argc, argv);
}

} // namespace airlock::api_bench
