#pragma once
// The sandbox-running half of airlockd (serve and worker): the namespace
// runtime, the root filesystem driver, the worker-local store, the worker
// actor (after cleaning up what an earlier run left) and the node actor the
// control plane calls. Start and stop order lives here.

#include <caf/actor_system.hpp>

#include <memory>
#include <string>
#include <vector>

#include "actors/cluster_protocol.hpp"
#include "actors/log.hpp"
#include "airlockd/options.hpp"
#include "metrics/metrics.hpp"
#include "schema/errc.hpp"
#include "schema/worker.hpp"
#include "storage/kv_store.hpp"
#include "worker/cluster_join.hpp"
#include "worker/egress/firewall_log.hpp"
#include "worker/egress_binding.hpp"
#include "worker/egress_bridge.hpp"
#include "worker/node_actor.hpp"
#include "worker/runtime/namespace_runtime.hpp"
#include "worker/worker_actor.hpp"

namespace airlock::airlockd {

class worker_host {
public:
  explicit worker_host(const actors::logger& log) : log_(log.with_component("worker")) {}
  ~worker_host(); ///< stops if still running
  worker_host(const worker_host&) = delete;
  worker_host& operator=(const worker_host&) = delete;

  /// Opens runtime and rootfs under `data_dir`, spawns the worker on `store`
  /// (worker-local; outlives stop()), cleans up an earlier run's sandboxes
  /// and spawns the node. Blocking: call from set-up code.
  status start(caf::actor_system& system, const std::string& data_dir,
               const sandbox_host_options& options, storage::kv_store& store);

  /// Destroys every sandbox (they cannot outlive the worker process: the
  /// guest channel closes), stops the actors and unmounts the image the
  /// root filesystems live in (and frees its loop device). Idempotent.
  void stop();

  const actors::node_actor& node() const noexcept { return node_; }

  /// The join actor, once spawned: the egress proxy's audit records and
  /// credential fetches go through it.
  void set_join(const worker::cluster_join_actor& join);

  /// The control plane accepted this worker: the egress proxy gets the
  /// CA chain issued for its key. Called on the join actor; does not block.
  void joined(const actors::registration_ack& ack);

  /// The egress proxy's proxy and DNS ports (0 without an egress proxy).
  uint16_t egress_proxy_port() const noexcept;
  uint16_t egress_dns_port() const noexcept;

  /// Who this worker is: a stable id kept in the worker store, `name`, the
  /// host's capacity and `data_url`.
  result<schema::worker_registration> registration(const std::string& name,
                                                   const std::string& data_url) const;

  /// Makes `id` (the name in the worker's certificate) the id kept in the
  /// worker store; logs when it replaces another. Call after start.
  status adopt_worker_id(const std::string& id);

private:
  /// Starts the egress proxy (when enabled) and makes this worker's CA key.
  status start_egress(caf::actor_system& system, const sandbox_host_options& options);
  /// Turns the firewall's logged drops into audit records (best effort).
  void start_firewall_log(const sandbox_host_options& options);
  /// Opens the microvm runtime into `context` when options.microvm asks for
  /// it (blocking: builds or finds the guest, probes the accelerator).
  /// Fails only when it is "on" and this host cannot run microVMs.
  /// `network`: the namespace runtime's addressing, tools and slot table,
  /// which VMs with network share.
  status start_microvm(const sandbox_host_options& options, const std::string& guest_binary,
                       const worker::namespace_runtime_options& network,
                       worker::worker_context& context);

  actors::logger log_;
  caf::actor_system* system_ = nullptr;
  std::string data_dir_;
  storage::kv_store* store_ = nullptr;
  sandbox_host_options options_;
  worker::worker_actor worker_;
  actors::node_actor node_;
  std::shared_ptr<worker::rootfs_driver> rootfs_;
  std::shared_ptr<worker::cluster_egress_bridge> egress_bridge_;
  std::shared_ptr<worker::egress::egress_proxy> egress_proxy_;
  std::shared_ptr<worker::egress_binding> egress_;
  std::unique_ptr<worker::egress::firewall_log> firewall_log_;
  uint16_t drop_log_group_ = 0; ///< 0: the firewall does not log its drops
  /// What registration reports: the sandboxes' filesystem and the runtime's
  /// real bound on sandboxes at once.
  std::string sandbox_filesystem_;
  uint32_t runtime_slots_ = 0;
  /// The runtimes registration offers: namespace, and microvm when it opened.
  std::vector<std::string> runtimes_ = {"namespace"};
  /// This worker's egress CA key: stays in memory, never in a file or a sandbox.
  std::string egress_key_pem_;
};

} // namespace airlock::airlockd
