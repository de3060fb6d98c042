#pragma once
// The CAF actor system configuration every airlock process starts from.

#include <caf/actor_system_config.hpp>
#include <caf/io/middleman.hpp>

#include <cstddef>

namespace airlock::actors {

struct actor_system_options {
  /// Scheduler threads. Default: 0 (one per core).
  size_t scheduler_threads = 0;
};

/// Registers airlock's message types and its error category with CAF.
class system_config : public caf::actor_system_config {
public:
  explicit system_config(const actor_system_options& options = {});
};

/// Switches `config` to CAF's deterministic test scheduler: nothing runs
/// until a test drives it, and time moves only when the test advances it.
void use_test_scheduler(caf::actor_system_config& config);

/// Loads CAF's network layer (caf::io::middleman) into `config`, so that the
/// system can publish actors to and reach actors on other hosts (the cluster
/// transport: scheduler/cluster_listener.hpp, worker/cluster_join.hpp). Call
/// before constructing the actor system. Inline so that only binaries and
/// libraries that call it link caf::io.
inline void use_middleman(caf::actor_system_config& config) {
  config.load<caf::io::middleman>();
}

} // namespace airlock::actors
