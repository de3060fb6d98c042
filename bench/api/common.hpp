#pragma once
// api_bench: what its sides share: the flags, timing and percentiles, the
// client threads, the output command, and the table every side fills a part of.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#ifndef AIRLOCK_AIRLOCKD_PATH
#define AIRLOCK_AIRLOCKD_PATH ""
#endif

namespace airlock::api_bench {

using clock_type = std::chrono::steady_clock;
inline constexpr auto timeout = std::chrono::seconds(120);

struct bench_options {
  std::string airlockd = AIRLOCK_AIRLOCKD_PATH;
  std::string data_dir = "/var/tmp/airlock-api-bench";
  int creates = 32; ///< per concurrency level
  int execs = 300;  ///< per concurrency level
  uint64_t output_mb = 256;
  int clients = 16; ///< the concurrent level (the other is 1)
  /// CPU of the output phase's sandbox: with the 50 mCPU of the others the
  /// producer, not the path, would be measured.
  int output_cpu_millis = 2000;
};

double ms_since(clock_type::time_point start);

struct figures {
  double p50 = 0, p90 = 0, p99 = 0;
  size_t n = 0;
};

/// p50, p90 and p99 of `v` (zeros when it is empty).
figures percentiles(std::vector<double> v);

/// Runs `body(client_index, iteration)` `total` times split over `clients`
/// threads; each iteration's latency in ms.
std::vector<double> run_clients(int clients, int total, const std::function<bool(int, int)>& body);

/// The output phase's command: --output-mb MiB of 'x' lines.
std::string output_command(const bench_options& opt);

/// One line of the table: the HTTP side's figures and the node's.
struct row {
  std::string what;
  figures http;
  figures node;
};

struct results {
  std::vector<row> rows; ///< create x1, create xN, exec x1, exec xN
  double http_mib_s = 0;
  double node_mib_s = 0;
  double pipe_mib_s = 0;
};

void print_row(const row& r);

/// Parses the flags into `opt`; nullopt to run, else the status to exit with.
std::optional<int> parse_args(int argc, char** argv, bench_options& opt);

} // namespace airlock::api_bench
