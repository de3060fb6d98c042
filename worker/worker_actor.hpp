#pragma once
// worker_actor: creates, pauses, resumes, destroys and lists the sandboxes of
// one host, and records them in a worker-local store (keyspace sandboxes:
// sandbox id -> schema::sandbox_record). Each sandbox is served by its own
// sandbox_actor, returned by create and get.
//
// Restart: the guest channel is a socketpair whose host end lives in the
// worker process; when that process (or its sandbox actor) ends, the guest
// sees the channel close, kills what it started and exits, which ends the
// sandbox. A new worker therefore cannot re-attach to an earlier run's
// processes: `recover` (call it once before the first create) ends what is
// left of them. It keeps the root filesystem of every sandbox the store
// recorded as running, paused or stopped (released), recorded as stopped, so
// that a create with `reuse_root` brings the sandbox back with its files;
// everything else the store, the runtime's state directory or the rootfs
// driver still knows about is deleted. See docs/worker.md.

#include <caf/atom.hpp>
#include <caf/typed_actor.hpp>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "actors/cluster_protocol.hpp" // inspect() of egress_policy
#include "actors/inspect_fields.hpp"
#include "schema/sandbox.hpp"
#include "schema/unique_fd.hpp"
#include "storage/kv_store.hpp"
#include "worker/egress_binding.hpp"
#include "worker/host_capacity.hpp"
#include "worker/rootfs/rootfs_driver.hpp"
#include "worker/runtime/sandbox_runtime.hpp"
#include "worker/sandbox_actor.hpp"

namespace airlock::worker {

using wk_create_atom = caf::atom_constant<caf::atom("wkcreate")>;
using wk_get_atom = caf::atom_constant<caf::atom("wkget")>;
using wk_pause_atom = caf::atom_constant<caf::atom("wkpause")>;
using wk_resume_atom = caf::atom_constant<caf::atom("wkresume")>;
using wk_destroy_atom = caf::atom_constant<caf::atom("wkdestroy")>;
using wk_list_atom = caf::atom_constant<caf::atom("wklist")>;
using wk_recover_atom = caf::atom_constant<caf::atom("wkrecover")>;
using wk_load_atom = caf::atom_constant<caf::atom("wkload")>;
using wk_ckpt_atom = caf::atom_constant<caf::atom("wkckpt")>;
using wk_ckptdel_atom = caf::atom_constant<caf::atom("wkckptdel")>;
using wk_ckpts_atom = caf::atom_constant<caf::atom("wkckpts")>;
using wk_release_atom = caf::atom_constant<caf::atom("wkrelease")>;
using wk_claim_atom = caf::atom_constant<caf::atom("wkclaim")>;
// Internal to the worker actor.
using wk_created_atom = caf::atom_constant<caf::atom("wkcreated")>;
using wk_recovered_atom = caf::atom_constant<caf::atom("wkrecovd")>;
using wk_jobdone_atom = caf::atom_constant<caf::atom("wkjobdone")>;

struct worker_options {
  /// This worker's id, stored in every sandbox record. Default: "local".
  std::string worker_id = "local";
  /// Bound on the guest's hello after the sandbox's init started. Default: 5000.
  int guest_handshake_timeout_ms = 5000;
  /// The same for a microvm sandbox, whose guest boots a kernel first (seconds
  /// under TCG on a busy host); below the control plane's create timeout.
  /// Default: 45000.
  int microvm_handshake_timeout_ms = 45'000;
  /// Bound on a pause or resume forwarded to a sandbox actor. Default: 15000.
  uint32_t freeze_timeout_ms = 15'000;
  /// Bound on a destroy forwarded to a sandbox actor (closing the channel,
  /// runtime destroy, rootfs delete). Default: 30000.
  uint32_t destroy_timeout_ms = 30'000;
  /// Sandboxes at once on this worker. Default: 256.
  size_t sandboxes_max = 256;
  /// Options of every sandbox actor. Default: see sandbox_actor_options.
  sandbox_actor_options sandbox;
  /// What a sandbox that names no request reserves (each field capped at the
  /// sandbox's limit; `sandboxes` unused). Default: see host_options.hpp's
  /// reasoning in docs/capacity.md; 0 here leaves requests unset.
  schema::resources default_request;
  /// When this host counts as under memory pressure: creates are refused and
  /// heartbeats say so. Default: see pressure_options.
  pressure_options pressure;
  /// The guest's argv inside the sandbox. Default: /sbin/airlock-guest --fd 3.
  std::vector<std::string> guest_argv = {"/sbin/airlock-guest", "--fd", "3"};
};

/// What the worker is given at spawn. All three are shared with the sandbox
/// actors and their helper threads (each is thread-safe).
/// The making of VM bases: a mutex per base name, made on first use and kept
/// for the worker's life (one per shape: a handful), and how many VMs were
/// booted to make one.
class vm_base_makers {
public:
  std::shared_ptr<std::mutex> lock_for(const std::string& name) {
    std::lock_guard<std::mutex> guard(mutex_);
    auto& slot = by_name_[name];
    if (!slot)
      slot = std::make_shared<std::mutex>();
    return slot;
  }
  void count_boot() noexcept { boots_.fetch_add(1, std::memory_order_relaxed); }
  uint64_t boots() const noexcept { return boots_.load(std::memory_order_relaxed); }

private:
  std::mutex mutex_;
  std::map<std::string, std::shared_ptr<std::mutex>> by_name_;
  std::atomic<uint64_t> boots_{0};
};

struct worker_context {
  std::shared_ptr<sandbox_runtime> runtime;
  /// The microvm runtime (docs/microvm.md) for sandboxes whose request names
  /// it; null: this worker has none, and microvm_missing says why.
  std::shared_ptr<sandbox_runtime> microvm;
  std::string microvm_missing = "the microvm runtime is not enabled (airlockd --microvm)";
  std::shared_ptr<rootfs_driver> rootfs;
  std::shared_ptr<storage::kv_store> store; ///< worker-local
  /// The egress proxy's sandboxes; null: no egress (the firewall drops all).
  std::shared_ptr<egress_binding> egress;
  worker_options options;
  /// The guest agent on the host, open read-only: every sandbox's init runs
  /// from it (one file shared by all sandboxes and its pages with them,
  /// never copied into a template). Null: the init is guest_argv[0] inside
  /// the sandbox's root.
  std::shared_ptr<const unique_fd> guest;
  /// Held while a VM base is made: creates of its shape that find none
  /// wait for it instead of each booting a VM to make it.
  std::shared_ptr<vm_base_makers> base_makers = std::make_shared<vm_base_makers>();
};

/// Opens the guest agent at `path` for worker_context::guest. Errors:
/// not_found, permission_denied, invalid_argument (not a regular file with
/// an execute bit).
result<std::shared_ptr<const unique_fd>> open_guest_binary(const std::string& path);

/// What to create.
struct create_sandbox_request {
  std::string id;                        ///< [a-z0-9_-], 1..63
  std::string template_name = "minimal"; ///< must be built already
  sandbox_limits limits;                 ///< limits.cpu_request_millis 0: the default request
  uint64_t disk_mb = 0;                  ///< 0: no disk limit
  uint32_t memory_request_mb = 0;        ///< 0: the worker's default request
  uint32_t disk_request_mb = 0;          ///< 0: the worker's default request
  bool network = true;
  /// Tenant, template and policy for the egress proxy (id and address are
  /// filled in by the worker).
  egress::sandbox_view egress;
  /// Non-empty: the root starts as a writable copy of this snapshot
  /// (checkpoint or suspend) on this worker instead of the template.
  std::string from_snapshot;
  /// The root an earlier run of this worker left (recorded as stopped) is
  /// the sandbox's root again; not_found when it is gone.
  bool reuse_root = false;
  /// "microvm": a VM of worker_context::microvm; "" or "namespace": the
  /// namespace runtime.
  std::string runtime;
};

/// One row of list.
struct sandbox_entry {
  std::string id;
  schema::sandbox_state state = schema::sandbox_state::creating;
  sandbox_actor actor;
};

/// What recover found and did.
struct recover_report {
  std::vector<std::string> cleaned;  ///< sandboxes of an earlier run, now gone
  std::vector<std::string> kept;     ///< stopped, root kept for a create with reuse_root
  std::vector<std::string> failures; ///< could not be cleaned (reason included); retry recover
};

} // namespace airlock::worker

namespace airlock::worker::egress {

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, sandbox_view& x) {
  return f(caf::meta::type_name("sandbox_view"), x.sandbox_id, x.tenant_id, x.template_name,
           x.address, x.policy);
}

} // namespace airlock::worker::egress

namespace airlock::worker {

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, sandbox_limits& x) {
  return f(caf::meta::type_name("sandbox_limits"), x.memory_mb, x.cpu_millis, x.pids_max,
           x.cpu_request_millis);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, create_sandbox_request& x) {
  return f(caf::meta::type_name("create_sandbox_request"), x.id, x.template_name, x.limits,
           x.disk_mb, x.memory_request_mb, x.disk_request_mb, x.network, x.egress, x.from_snapshot,
           x.reuse_root, x.runtime);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, sandbox_entry& x) {
  return f(caf::meta::type_name("sandbox_entry"), x.id, x.state, x.actor);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, recover_report& x) {
  return f(caf::meta::type_name("recover_report"), x.cleaned, x.kept, x.failures);
}

using worker_actor = caf::typed_actor<
  /// Creates a sandbox: writable rootfs from the template, runtime create with
  /// the guest as init, guest handshake. Replies with the sandbox's actor once
  /// the guest is ready. Errors: already_exists, invalid_argument,
  /// not_found (no such template: build it first), resource_exhausted
  /// (sandboxes_max or runtime slots), unavailable/timeout (the guest did not
  /// say hello; nothing is left behind). Not idempotent.
  caf::replies_to<wk_create_atom, create_sandbox_request>::with<sandbox_actor>,
  /// The actor of a running sandbox. Errors: not_found. Idempotent.
  caf::replies_to<wk_get_atom, std::string>::with<sandbox_actor>,
  /// Freezes a sandbox. Errors: not_found, wrong_state. Idempotent.
  caf::replies_to<wk_pause_atom, std::string>::with<bool>,
  /// Thaws a sandbox. Errors: not_found, wrong_state. Idempotent.
  caf::replies_to<wk_resume_atom, std::string>::with<bool>,
  /// Destroys a sandbox (processes, cgroups, veth, state file, rootfs) and
  /// forgets it; a stopped one's kept root goes too. Idempotent: ok for an
  /// unknown id.
  caf::replies_to<wk_destroy_atom, std::string>::with<bool>,
  /// Stops a sandbox as the worker stops: its processes end and it releases
  /// cgroups, veth, address and slot, but its root filesystem and its
  /// record (now stopped: suspended) stay for a create with reuse_root.
  /// Idempotent: ok for an unknown id.
  caf::replies_to<wk_release_atom, std::string>::with<bool>,
  /// Every sandbox this worker runs. Idempotent.
  caf::replies_to<wk_list_atom>::with<std::vector<sandbox_entry>>,
  /// Cleans up what an earlier run left (see the file comment). Call once,
  /// before the first create; wrong_state once this worker runs sandboxes.
  /// Idempotent.
  caf::replies_to<wk_recover_atom>::with<recover_report>,
  /// What the next heartbeat reports: requested and limited sums over its
  /// sandboxes, what they use (one read of their parent cgroup), the host's
  /// memory pressure, the sandbox ids. Cheap; no sandbox is visited.
  caf::replies_to<wk_load_atom>::with<schema::worker_heartbeat>,
  /// Takes checkpoint (sandbox id, checkpoint id) of a sandbox's files,
  /// consistent (sandbox_actor's sbx_ckpt). Errors: not_found, wrong_state,
  /// already_exists (the checkpoint id is taken), unavailable. Answers its
  /// size (rootfs_driver::checkpoint).
  caf::replies_to<wk_ckpt_atom, std::string, std::string, bool>::with<uint64_t>,
  /// Deletes a checkpoint's files. Idempotent: ok for an unknown id.
  caf::replies_to<wk_ckptdel_atom, std::string>::with<bool>,
  /// The checkpoints this worker holds on disk: its own record of them.
  caf::replies_to<wk_ckpts_atom>::with<std::vector<std::string>>,
  /// A running sandbox changes hands (a claimed warm pool member): it is
  /// recorded as tenant `tenant`'s and its CPU and memory limits are set in
  /// place (id, tenant, cpu_millis, memory_mb). Errors: not_found,
  /// invalid_argument (a zero limit). Idempotent.
  caf::replies_to<wk_claim_atom, std::string, std::string, uint32_t, uint32_t>::with<bool>,
  /// Internal: a create finished off the actor (token, outcome). On success
  /// the sandbox's parts wait in the worker's state under the token: a
  /// message carries no descriptor.
  caf::reacts_to<wk_created_atom, uint64_t, status>,
  /// Internal: a recover finished off the actor (token).
  caf::reacts_to<wk_recovered_atom, uint64_t, recover_report>,
  /// Internal: a blocking job finished off the actor (token, outcome, the
  /// value it produced when it produces one).
  caf::reacts_to<wk_jobdone_atom, uint64_t, status, uint64_t>>;

worker_actor spawn_worker(caf::actor_system& system, worker_context context);

} // namespace airlock::worker
