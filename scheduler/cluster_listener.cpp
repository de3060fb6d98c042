#include "scheduler/cluster_listener.hpp"

#include <caf/io/middleman.hpp>
#include <caf/openssl/publish.hpp>

#include "actors/errors.hpp"

namespace airlock::scheduler {

result<uint16_t> publish_scheduler(caf::actor_system& system, actors::scheduler_actor scheduler,
                                   const std::string& host, uint16_t port,
                                   cluster_transport transport) {
  if (host.empty())
    return make_status(errc::invalid_argument, "the cluster listener needs a host to bind");
  if (!scheduler)
    return make_status(errc::invalid_argument, "no scheduler to publish");
  if (!system.has_middleman())
    return make_status(errc::invalid_argument,
                       "the actor system has no middleman: configure it with use_middleman");
  // Reusing the address lets a restarted control plane bind its port again
  // while connections of its previous run linger in TIME_WAIT.
  if (transport == cluster_transport::tls && !system.has_openssl_manager())
    return make_status(errc::invalid_argument,
                       "the actor system has no TLS module: load caf::openssl::manager");
  // Only ever one of the two: anything published through the plain
  // middleman would be reachable without a certificate.
  auto bound = transport == cluster_transport::tls
                 ? caf::openssl::publish(scheduler, port, host.c_str(), true)
                 : system.middleman().publish(std::move(scheduler), port, host.c_str(), true);
  if (!bound)
    return make_status(errc::unavailable, "cannot listen for workers on " + host + ":"
                                            + std::to_string(port) + ": "
                                            + system.render(bound.error()));
  return *bound;
}

} // namespace airlock::scheduler
