#pragma once
// sandbox_bench: what its cases share: the flags, timing and percentiles, a
// bounded ask to the worker, fork/exec/wait, and the host they run on (the
// namespace runtime, the btrfs rootfs with `minimal` built from this build's
// guest, and the store).

#include <caf/scoped_actor.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bench/actor_ask.hpp"
#include "schema/errc.hpp"
#include "storage/kv_store.hpp"
#include "worker/rootfs/rootfs_driver.hpp"
#include "worker/runtime/namespace_runtime.hpp"

#ifndef AIRLOCK_GUEST_BINARY
#define AIRLOCK_GUEST_BINARY ""
#endif

namespace airlock::sandbox_bench {

using namespace airlock::worker;
using clock_type = std::chrono::steady_clock;
inline constexpr auto timeout = std::chrono::seconds(60);

struct bench_options {
  std::string data_dir = "/var/tmp/airlock-sandbox-bench";
  std::string guest = AIRLOCK_GUEST_BINARY;
  int creates = 40;
  int execs = 300;
  uint64_t output_mb = 1024;
  int idle = 50;
  int checkpoints = 100;      ///< per measurement of the checkpoint case
  uint32_t cpu_millis = 1000; ///< cpu limit of the throughput sandbox (the default limit)
  uint32_t window_kb = 0;     ///< output window of the throughput run; 0: the guest default
  std::string cases = "create,exec,output,memory,checkpoint"; ///< which measurements run
  int idle_hold_s = 0; ///< keep the idle sandboxes this long after measuring, to inspect them
  /// Wait after the last idle create before measuring: an idle agent releases
  /// its start-up page cache after agent_options::page_cache_trim_ms (1 s).
  int idle_settle_ms = 2000;
};

double ms_since(clock_type::time_point start);

/// "p50 ... p90 ... p99 ... ms (n=...)" of `v` (not empty).
std::string percentiles(std::vector<double> v);

template <class R, class Handle, class... Ts>
result<R> ask(caf::scoped_actor& self, const Handle& dest, Ts&&... xs) {
  return bench::ask_within<R>(self, timeout, dest, std::forward<Ts>(xs)...);
}

/// fork + exec + wait of argv; returns the exit status.
int spawn_wait(const std::vector<std::string>& argv, int stdout_fd = -1);

struct host_pieces {
  std::shared_ptr<namespace_runtime> runtime;
  std::shared_ptr<rootfs_driver> rootfs;
  std::shared_ptr<storage::kv_store> store;
};

/// The runtime, store and rootfs under --data-dir, with `minimal` built (or
/// rebuilt when its agent differs from --guest).
result<host_pieces> open_host(const bench_options& opt);

/// The runtime's handle of sandbox `id` (empty when it has none).
sandbox_handle handle_of(const host_pieces& host, const std::string& id);

} // namespace airlock::sandbox_bench
