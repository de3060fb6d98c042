#pragma once
// The namespace runtime: sandboxes as Linux namespaces, cgroups, a seccomp
// filter and dropped capabilities. create() is the one place where the layers
// are applied, in this order:
//
//   worker                                   child (child.hpp)
//   1. state record (nothing exists yet)
//   2. cgroup with limits (cgroup_driver)
//   3. firewall entries (net)
//   4. clone3: user, pid, mount, net, uts,  -> waits for go
//      ipc namespaces + pidfd
//   5. uid/gid maps (user_ns)
//   6. join the cgroups
//   7. veth into the child's netns (net)
//   8. id-mapped rootfs (mount_ns)
//   9. record the pid; send go + rootfs   ->  groups, uid 0, cgroupns, hostname,
//                                             mounts, pivot_root, fds, caps,
//                                             no_new_privs, seccomp, exec
//  10. exec seen (sync socket closed)
//
// Each start writes the sandbox's own boot id (state_file.hpp) next to its
// state record; the child mounts it over /proc/sys/kernel/random/boot_id.
//
// Any failure unwinds what exists, so a failed create leaves nothing.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "schema/unique_fd.hpp"
#include "worker/runtime/cgroup_driver.hpp"
#include "worker/runtime/mount_ns.hpp"
#include "worker/runtime/net.hpp"
#include "worker/runtime/sandbox_runtime.hpp"
#include "worker/runtime/seccomp_filter.hpp"
#include "worker/runtime/state_file.hpp"

namespace airlock::worker {

/// Every limit and location of the namespace runtime.
struct namespace_runtime_options {
  /// One state file per sandbox lives here; a restarted worker reads it.
  /// Default: "/var/lib/airlock/runtime".
  std::string state_dir = "/var/lib/airlock/runtime";
  /// cgroup driver choice and placement. Default: automatic, parent "airlock".
  cgroup_options cgroups;
  /// Tools and nftables table. Default: see net_options.
  net_options net;
  /// Pool the sandboxes' /30 blocks come from. Default: "10.200.0.0/16".
  std::string address_pool = "10.200.0.0/16";
  /// First host uid/gid given to sandboxes. Default: 100000.
  uint32_t id_range_base = 100000;
  /// uids/gids per sandbox (slot i gets base + i * this). Default: 65536.
  uint32_t ids_per_sandbox = 65536;
  /// Sandboxes at once (also bounded by the address pool). Default: 1024.
  uint32_t slots_max = 1024;
  /// The taken blocks of the address pool, shared with the other runtimes
  /// that draw from it (microvm). Null: a table of its own. Default: null.
  std::shared_ptr<slot_table> shared_slots;
  /// Mount the rootfs id-mapped (host uid 0 on disk is the sandbox's root); false
  /// binds it as is, and the rootfs must then be owned by the sandbox's range.
  /// Default: true.
  bool idmap_rootfs = true;
  /// Set no_new_privs on every sandbox's init (inherited by all it runs) and
  /// mount its rootfs nosuid: set-uid programs and file capabilities grant
  /// nothing. False (Docker's default): a set-uid program inside, such as
  /// sudo, may raise a sandbox user to the sandbox's own root, which stays
  /// inside the sandbox's user namespace, capability set and seccomp filter.
  /// The base template's `user` needs it for its passwordless sudo.
  /// Default: false.
  bool no_new_privs = false;
  /// Read-only sysfs at /sys. Default: true.
  bool mount_sysfs = true;
  /// Size of /dev/shm. Default: 64.
  uint32_t dev_shm_size_mb = 64;
  /// From clone to the init's exec. Default: 5000.
  uint32_t start_timeout_ms = 5000;
  /// Freezing or thawing every process. Default: 5000.
  uint32_t freeze_timeout_ms = 5000;
  /// From SIGKILL to an empty, removed cgroup. Default: 5000.
  uint32_t destroy_timeout_ms = 5000;
  /// Memory of all sandboxes together (their parent cgroup): when their sum
  /// reaches it the kernel reclaims and OOM-kills among sandboxes, never
  /// airlockd or the host. 0: no cap. Default: 0.
  uint64_t sandboxes_memory_max_mb = 0;
  /// oom_score_adj of each sandbox's init, the guest agent, where the host
  /// grants CAP_SYS_RESOURCE (else it stays 0): an OOM kill picks a
  /// sandbox's own processes (the agent starts them at +500) before the
  /// agent that serves them. Default: -900.
  int init_oom_score_adj = -900;
  /// Called on the starting thread as a start reaches each step of
  /// start_steps, with its name: a fault hook for tests that kill the worker
  /// there and check what a restart finds. Default: empty (the product).
  std::function<void(std::string_view step)> on_start_step;
};

/// The steps of a start, in order, as on_start_step names them: the cgroup
/// exists; the child is cloned (parked before its go, in the worker's
/// cgroup); its id maps are written; it joined its cgroup; its network is
/// wired; its record (with its pid) is saved; the go is sent.
inline constexpr std::string_view start_steps[] = {
  "cgroup_created", "cloned",       "ids_mapped", "cgroup_joined",
  "network_wired",  "record_saved", "released"};

/// sandbox_runtime on Linux namespaces. Thread-safe: the lock guards only the
/// table of sandboxes, so one sandbox's start or teardown (tens of
/// milliseconds) never holds up a call on another (a warm pool claim's limits,
/// a pause). Calls on one id are expected one at a time (the worker's sandbox
/// actor); a call on an id still starting or being torn down finds nothing.
/// Destroying the object leaves the sandboxes running (see adopt()).
class namespace_runtime final : public sandbox_runtime {
public:
  /// Detects the cgroup driver, compiles the seccomp filter, creates the
  /// state directory and the nftables table. Needs root.
  static result<std::unique_ptr<namespace_runtime>> open(namespace_runtime_options options);

  ~namespace_runtime() override;

  result<sandbox_handle> create(const sandbox_launch_spec& spec) override;
  status pause(std::string_view id) override;
  status resume(std::string_view id) override;
  status destroy(std::string_view id) override;
  status set_limits(std::string_view id, uint32_t cpu_millis, uint32_t memory_mb) override;
  std::vector<sandbox_handle> list() const override;
  result<adopt_report> adopt() override;
  result<sandbox_stats> stats(std::string_view id) override;
  uint32_t slots() const override;
  result<sandbox_stats> stats_all() override;

  /// The cgroup driver in use ("v1" or "v2").
  std::string_view cgroup_driver_name() const { return cgroups_->name(); }

private:
  /// Where a table entry is: only a running one is visible to callers; the
  /// others hold their id, slot and interface name while the work is done
  /// outside the lock.
  enum class phase : uint8_t { starting, running, stopping };

  struct sandbox {
    sandbox_record record;
    unique_fd pidfd;
    bool adopted = false;
    phase state = phase::running;
  };

  namespace_runtime(namespace_runtime_options options, std::unique_ptr<cgroup_driver> cgroups,
                    address_pool pool, seccomp_program seccomp);

  status validate(const sandbox_launch_spec& spec) const;
  /// Takes a slot and plans the sandbox in it (released again on failure).
  result<sandbox_record> plan_record(const sandbox_launch_spec& spec);
  result<sandbox_record> plan_record_in_slot(const sandbox_launch_spec& spec, uint32_t slot);
  status start(const sandbox_launch_spec& spec, sandbox& box);
  status release_and_wait(sandbox& box, int sync_fd, const mount_plan& mounts);
  /// "sandbox <id>: <message>", keeping the code.
  static status with_context(std::string_view id, const status& failure);
  /// Calls options_.on_start_step, if any.
  void reached(std::string_view step) const;
  status teardown(sandbox& box);
  status adopt_one(const sandbox_record& record, adopt_report& report);
  sandbox_handle handle_of(const sandbox& box) const;
  /// not_found unless `id` is running (takes the lock).
  status check_running(std::string_view id) const;

  namespace_runtime_options options_;
  std::unique_ptr<cgroup_driver> cgroups_;
  address_pool pool_;
  seccomp_program seccomp_;
  mutable std::mutex mutex_;
  std::map<std::string, sandbox, std::less<>> sandboxes_;
  std::shared_ptr<slot_table> slots_in_use_;
};

} // namespace airlock::worker
