#pragma once
// node_actor: the worker host's side of the cluster protocol
// (actors/cluster_protocol.hpp). It turns the control plane's lifecycle verbs
// (nd_*) into calls on the worker_actor, and the data-plane calls (dp_*)
// into calls on the sandbox actors, and it adds what neither of those knows:
// - the sandbox's environment from its record, the default of every process;
// - templates built on demand (the built-in `minimal` and `base`), one build
//   per name at a time, off the actor;
// - users by name (from the sandbox's /etc/passwd) or uid;
// - Unix-ms times (the sandbox actor keeps actor-clock times);
// - the API's names for file types and its error codes.
// See docs/worker.md.

#include <caf/actor_system.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "actors/clock.hpp"
#include "actors/cluster_protocol.hpp"
#include "metrics/metrics.hpp"
#include "worker/process_identity.hpp"
#include "worker/rootfs/rootfs_driver.hpp"
#include "worker/rootfs/templates.hpp"
#include "worker/worker_actor.hpp"

namespace airlock::worker {

struct node_options {
  /// Bound on a forwarded call that does not wait for anything (pause,
  /// resume, list, stdin, signal, resize, process status, exec). Default: 30000.
  uint32_t call_timeout_ms = 30'000;
  /// Bound on a create once its template is ready (rootfs snapshot, runtime,
  /// guest handshake). Default: 120000.
  uint32_t create_timeout_ms = 120'000;
  /// Bound on a destroy. Default: 60000.
  uint32_t destroy_timeout_ms = 60'000;
  /// Bound on one file operation (large files move at the guest's pace; see
  /// sandbox_actor_options::file_rate_bytes_per_s_min). Default: 300000.
  uint32_t file_timeout_ms = 300'000;
  /// PATH of every process unless the sandbox's or the process's env sets it.
  /// Default: /usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin.
  std::string default_path = default_process_path;
  /// Largest /etc/passwd read to resolve a user name. Default: 1 MiB.
  uint64_t passwd_bytes_max = uint64_t{1} << 20;
  /// Creates waiting for template builds at once; more fail with
  /// resource_exhausted. Default: 1024.
  size_t waiting_creates_max = 1024;
  /// Largest upload (a template's archive) spooled on this worker. Default:
  /// 8 GiB.
  uint64_t spool_bytes_max = uint64_t{8} << 30;
};

/// What the node is given at spawn.
struct node_context {
  /// This host's worker, already recovered (wk_recover) by the caller. The
  /// node does not own it: it neither links to it nor stops it.
  worker_actor worker;
  /// The driver the worker creates sandboxes from; templates are built into
  /// it on a helper thread (thread-safe, like the worker's).
  std::shared_ptr<rootfs_driver> rootfs;
  /// How `minimal` and `base` are built; a build
  /// is bounded by its own debootstrap_timeout_ms.
  template_options templates;
  /// The egress proxy's sandboxes (PATCH of egress reaches it through the
  /// node); null: no egress.
  std::shared_ptr<egress_binding> egress;
  /// Unix ms for process times.
  std::shared_ptr<const wall_clock> clock;
  /// Adds what the node does not see itself (the egress proxy's counters)
  /// to a scrape (nd_metrics); called on the node's thread, must not block.
  /// May be empty.
  std::function<void(metrics::metrics_registry&)> host_figures;
  node_options options;
};

/// Spawns the node actor. Its messages and errors are documented on
/// actors::node_actor. It keeps, per sandbox it created, the record's env
/// (merged under every exec_spec.env, with PATH defaulting to
/// options.default_path) and forgets it on destroy; after a restart the
/// worker has cleaned up every earlier sandbox (wk_recover), so there is
/// nothing to re-learn.
actors::node_actor spawn_node(caf::actor_system& system, node_context context);

} // namespace airlock::worker
