#pragma once
// The worker's own messages (worker, sandbox and node actors) are local to
// one host: the node actor translates them to the cluster protocol before
// anything leaves it. They are values all the same, with a type-ID block of
// their own after airlock's (actors/type_ids.hpp).

#include <caf/actor_system_config.hpp>

namespace airlock::worker {

/// Announces the worker's message types to `config` (before its actor system starts).
void add_worker_message_types(caf::actor_system_config& config);

} // namespace airlock::worker
