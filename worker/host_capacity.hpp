#pragma once
// What this host can offer sandboxes, as the worker reports it when it
// registers. Reads /proc and statvfs; the parsing is separate so that it can
// be tested on fixed text.

#include <cstdint>
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

/// Probes this host: online CPUs, MemTotal, free space under `data_dir`,
/// minus the reserves. Fails with io_error when /proc or `data_dir` is
/// unreadable.
result<schema::resources> probe_host_capacity(const std::string& data_dir,
                                              const capacity_options& options = {});

} // namespace airlock::worker
