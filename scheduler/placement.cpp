#include "scheduler/placement.hpp"

#include <algorithm>

namespace airlock::scheduler {

namespace {

uint32_t free_of(uint32_t capacity, uint32_t allocated) {
  return capacity > allocated ? capacity - allocated : 0;
}

double share_left(uint32_t capacity, uint32_t allocated, uint32_t need) {
  if (capacity == 0)
    return 0.0;
  auto left = static_cast<double>(free_of(capacity, allocated)) - need;
  return left / capacity;
}

std::string describe(const schema::resources& r) {
  return std::to_string(r.cpu_millis) + " mCPU, " + std::to_string(r.memory_mb) + " MiB memory, "
         + std::to_string(r.disk_mb) + " MiB disk";
}

uint32_t or_default(uint32_t value, uint32_t fallback) { return value != 0 ? value : fallback; }

uint64_t memory_limit_bound(const worker_view& w) {
  return uint64_t{w.capacity.memory_mb} * w.memory_limit_percent / 100;
}

/// The most of each resource that any one schedulable worker has free.
schema::resources most_free(const std::vector<worker_view>& workers) {
  schema::resources best;
  for (const auto& w : workers) {
    if (!w.schedulable || w.memory_pressure)
      continue;
    const auto& c = w.capacity;
    const auto& a = w.allocated;
    best.cpu_millis = std::max(best.cpu_millis, free_of(c.cpu_millis, a.cpu_millis));
    best.memory_mb = std::max(best.memory_mb, free_of(c.memory_mb, a.memory_mb));
    best.disk_mb = std::max(best.disk_mb, free_of(c.disk_mb, a.disk_mb));
    best.sandboxes = std::max(best.sandboxes, free_of(c.sandboxes, a.sandboxes));
  }
  return best;
}

/// Why nothing fits, for the refusal: what was asked and what exists.
std::string refusal(const std::vector<worker_view>& workers, const placement_request& request) {
  std::string message = "no worker has room for a sandbox requesting " + describe(request.requests)
                        + " (0: the worker's default) with limits of " + describe(request.need);
  if (workers.empty())
    return message + "; no worker is registered: start one with airlockd worker";
  if (!request.snapshot_worker.empty()) {
    auto holder = std::find_if(workers.begin(), workers.end(), [&](const worker_view& w) {
      return w.id == request.snapshot_worker;
    });
    if (holder == workers.end() || !holder->schedulable)
      return message + "; the snapshot or template version it starts from is on worker "
             + request.snapshot_worker
             + ", which is not ready, and neither moves between workers yet: retry once it is "
               "back";
    return message + "; only worker " + request.snapshot_worker
           + " holds the snapshot or template version it starts from, and it has "
           + describe(most_free({*holder})) + " free: free capacity on it and retry";
  }
  const bool runtime_offered =
    std::any_of(workers.begin(), workers.end(),
                [&](const worker_view& w) { return w.schedulable && offers_runtime(w, request); });
  if (!runtime_offered)
    return message + "; no ready worker offers the "
           + (request.runtime.empty() ? std::string("namespace") : request.runtime)
           + " runtime: start a worker with it (airlockd --microvm on) or create the sandbox "
             "with another runtime";
  size_t pressured = 0;
  size_t over_limit_bound = 0;
  for (const auto& w : workers) {
    if (!w.schedulable)
      continue;
    if (w.memory_pressure)
      ++pressured;
    else if (w.memory_limit_percent != 0
             && uint64_t{w.limited.memory_mb} + request.need.memory_mb > memory_limit_bound(w))
      ++over_limit_bound;
  }
  auto best = most_free(workers);
  message += "; the most any worker has free is " + describe(best) + " and "
             + std::to_string(best.sandboxes) + " sandbox slots";
  if (pressured != 0)
    message += "; " + std::to_string(pressured) + " worker(s) under memory pressure";
  if (over_limit_bound != 0)
    message += "; " + std::to_string(over_limit_bound)
               + " worker(s) at their bound on the sum of memory limits (ask for a lower "
                 "memory_mb)";
  return message + ": retry later, free capacity or add a worker";
}

} // namespace

schema::resources effective_request(const worker_view& worker, const schema::resources& requests) {
  const auto& d = worker.default_request;
  return schema::resources{or_default(requests.cpu_millis, d.cpu_millis),
                           or_default(requests.memory_mb, d.memory_mb),
                           or_default(requests.disk_mb, d.disk_mb), 1};
}

bool offers_runtime(const worker_view& worker, const placement_request& request) {
  const std::string wanted = request.runtime.empty() ? "namespace" : request.runtime;
  if (worker.runtimes.empty())
    return wanted == "namespace";
  return std::find(worker.runtimes.begin(), worker.runtimes.end(), wanted) != worker.runtimes.end();
}

bool fits(const worker_view& worker, const placement_request& request) {
  const auto& c = worker.capacity;
  const auto& a = worker.allocated;
  auto need = effective_request(worker, request.requests);
  bool within_limit_bound =
    worker.memory_limit_percent == 0
    || uint64_t{worker.limited.memory_mb} + request.need.memory_mb <= memory_limit_bound(worker);
  bool holds_snapshot = request.snapshot_worker.empty() || request.snapshot_worker == worker.id;
  return holds_snapshot && offers_runtime(worker, request) && worker.schedulable
         && !worker.memory_pressure && within_limit_bound
         && free_of(c.cpu_millis, a.cpu_millis) >= need.cpu_millis
         && free_of(c.memory_mb, a.memory_mb) >= need.memory_mb
         && free_of(c.disk_mb, a.disk_mb) >= need.disk_mb && free_of(c.sandboxes, a.sandboxes) >= 1;
}

double score(const worker_view& worker, const placement_request& request,
             const placement_options& options) {
  const auto& c = worker.capacity;
  const auto& a = worker.allocated;
  auto n = effective_request(worker, request.requests);
  double scarcest = std::min({share_left(c.cpu_millis, a.cpu_millis, n.cpu_millis),
                              share_left(c.memory_mb, a.memory_mb, n.memory_mb),
                              share_left(c.disk_mb, a.disk_mb, n.disk_mb),
                              share_left(c.sandboxes, a.sandboxes, 1)});
  bool local = std::find(worker.templates.begin(), worker.templates.end(), request.template_name)
               != worker.templates.end();
  return scarcest + (local ? options.template_locality_bonus : 0.0);
}

result<std::string> place(const std::vector<worker_view>& workers, const placement_request& request,
                          const placement_options& options, entropy_source& entropy) {
  std::vector<const worker_view*> candidates;
  for (const auto& worker : workers)
    if (fits(worker, request))
      candidates.push_back(&worker);
  if (candidates.empty())
    return make_status(errc::resource_exhausted, refusal(workers, request));
  // Partial Fisher-Yates: the first K entries become a uniform sample.
  auto k =
    options.sample_k == 0 ? candidates.size() : std::min(options.sample_k, candidates.size());
  for (size_t i = 0; i < k; ++i) {
    auto j = i + entropy.next_u64() % (candidates.size() - i);
    std::swap(candidates[i], candidates[j]);
  }
  auto best = std::max_element(candidates.begin(), candidates.begin() + static_cast<long>(k),
                               [&](const worker_view* x, const worker_view* y) {
                                 return score(*x, request, options) < score(*y, request, options);
                               });
  return (*best)->id;
}

} // namespace airlock::scheduler
