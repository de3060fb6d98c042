#pragma once
// cgroups: limits, accounting and the freezer of one sandbox. Two drivers
// behind one interface: v1 (separate hierarchies per controller, as on this
// machine) and v2 (one unified hierarchy). detect_cgroup_driver picks one
// from /proc/self/mountinfo.

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "schema/errc.hpp"

namespace airlock::worker {

/// Limits written into the sandbox's cgroup. 0 leaves a limit unset (only
/// tests of the drivers themselves do that; the runtime rejects 0).
struct cgroup_limits {
  uint64_t memory_bytes = 0;
  uint32_t cpu_millis = 0;
  uint32_t pids_max = 0;
  /// CFS period the CPU quota is expressed in. Default: 100000.
  uint32_t cpu_period_us = 100000;
  /// The CPU the sandbox requested, in thousandths of a core: its share of a
  /// contended CPU (v1 cpu.shares, v2 cpu.weight) follows it, so a busy
  /// sandbox cannot starve neighbours that asked for as much. 0: the
  /// kernel's default share.
  uint32_t cpu_request_millis = 0;
};

/// The smallest CPU quota the kernel takes, in microseconds per period.
inline constexpr uint64_t cpu_quota_min_us = 1000;

/// The CFS quota for `cpu_millis` per `period_us`, at least cpu_quota_min_us.
uint64_t cpu_quota_us(uint32_t cpu_millis, uint32_t period_us) noexcept;

/// v1 cpu.shares for a request: 1024 per core, as Kubernetes maps requests,
/// never below the kernel's minimum of 2.
uint64_t cpu_shares_for(uint32_t request_millis) noexcept;

/// v2 cpu.weight (1..10000) for a request: the shares mapped linearly onto the
/// weight range, as systemd and Kubernetes convert between the two.
uint64_t cpu_weight_for(uint32_t request_millis) noexcept;

/// Counters read from the sandbox's cgroup.
struct cgroup_usage {
  uint64_t memory_bytes = 0;
  uint64_t pids_current = 0;
  uint64_t cpu_usage_ns = 0;
  uint64_t oom_kills = 0;
  bool frozen = false;
};

/// One sandbox's cgroup(s), addressed by sandbox id. Thread-compatible.
class cgroup_driver {
public:
  virtual ~cgroup_driver() = default;

  /// "v1" or "v2".
  virtual std::string_view name() const = 0;

  /// Creates the cgroup (reusing one an earlier run left) and writes `limits`.
  virtual status create(std::string_view id, const cgroup_limits& limits) = 0;

  /// Moves `pid` into the cgroup (before it execs anything).
  virtual status attach(std::string_view id, pid_t pid) = 0;

  /// Freezes the cgroup and waits until the kernel reports it frozen.
  virtual status freeze(std::string_view id, uint32_t timeout_ms) = 0;

  /// Thaws the cgroup and waits until it runs again.
  virtual status thaw(std::string_view id, uint32_t timeout_ms) = 0;

  /// SIGKILLs every process in the cgroup (a frozen one dies when thawed).
  virtual status kill_all(std::string_view id) = 0;

  /// Waits until the cgroup is empty and removes it. ok when already gone.
  virtual status remove(std::string_view id, uint32_t timeout_ms) = 0;

  /// Counters; not_found when the cgroup does not exist.
  virtual result<cgroup_usage> usage(std::string_view id) = 0;

  /// The directories of the cgroup (one per v1 hierarchy).
  virtual std::vector<std::string> paths(std::string_view id) const = 0;

  /// Caps the memory of all sandboxes together (the parent cgroup): when
  /// their sum reaches it, the kernel reclaims and OOM-kills inside the
  /// sandboxes, never in the host or airlockd. 0 lifts the cap.
  virtual status limit_all(uint64_t memory_bytes) = 0;

  /// Counters of all sandboxes together (the parent cgroup): one read, however
  /// many sandboxes run.
  virtual result<cgroup_usage> usage_all() = 0;
};

/// Where the cgroup filesystems are mounted, from /proc/self/mountinfo.
struct cgroup_mounts {
  std::string v2_path;                         ///< "" when no cgroup2 mount
  std::map<std::string, std::string> v1_paths; ///< controller -> mount point
};

/// Parses mountinfo text. Pure; tested on fixed text.
cgroup_mounts parse_cgroup_mounts(std::string_view mountinfo);

/// Which driver to use.
enum class cgroup_mode : uint8_t {
  automatic, ///< v2 when the cgroup2 mount at v2_root has memory, cpu and pids; else v1
  v1,
  v2,
};

/// Cgroup placement.
struct cgroup_options {
  /// Default: automatic.
  cgroup_mode mode = cgroup_mode::automatic;
  /// Directory under each hierarchy's root that holds the sandboxes' cgroups.
  /// Default: "airlock".
  std::string parent = "airlock";
  /// The v2 root to place `parent` under. Default: "/sys/fs/cgroup".
  std::string v2_root = "/sys/fs/cgroup";
};

/// The v1 driver over `controllers` (memory, cpu, pids, freezer required;
/// cpuacct used for CPU usage when mounted).
result<std::unique_ptr<cgroup_driver>> make_cgroup_v1_driver(const cgroup_mounts& mounts,
                                                             std::string parent);

/// The v2 driver rooted at `root`/`parent`. Controllers a non-zero limit needs
/// are enabled on the way down; a missing controller fails create().
std::unique_ptr<cgroup_driver> make_cgroup_v2_driver(std::string root, std::string parent);

/// Reads /proc/self/mountinfo and builds the driver `options` asks for.
result<std::unique_ptr<cgroup_driver>> detect_cgroup_driver(const cgroup_options& options);

/// Checks a sandbox id before it becomes part of a path: [a-z0-9_-], 1..63.
bool valid_sandbox_id(std::string_view id) noexcept;

} // namespace airlock::worker
