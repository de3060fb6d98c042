#pragma once
// The control plane's end of the cluster transport: the scheduler actor,
// published on a TCP port through CAF's middleman, is the one actor workers
// reach (worker/cluster_join.hpp). Everything else a worker talks to (node
// actors) it hands over itself in sc_register.

#include <caf/actor_system.hpp>

#include <cstdint>
#include <string>

#include "actors/cluster_protocol.hpp"
#include "schema/errc.hpp"

namespace airlock::scheduler {

/// How the scheduler is published.
enum class cluster_transport {
  plain, ///< CAF's middleman: tests of the actors' protocol only
  tls,   ///< caf::openssl: mutual TLS with the system's certificate files
};

/// Publishes `scheduler` on host:port (port 0: any free port) and returns the
/// bound port. Precondition: `system` was configured with
/// actors::use_middleman (and, for tls, with the TLS module and its
/// certificate, key and CA files). Blocks the calling thread until the socket is bound:
/// call it from setup code, never from an actor. Errors: invalid_argument
/// (empty host, invalid handle), unavailable (the address is in use or cannot
/// be bound).
result<uint16_t> publish_scheduler(caf::actor_system& system, actors::scheduler_actor scheduler,
                                   const std::string& host, uint16_t port,
                                   cluster_transport transport = cluster_transport::plain);

} // namespace airlock::scheduler
