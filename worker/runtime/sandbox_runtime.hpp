#pragma once
// The contract between the worker and whatever isolates a sandbox: Linux
// namespaces today (namespace_runtime), a micro-VM later. The worker calls it
// from helper threads (blocking actors): every call blocks (clone, mounts, ip, nft).

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "schema/errc.hpp"

namespace airlock::worker {

/// Resource limits of one sandbox. Zero is rejected: an unlimited sandbox can
/// take the host down.
struct sandbox_limits {
  /// Memory (anonymous, page cache, tmpfs) before the OOM killer acts inside
  /// the sandbox. No swap on top. Default: 512.
  uint32_t memory_mb = 512;
  /// CPU time per wall second, in thousandths of a core. Default: 1000 (one core).
  uint32_t cpu_millis = 1000;
  /// Processes and threads at once; fork fails beyond it. Default: 512.
  uint32_t pids_max = 512;
  /// CPU requested, in thousandths of a core: the sandbox's share of a
  /// contended CPU. 0: the kernel's default share. Default: 0.
  uint32_t cpu_request_millis = 0;
};

/// The sandbox's network. Addresses come from the runtime's pool, not the caller.
struct sandbox_network_spec {
  /// A veth pair and an address; false leaves the sandbox with loopback only.
  /// Default: true.
  bool enabled = true;
};

/// Everything needed to start one sandbox.
struct sandbox_launch_spec {
  /// Unique on this host; [a-z0-9_-], 1..63 characters; also the hostname.
  std::string id;
  /// An existing directory that becomes the sandbox's /. The runtime does not
  /// modify it on the host; the sandbox sees it through an id-mapped mount.
  std::string rootfs_path;
  /// argv of the sandbox's init (pid 1), resolved inside the rootfs unless
  /// init_fd is set.
  std::vector<std::string> init_argv;
  /// Borrowed; when set, the init is this static executable on the host (one
  /// file, read-only, shared by every sandbox, never copied into a root), and
  /// init_argv[0] is only its name. -1: init_argv[0] inside the rootfs.
  int init_fd = -1;
  /// Environment of the init, as "KEY=value". Default: PATH only.
  std::vector<std::string> init_env = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin"};
  /// Borrowed; becomes fd 3 of the init (the guest channel). -1: none.
  int channel_fd = -1;
  /// Borrowed; become fd 1 and 2 of the init. -1: /dev/null.
  int stdout_fd = -1;
  int stderr_fd = -1;
  sandbox_limits limits;
  sandbox_network_spec network;
  /// With network enabled, called once the sandbox's addresses are known
  /// (with its host-side address) and before the runtime reads the root: a
  /// VM's disk image is made from it at create, so files the sandbox must
  /// see (resolv.conf, the egress CA) are written here. A failure fails
  /// create. Unset: nothing.
  std::function<status(const std::string& host_address)> prepare_root;
};

/// What the runtime knows about a running sandbox. A copyable snapshot.
struct sandbox_handle {
  std::string id;
  pid_t init_pid = 0;           ///< in the worker's pid namespace
  uint64_t init_start_time = 0; ///< /proc/<pid>/stat field 22; with the pid, one process
  /// Owned by the runtime, valid until destroy(id) or the runtime's
  /// destruction; never close it.
  int pidfd = -1;
  uint32_t slot = 0;                     ///< index of the uid range and address block
  uint32_t uid_base = 0;                 ///< host uid of the sandbox's root; gids likewise
  uint32_t ids_count = 0;                ///< size of the mapped uid/gid range
  std::vector<std::string> cgroup_paths; ///< one per v1 hierarchy, or the v2 directory
  std::string netns_path;                ///< /proc/<pid>/ns/net while the init lives
  std::string host_interface;            ///< host side of the veth pair ("" without network)
  std::string sandbox_interface;         ///< its name inside the sandbox (eth0)
  std::string host_address;              ///< dotted quad on the host side
  std::string sandbox_address;           ///< dotted quad of eth0
  uint32_t prefix_length = 0;            ///< of both addresses
  std::string mac;                       ///< eth0's MAC when the runtime sets it (VMs); else ""
  bool adopted = false;                  ///< found by adopt() rather than created by this object
};

/// Usage counters, read from the sandbox's cgroups.
struct sandbox_stats {
  uint64_t memory_bytes = 0;
  uint64_t pids_current = 0;
  uint64_t cpu_usage_ns = 0;
  uint64_t oom_kills = 0; ///< processes the OOM killer ended inside the sandbox
  bool frozen = false;
};

/// What adopt() found in the state directory.
struct adopt_report {
  std::vector<std::string> adopted; ///< alive: re-attached
  std::vector<std::string> cleaned; ///< gone or half-created: resources removed
  std::vector<status> failures;     ///< entries that could not be handled; left in place
};

/// A way of running sandboxes. Implementations are thread-safe; every call
/// blocks and must run off the actor threads.
class sandbox_runtime {
public:
  virtual ~sandbox_runtime() = default;

  /// Starts a sandbox and returns once its init has exec'd. Fails with
  /// already_exists for a known id, invalid_argument for a bad spec,
  /// resource_exhausted when no slot is free; on failure nothing is left behind.
  virtual result<sandbox_handle> create(const sandbox_launch_spec& spec) = 0;

  /// Freezes every process of the sandbox and returns once they are frozen.
  /// Idempotent. not_found for an unknown id.
  virtual status pause(std::string_view id) = 0;

  /// Thaws a paused sandbox. Idempotent. not_found for an unknown id.
  virtual status resume(std::string_view id) = 0;

  /// Kills every process and removes cgroups, network devices, firewall
  /// entries and the state file. Idempotent: ok when the sandbox is unknown.
  virtual status destroy(std::string_view id) = 0;

  /// Sets a running sandbox's CPU and memory limits in place (a claimed warm
  /// pool member takes its creator's). Memory below what the sandbox uses
  /// makes the kernel reclaim, then OOM-kill inside it. not_found for an
  /// unknown id, invalid_argument for a zero limit.
  virtual status set_limits(std::string_view id, uint32_t cpu_millis, uint32_t memory_mb) = 0;

  /// Sandboxes this object manages (created or adopted).
  virtual std::vector<sandbox_handle> list() const = 0;

  /// Reads the state directory left by an earlier run: re-attaches to live
  /// sandboxes and cleans up those whose init is gone. Call once after
  /// construction, before create().
  virtual result<adopt_report> adopt() = 0;

  /// Current usage. not_found for an unknown id.
  virtual result<sandbox_stats> stats(std::string_view id) = 0;

  /// The most sandboxes it can hold at once: its real bound (address blocks,
  /// uid ranges, its own maximum), which capacity must not promise beyond.
  virtual uint32_t slots() const = 0;

  /// Usage of all its sandboxes together. Cheap: it does not visit each one.
  virtual result<sandbox_stats> stats_all() = 0;

  // Machine snapshots: a runtime whose sandbox is a machine with memory of
  // its own (the microvm one) saves it whole, by name, where the runtime
  // keeps them; its processes go on in whatever is started from it. The
  // namespace runtime has none (its files are the rootfs driver's and its
  // processes end): these answer unimplemented, false and ok.

  /// Saves running (or paused) sandbox `id`'s memory, device state and disk
  /// as `name`; the sandbox goes on as it was. Answers the bytes it holds.
  /// already_exists for a name taken, not_found for an unknown id.
  virtual result<uint64_t> save_machine(std::string_view id, std::string_view name) {
    (void)id;
    (void)name;
    return make_status(errc::unimplemented, "this runtime keeps no machine state");
  }

  /// How a machine's memory is given to a sandbox started from it.
  enum class machine_memory : uint8_t {
    /// A copy of its own: the sandbox's snapshots are as quick as a booted
    /// one's. For restores and forks of checkpoints.
    copy,
    /// Pages none of the sandboxes from that machine has written are one
    /// copy on the host (where the runtime can, and its options allow); the
    /// sandbox's own snapshots then carry its memory whole. For bases that
    /// many sandboxes start from and none writes.
    shared,
  };

  /// Starts sandbox spec.id from machine `name`, as create() does from a
  /// root: its memory is the saved one, so its processes go on where they
  /// were. Its guest agent says no hello by itself: the caller sends it a
  /// refresh (fresh entropy, the clock, the hostname, and the network of the
  /// returned handle), which it answers with one.
  virtual result<sandbox_handle> restore_machine(const sandbox_launch_spec& spec,
                                                 std::string_view name,
                                                 machine_memory memory = machine_memory::copy) {
    (void)spec;
    (void)name;
    (void)memory;
    return make_status(errc::unimplemented, "this runtime keeps no machine state");
  }

  /// True when machine `name` was saved here.
  virtual bool has_machine(std::string_view name) const {
    (void)name;
    return false;
  }

  /// Deletes machine `name`. Idempotent: ok when there is none.
  virtual status delete_machine(std::string_view name) {
    (void)name;
    return status::ok();
  }
};

} // namespace airlock::worker
