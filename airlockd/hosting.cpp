#include "airlockd/hosting.hpp"

#include <atomic>

#include "airlockd/admin_key.hpp"

namespace airlock::airlockd {

std::string url_of(const gateway::endpoint& bound, bool tls) {
  return (tls ? "https://" : "http://") + gateway::to_string(gateway::dialable(bound));
}

status announce_admin_key(storage::kv_store& store, const std::string& url,
                          const std::string& cli_config, std::ostream& out,
                          const actors::logger& log) {
  auto created = bootstrap_admin_key(store, cli_config, url, system_wall_clock{}.now_ms());
  if (!created)
    return make_status(created.code(),
                       "cannot create the admin API key: " + created.error().message);
  if (!created->has_value())
    return status::ok();
  out << "admin key: " << **created << std::endl;
  // The log gets where the key went, never the key.
  log.info("created the admin API key", {{"cli_config", cli_config}});
  return status::ok();
}

std::shared_ptr<const gateway::token_verifier> verifier_for(const std::string& public_key,
                                                            const actors::logger& log,
                                                            const std::string& audience) {
  gateway::token_verifier_options options;
  options.audience = audience;
  auto verifier = gateway::token_verifier::from_public_key(public_key, options);
  if (!verifier) {
    log.error("the control plane sent an unusable token key; data-plane tokens will be refused",
              {{"error", verifier.error().message}});
    return nullptr;
  }
  return std::make_shared<const gateway::token_verifier>(std::move(*verifier));
}

worker::cluster_join_actor
join_cluster(caf::actor_system& system, const gateway::endpoint& control,
             schema::worker_registration registration, worker_host& worker, const wall_clock& clock,
             std::shared_ptr<verifier_slot> verifier, std::shared_ptr<std::promise<void>> joined,
             const actors::logger& log, actors::scheduler_actor local_scheduler,
             caf::io::middleman_actor connector, std::shared_ptr<member_credentials> credentials) {
  worker::cluster_join_options options;
  options.host = control.host;
  options.port = control.port;
  worker::cluster_join_deps deps;
  deps.local_scheduler = std::move(local_scheduler);
  deps.connector = std::move(connector);
  if (credentials) {
    deps.certificate = [credentials] { return credentials->certificate(); };
    deps.prove = [credentials](const std::string& message) { return credentials->sign(message); };
  }
  deps.registration = std::move(registration);
  deps.node = worker.node();
  deps.clock = &clock;
  auto first = std::make_shared<std::atomic<bool>>(true);
  deps.on_joined = [verifier, joined, first, log, &worker](const actors::registration_ack& ack) {
    // Tokens minted for other workers' sandboxes are refused here.
    verifier->set(verifier_for(ack.token_public_key, log, ack.worker_id));
    worker.joined(ack);
    log.info("joined the control plane", {{"worker_id", ack.worker_id}});
    if (first->exchange(false) && joined)
      joined->set_value();
  };
  auto join = worker::spawn_cluster_join(system, std::move(options), std::move(deps));
  worker.set_join(join);
  return join;
}

} // namespace airlock::airlockd
