#pragma once
// The control plane's actors beside the operation engine: the sandbox
// registry, the API-key actor, the scheduler (published for workers when a cluster address is
// given), the lifecycle procedures, the token signer and the metrics. It
// also adds the control routes to a listener's table.

#include <caf/actor_system.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "actors/api_key_actor.hpp"
#include "actors/audit_actor.hpp"
#include "actors/clock.hpp"
#include "actors/cluster_protocol.hpp"
#include "actors/credential_actor.hpp"
#include "actors/join_tokens.hpp"
#include "actors/lifecycle_policy.hpp"
#include "actors/log.hpp"
#include "actors/operation_engine.hpp"
#include "actors/pool_actor.hpp"
#include "actors/reconciler.hpp"
#include "actors/sandbox_registry.hpp"
#include "airlockd/certificate_authorities.hpp"
#include "airlockd/options.hpp"
#include "gateway/api_routes.hpp"
#include "gateway/attach_token.hpp"
#include "gateway/e2b_token_book.hpp"
#include "gateway/endpoint.hpp"
#include "gateway/http_server.hpp"
#include "gateway/router.hpp"
#include "metrics/metrics.hpp"
#include "schema/errc.hpp"
#include "storage/kv_store.hpp"

namespace airlock::airlockd {

/// The control plane's listener options: `http` plus, with an E2B domain,
/// the rewrite that serves its host-name envd addresses.
gateway::http_server_options listener_options(gateway::http_server_options http,
                                              const control_settings& settings);

class control_plane {
public:
  explicit control_plane(const actors::logger& log) : log_(log.with_component("control")) {}
  ~control_plane(); ///< stops if still running
  control_plane(const control_plane&) = delete;
  control_plane& operator=(const control_plane&) = delete;

  /// The audit log's retention and the templates' default egress. Set
  /// before start.
  void configure(const control_settings& settings);

  /// `serve`: the local worker, whose own figures /metrics appends (asked
  /// with nd_metrics on each scrape). Set before add_routes.
  void set_local_node(const actors::node_actor& node) { local_node_ = node; }

  /// Loads (or creates) the token key under `data_dir`/keys, the
  /// credentials' master key (`data_dir`/credentials.key, 0600) and the
  /// egress root CA (`data_dir`/egress-ca.key and .crt); spawns the
  /// registry over `store`, the audit log, the credential service, the
  /// scheduler (which issues each worker's egress intermediate) and the
  /// procedures. With `cluster_listen`, publishes the scheduler there (the
  /// system must have the middleman). Blocking: call from set-up code.
  /// With `authorities` the scheduler is published over mutual TLS (the
  /// system must have been configured with their files: cluster_tls_files)
  /// and workers are admitted with join tokens; without, in plain CAF (the
  /// actors' protocol tests only).
  status start(caf::actor_system& system, storage::kv_store& store, const std::string& data_dir,
               const std::optional<gateway::endpoint>& cluster_listen,
               const cluster_authorities* authorities = nullptr);

  /// Exits every actor it spawned. Idempotent.
  void stop();

  /// The procedures for the engine (valid after start).
  const actors::procedure_table& procedures() const noexcept { return procedures_; }

  /// The engine's on_terminal hook: operation metrics, and a lifecycle
  /// audit record per ended operation (valid after start; thread-safe).
  std::function<void(const schema::operation_record&)> terminal_hook();

  /// Adds the control routes (the engine must be running by the time the
  /// first request arrives).
  void add_routes(gateway::route_table& routes, const actors::operation_engine_actor& engine);

  /// Adds the E2B front (/e2b/), made of every route in `routes` so far:
  /// call it last, after the data plane's routes (its metrics read usage).
  void add_e2b_routes(gateway::route_table& routes);

  /// Starts the idle and lifetime policy (actors/lifecycle_policy.hpp) and
  /// the warm pools (actors/pool_actor.hpp), which start operations through
  /// `engine`. Call once the engine runs, before add_routes.
  void start_policies(const actors::operation_engine_actor& engine);

  /// Runs a reconciliation pass now (e.g. once a local worker has joined).
  void reconcile_now();

  /// The bound cluster port (0 when not published).
  uint16_t cluster_port() const noexcept { return cluster_port_; }

  const actors::sandbox_registry_actor& registry() const noexcept { return registry_; }
  const actors::api_key_actor& api_keys() const noexcept { return api_keys_; }
  const actors::scheduler_actor& scheduler() const noexcept { return scheduler_; }
  const gateway::token_signer& signer() const { return *signer_; }
  /// The envd tokens the E2B front hands out; the data routes of the same
  /// listener find signed file URLs' sandboxes with them.
  std::shared_ptr<gateway::envd_token_book> envd_tokens() const { return envd_tokens_; }
  const actors::audit_actor& audit() const noexcept { return audit_; }
  const actors::credential_actor& credentials() const noexcept { return credentials_; }
  metrics::metrics_registry& metrics() noexcept { return metrics_; }

private:
  actors::logger log_;
  caf::actor_system* system_ = nullptr;
  system_wall_clock clock_;
  system_entropy entropy_;
  std::optional<gateway::token_signer> signer_;
  std::shared_ptr<gateway::envd_token_book> envd_tokens_ =
    std::make_shared<gateway::envd_token_book>();
  metrics::metrics_registry metrics_;
  actors::sandbox_registry_actor registry_;
  actors::api_key_actor api_keys_;
  actors::scheduler_actor scheduler_;
  actors::procedure_table procedures_;
  actors::reconciler_actor reconciler_;
  actors::lifecycle_policy_actor policy_;
  actors::pool_actor pools_;
  actors::audit_options audit_options_;
  std::map<std::string, schema::egress_policy> template_egress_;
  std::string e2b_domain_;
  std::optional<actors::node_actor> local_node_;
  actors::audit_actor audit_;
  actors::credential_actor credentials_;
  uint16_t cluster_port_ = 0;
  /// With a cluster listener over TLS: join tokens and admission.
  std::unique_ptr<actors::join_token_book> join_tokens_;
  std::unique_ptr<actors::revocation_list> revocations_;
  std::shared_ptr<const gateway::cluster_admission> admission_;
};

} // namespace airlock::airlockd
