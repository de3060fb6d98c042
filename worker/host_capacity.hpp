#pragma once
// What this host can offer sandboxes, as the worker reports it when it
// registers. Reads /proc and statvfs; the parsing is separate so that it can
// be tested on fixed text.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "schema/errc.hpp"
#include "schema/worker.hpp"

namespace airlock::worker {

struct capacity_options {
  /// Memory kept for the host itself and airlockd. Default: 1024.
  uint32_t reserved_memory_mb = 1024;
  /// CPU kept for the host. Default: 0 (sandboxes may use every core).
  uint32_t reserved_cpu_millis = 0;
  /// Disk kept free on the data directory's filesystem. Default: 2048.
  uint32_t reserved_disk_mb = 2048;
  /// Most sandboxes on this host. Default: 1000.
  uint32_t sandboxes_max = 1000;
};

/// MemTotal from /proc/meminfo text, in MiB; invalid_argument when absent.
result<uint64_t> parse_meminfo_total_mb(std::string_view meminfo);

/// MemAvailable from /proc/meminfo text, in MiB; invalid_argument when absent.
result<uint64_t> parse_meminfo_available_mb(std::string_view meminfo);

/// The "full" line's avg10 from /proc/pressure/memory text, in percent: the
/// share of the last 10 s in which every runnable task waited for memory.
result<double> parse_memory_pressure_full_avg10(std::string_view psi);

/// When the host counts as under memory pressure.
struct pressure_options {
  /// PSI "full avg10" at or above this percent: the host is thrashing (a
  /// sandbox thrashing against its own limit stalls only itself, so it
  /// raises "some" but rarely "full"). Default: 10.
  double full_avg10_percent_max = 10.0;
  /// MemAvailable below this: reclaim is about to start stalling everyone,
  /// the signal used where PSI is absent. Default: 512.
  uint64_t available_mb_min = 512;
};

/// What the host's memory looks like now.
struct memory_pressure {
  bool under = false;
  std::string reason; ///< what crossed which threshold; empty when not under
  uint64_t available_mb = 0;
};

/// Judges readings against `options`; `full_avg10` absent when PSI is not
/// available. Pure.
memory_pressure judge_memory_pressure(std::optional<double> full_avg10, uint64_t available_mb,
                                      const pressure_options& options);

/// Reads /proc/pressure/memory (when present) and /proc/meminfo. io_error
/// when /proc/meminfo cannot be read.
result<memory_pressure> probe_memory_pressure(const pressure_options& options);

/// Probes this host: online CPUs, MemTotal, free space under `data_dir`,
/// minus the reserves. Fails with io_error when /proc or `data_dir` is
/// unreadable.
result<schema::resources> probe_host_capacity(const std::string& data_dir,
                                              const capacity_options& options = {});

} // namespace airlock::worker
