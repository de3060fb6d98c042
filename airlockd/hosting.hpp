#pragma once
// Pieces serve, control and worker share when they wire the platform
// together: values set once the listener is bound or the worker has joined,
// read by HTTP handlers on I/O threads; joining the cluster.

#include <caf/actor_system.hpp>
#include <caf/io/middleman_actor.hpp>

#include <future>
#include <memory>
#include <mutex>
#include <ostream>
#include <string>

#include "actors/cluster_protocol.hpp"
#include "actors/log.hpp"
#include "airlockd/worker_host.hpp"
#include "airlockd/worker_identity.hpp"
#include "gateway/attach_token.hpp"
#include "gateway/data_routes.hpp"
#include "gateway/endpoint.hpp"
#include "storage/kv_store.hpp"
#include "worker/cluster_join.hpp"

namespace airlock::airlockd {

/// A value written once set-up knows it and read by handlers. Thread-safe.
template <class T>
class late_value {
public:
  void set(T value) {
    std::lock_guard guard(mutex_);
    value_ = std::move(value);
  }
  T get() const {
    std::lock_guard guard(mutex_);
    return value_;
  }

private:
  mutable std::mutex mutex_;
  T value_{};
};

using verifier_slot = late_value<std::shared_ptr<const gateway::token_verifier>>;

/// "http://HOST:PORT" (or https) a client on this host dials to reach `bound`.
std::string url_of(const gateway::endpoint& bound, bool tls = false);

/// First start only: creates the admin key, writes the CLI config at
/// `cli_config` and prints "admin key: ..." on a line of its own. Later
/// starts find a key and print nothing.
status announce_admin_key(storage::kv_store& store, const std::string& url,
                          const std::string& cli_config, std::ostream& out,
                          const actors::logger& log);

/// The verifier for a control plane's public key, refusing tokens for
/// another worker than `audience` (empty: any worker; the control plane's own
/// listener); logs and returns null on a malformed key.
std::shared_ptr<const gateway::token_verifier> verifier_for(const std::string& public_key,
                                                            const actors::logger& log,
                                                            const std::string& audience = {});

/// Starts the join actor for `registration` and the worker's node towards
/// `control`, or towards `local_scheduler` in this process when it is set
/// (serve: no cluster port at all); every (re)join refreshes `verifier` and
/// the worker's egress CA from the ack. `joined` is set on the first.
/// `connector` makes the connection (the TLS module's actor; null: plain);
/// `credentials` give each registration the current certificate and sign
/// its proof (worker::cluster_join_deps).
worker::cluster_join_actor
join_cluster(caf::actor_system& system, const gateway::endpoint& control,
             schema::worker_registration registration, worker_host& worker, const wall_clock& clock,
             std::shared_ptr<verifier_slot> verifier, std::shared_ptr<std::promise<void>> joined,
             const actors::logger& log, actors::scheduler_actor local_scheduler = {},
             caf::io::middleman_actor connector = {},
             std::shared_ptr<member_credentials> credentials = nullptr);

} // namespace airlock::airlockd
