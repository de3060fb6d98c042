#pragma once
// sandbox_bench's cases, each against its host-only baseline; each prints
// its own lines (see sandbox_bench.cpp for what each measures).

#include <caf/scoped_actor.hpp>

#include "bench/sandbox/common.hpp"
#include "worker/worker_actor.hpp"

namespace airlock::sandbox_bench {

/// Cold creates to guest-ready through the worker vs bwrap (latency.cpp).
void bench_create(caf::scoped_actor& self, const worker_actor& worker, const bench_options& opt);

/// Exec round trips of `true` through the sandbox actor vs fork+exec+wait on
/// the host, then busybox dd into the sandbox actor's ring (latency.cpp).
void bench_exec(caf::scoped_actor& self, const worker_actor& worker, const bench_options& opt);

/// The guest's output throughput without actors vs the same producers into a
/// pipe this process reads (output.cpp).
void bench_output_direct(host_pieces& host, const bench_options& opt);

/// A checkpoint through the worker vs a bare btrfs snapshot of the same
/// subvolume, idle and under a writer (checkpoint.cpp).
void bench_checkpoint(caf::scoped_actor& self, const worker_actor& worker, host_pieces& host,
                      const bench_options& opt);

/// Host memory per idle sandbox (memory.cpp).
void bench_memory(caf::scoped_actor& self, const worker_actor& worker, host_pieces& host,
                  const bench_options& opt);

} // namespace airlock::sandbox_bench
