#include "worker/worker_load.hpp"

#include <sys/statvfs.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>

namespace airlock::worker {

namespace {

uint32_t capped(uint32_t value, uint32_t fallback, uint64_t limit) {
  uint64_t chosen = value != 0 ? value : fallback;
  if (limit != 0)
    chosen = std::min(chosen, limit);
  return static_cast<uint32_t>(chosen);
}

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
           std::chrono::steady_clock::now().time_since_epoch())
    .count();
}

/// Bytes in use on the filesystem that holds the sandboxes' roots.
uint32_t disk_used_mb(const worker_context& context) {
  if (!context.rootfs)
    return 0;
  struct statvfs fs {};
  if (::statvfs(context.rootfs->templates_dir().c_str(), &fs) != 0)
    return 0;
  uint64_t used = (static_cast<uint64_t>(fs.f_blocks) - fs.f_bfree) * fs.f_frsize;
  return static_cast<uint32_t>(used >> 20);
}

} // namespace

create_sandbox_request with_default_requests(create_sandbox_request request,
                                             const schema::resources& defaults) {
  auto& limits = request.limits;
  limits.cpu_request_millis =
    capped(limits.cpu_request_millis, defaults.cpu_millis, limits.cpu_millis);
  request.memory_request_mb =
    capped(request.memory_request_mb, defaults.memory_mb, limits.memory_mb);
  request.disk_request_mb = capped(request.disk_request_mb, defaults.disk_mb, request.disk_mb);
  return request;
}

schema::worker_heartbeat measure_load(const worker_context& context,
                                      const std::vector<const schema::sandbox_record*>& sandboxes,
                                      load_sample& last) {
  schema::worker_heartbeat load;
  load.sandbox_ids.reserve(sandboxes.size());
  for (const auto* record : sandboxes) {
    const auto& spec = record->spec;
    load.sandbox_ids.push_back(record->id);
    load.allocated +=
      schema::resources{spec.cpu_request_millis, spec.memory_request_mb, spec.disk_request_mb, 1};
    load.limited += schema::resources{spec.cpu_millis, spec.memory_mb, spec.disk_mb, 1};
  }
  load.used.sandboxes = static_cast<uint32_t>(sandboxes.size());
  load.used.disk_mb = disk_used_mb(context);
  if (context.runtime) {
    if (auto all = context.runtime->stats_all()) {
      load.used.memory_mb = static_cast<uint32_t>(all->memory_bytes >> 20);
      auto now = steady_ns();
      if (last.at_ns != 0 && now > last.at_ns && all->cpu_usage_ns >= last.cpu_usage_ns)
        load.used.cpu_millis = static_cast<uint32_t>((all->cpu_usage_ns - last.cpu_usage_ns) * 1000
                                                     / static_cast<uint64_t>(now - last.at_ns));
      last = load_sample{all->cpu_usage_ns, now};
    }
  }
  if (auto pressure = probe_memory_pressure(context.options.pressure)) {
    load.memory_pressure = pressure->under;
    load.pressure_reason = pressure->reason;
  }
  double averages[1] = {0};
  if (::getloadavg(averages, 1) == 1)
    load.load_milli = static_cast<uint32_t>(averages[0] * 1000);
  return load;
}

} // namespace airlock::worker
