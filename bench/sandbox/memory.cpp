// sandbox_bench: host memory per idle sandbox (PSS of its processes, its
// memory cgroup, the kernel's and the worker's share) and MemAvailable.

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "bench/sandbox/cases.hpp"

namespace airlock::sandbox_bench {

namespace {

uint64_t mem_available_kb() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t value = 0;
  std::string unit;
  while (in >> key >> value >> unit)
    if (key == "MemAvailable:")
      return value;
  return 0;
}

/// Slab (SReclaimable + SUnreclaim), page tables and kernel stacks, in KiB.
uint64_t kernel_kb() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t value = 0;
  std::string unit;
  uint64_t total = 0;
  while (in >> key >> value >> unit)
    if (key == "Slab:" || key == "PageTables:" || key == "KernelStack:")
      total += value;
  return total;
}

/// A field of /proc/PID/smaps_rollup ("Pss:", "Anonymous:"), in KiB.
uint64_t rollup_kb(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/smaps_rollup");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field, 0) == 0)
      return std::stoull(line.substr(field.size()));
  return 0;
}

uint64_t pss_kb(pid_t pid) { return rollup_kb(pid, "Pss:"); }

std::vector<pid_t> cgroup_pids(const sandbox_handle& handle) {
  std::vector<pid_t> pids;
  for (const auto& dir : handle.cgroup_paths) {
    std::ifstream in(dir + "/cgroup.procs");
    pid_t pid = 0;
    while (in >> pid)
      pids.push_back(pid);
    if (!pids.empty())
      break;
  }
  return pids;
}

/// The memory cgroup directory of a sandbox (the v1 memory hierarchy, or the
/// v2 directory).
std::string memory_cgroup(const sandbox_handle& handle) {
  for (const auto& dir : handle.cgroup_paths)
    if (dir.find("/memory/") != std::string::npos || dir.find("/memory") == std::string::npos)
      if (std::ifstream(dir + "/memory.stat"))
        return dir;
  return {};
}

/// Sums, in KiB, over sandboxes: the cgroup's charge split into what it is
/// made of. v1: usage_in_bytes = rss + cache (page cache: file pages and
/// shmem/tmpfs) + kmem (slab, stacks, page tables); v2: memory.current with
/// anon, file, shmem, kernel_stack, slab, pagetables.
struct cgroup_breakdown {
  std::map<std::string, uint64_t> kib; ///< field -> KiB summed over sandboxes
  uint64_t kmem_kib = 0;               ///< v1 memory.kmem.usage_in_bytes
};

void add_cgroup_breakdown(const std::string& dir, cgroup_breakdown& into) {
  static const std::set<std::string> fields = {
    "rss",           "cache",       "shmem",         "mapped_file", "active_file",
    "inactive_file", "active_anon", "inactive_anon", "anon",        "file",
    "kernel_stack",  "slab",        "pagetables",    "sock",        "file_mapped"};
  std::ifstream stat(dir + "/memory.stat");
  std::string key;
  uint64_t value = 0;
  while (stat >> key >> value)
    if (fields.count(key) != 0)
      into.kib[key] += value / 1024;
  std::ifstream kmem(dir + "/memory.kmem.usage_in_bytes");
  if (kmem >> value)
    into.kmem_kib += value / 1024;
}

} // namespace

void bench_memory(caf::scoped_actor& self, const worker_actor& worker, host_pieces& host,
                  const bench_options& opt) {
  ::sync();
  const uint64_t before = mem_available_kb();
  const uint64_t kernel_before = kernel_kb();
  const uint64_t worker_before = pss_kb(::getpid());
  std::vector<std::string> ids;
  for (int i = 0; i < opt.idle; ++i) {
    create_sandbox_request request;
    request.id = "idle-" + std::to_string(i);
    request.network = true;
    auto box = ask<sandbox_actor>(self, worker, wk_create_atom::value, request);
    if (!box) {
      std::cerr << "idle create " << i << " failed: " << box.error().message << "\n";
      break;
    }
    ids.push_back(request.id);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(opt.idle_settle_ms));
  ::sync();
  const uint64_t after = mem_available_kb();
  const uint64_t kernel_after = kernel_kb();
  const uint64_t worker_after = pss_kb(::getpid());
  uint64_t pss_total = 0;
  uint64_t anon_total = 0;
  uint64_t cgroup_total = 0;
  cgroup_breakdown breakdown;
  for (const auto& id : ids) {
    auto handle = handle_of(host, id);
    add_cgroup_breakdown(memory_cgroup(handle), breakdown);
    for (pid_t pid : cgroup_pids(handle))
      pss_total += pss_kb(pid), anon_total += rollup_kb(pid, "Anonymous:");
    if (auto stats = host.runtime->stats(id))
      cgroup_total += stats->memory_bytes / 1024;
  }
  const double n = static_cast<double>(std::max<size_t>(ids.size(), 1));
  const double delta_kb = before > after ? static_cast<double>(before - after) : 0;
  std::printf("idle sandboxes           %zu\n", ids.size());
  std::printf("  PSS of processes       %8.1f KiB per sandbox\n",
              static_cast<double>(pss_total) / n);
  std::printf("  anonymous of processes %8.1f KiB per sandbox\n",
              static_cast<double>(anon_total) / n);
  std::printf("  memory cgroup usage    %8.1f KiB per sandbox\n",
              static_cast<double>(cgroup_total) / n);
  for (const auto& [field, kib] : breakdown.kib)
    std::printf("    memory.stat %-14s %8.1f KiB per sandbox\n", field.c_str(),
                static_cast<double>(kib) / n);
  if (breakdown.kmem_kib > 0)
    std::printf("    kmem.usage (v1)        %8.1f KiB per sandbox\n",
                static_cast<double>(breakdown.kmem_kib) / n);
  std::printf("  worker process PSS     %8.1f KiB per sandbox (link thread, client, actor)\n",
              (static_cast<double>(worker_after) - static_cast<double>(worker_before)) / n);
  std::printf("  kernel slab+pt+stacks  %8.1f KiB per sandbox\n",
              (static_cast<double>(kernel_after) - static_cast<double>(kernel_before)) / n);
  std::printf("  MemAvailable delta     %8.1f KiB per sandbox (%.1f MiB total; %llu -> %llu KiB)\n",
              delta_kb / n, delta_kb / 1024, static_cast<unsigned long long>(before),
              static_cast<unsigned long long>(after));
  // Held per sandbox: the PSS of its processes (the guest's text is mapped
  // from the sandbox's own snapshot, a page-cache copy per sandbox, and mapped
  // text is not reclaimed in practice), the kernel's objects for it and the
  // worker's share. MemAvailable moves by more than this with the rest of the
  // host's activity, so its delta is shown but not used.
  const double own_kb = (static_cast<double>(pss_total) + static_cast<double>(kernel_after)
                         - static_cast<double>(kernel_before) + static_cast<double>(worker_after)
                         - static_cast<double>(worker_before))
                        / n;
  if (own_kb > 0) {
    std::printf("  host memory held       %8.1f KiB per sandbox -> ~%.0f idle sandboxes fit in "
                "MemAvailable (%llu MiB)\n",
                own_kb, static_cast<double>(after) / own_kb,
                static_cast<unsigned long long>(after / 1024));
  }
  if (opt.idle_hold_s > 0) {
    std::cout << "holding the idle sandboxes for " << opt.idle_hold_s << " s" << std::endl;
    std::this_thread::sleep_for(std::chrono::seconds(opt.idle_hold_s));
  }
  for (const auto& id : ids)
    (void)ask<bool>(self, worker, wk_destroy_atom::value, id);
}

} // namespace airlock::sandbox_bench
