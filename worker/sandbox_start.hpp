#pragma once
// The blocking part of a sandbox's create, run by the worker on a helper
// thread: its root, the runtime's start, the egress proxy's entry and the
// guest's hello.

#include "worker/sandbox_actor.hpp"
#include "worker/worker_actor.hpp"

namespace airlock::worker {

/// Starts the sandbox `req` names and returns its parts for a sandbox actor.
/// Blocks for the whole start; undoes what it did on failure.
result<sandbox_parts> start_sandbox(const worker_context& ctx, const create_sandbox_request& req);

} // namespace airlock::worker
