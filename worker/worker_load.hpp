#pragma once
// What a worker's heartbeat reports about its load: the sums of its
// sandboxes' requests and limits, what they use, and the host's memory
// pressure. Internal to the worker actor.

#include <cstdint>
#include <vector>

#include "schema/sandbox.hpp"
#include "schema/worker.hpp"
#include "worker/worker_actor.hpp"

namespace airlock::worker {

/// The CPU counter of the previous measurement, for a rate.
struct load_sample {
  uint64_t cpu_usage_ns = 0;
  int64_t at_ns = 0; ///< steady clock; 0 before the first measurement
};

/// `request` with each request left at 0 set from `defaults`, capped at its
/// limit (a request never exceeds what the sandbox may use).
create_sandbox_request with_default_requests(create_sandbox_request request,
                                             const schema::resources& defaults);

/// The heartbeat's load fields (worker_id, sequence and sent_at_ms are the
/// join actor's). `last` is updated for the next CPU rate.
schema::worker_heartbeat measure_load(const worker_context& context,
                                      const std::vector<const schema::sandbox_record*>& sandboxes,
                                      load_sample& last);

} // namespace airlock::worker
