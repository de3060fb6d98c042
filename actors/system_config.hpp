#pragma once
// The CAF actor system configuration every airlock process starts from.

#include <caf/actor_system_config.hpp>
#include <caf/io/middleman.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace airlock::actors {

struct actor_system_options {
  /// Scheduler threads; 0: CAF's default (one per core, at least 4). Default: 0.
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

struct middleman_options {
  /// Keep-alive between connected hosts, so that a peer that vanished
  /// without closing its socket is noticed. 0: none. Default: 1000.
  uint32_t heartbeat_interval_ms = 1'000;
  /// A connection that carried nothing (not even a keep-alive) for this long
  /// is closed; monitors of actors behind it receive down messages.
  /// Default: 10000.
  uint32_t connection_timeout_ms = 10'000;
};

/// Loads CAF's network layer (caf::io::middleman) into `config`, so that the
/// system can publish actors to and reach actors on other hosts (the cluster
/// transport: scheduler/cluster_listener.hpp, worker/cluster_join.hpp). Call
/// before constructing the actor system. Inline so that only binaries and
/// libraries that call it link caf::io.
inline void use_middleman(caf::actor_system_config& config, const middleman_options& options = {}) {
  config.load<caf::io::middleman>();
  config.set("middleman.heartbeat-interval",
             caf::timespan{std::chrono::milliseconds(options.heartbeat_interval_ms)});
  config.set("middleman.connection-timeout",
             caf::timespan{std::chrono::milliseconds(options.connection_timeout_ms)});
}

} // namespace airlock::actors
