#pragma once
// C++ value types for sandbox records (schema/sandbox.capnp), as in API.md.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "schema/errc.hpp"
#include "schema/operation.hpp"

namespace airlock::schema {

inline constexpr uint16_t sandbox_schema_version = 1;

enum class sandbox_state : uint8_t {
  creating,
  running,
  pausing,
  paused,
  resuming,
  suspending,
  suspended,
  restoring,
  destroying,
  destroyed,
  error,
};

std::string_view to_string(sandbox_state state) noexcept;
std::optional<sandbox_state> parse_sandbox_state(std::string_view text) noexcept;

enum class egress_profile : uint8_t { none, allowlist, open };

std::string_view to_string(egress_profile profile) noexcept;
std::optional<egress_profile> parse_egress_profile(std::string_view text) noexcept;

enum class idle_action : uint8_t { suspend, delete_sandbox };

std::string_view to_string(idle_action action) noexcept;
std::optional<idle_action> parse_idle_action(std::string_view text) noexcept;

struct egress_policy {
  egress_profile profile = egress_profile::none;
  std::vector<std::string> allow;
  bool operator==(const egress_policy&) const = default;
};

/// How many whole CPUs a limit of `cpu_millis` is: a VM's vCPU count, and
/// the CPU count E2B clients are shown. Never 0: a sandbox has one at least.
constexpr uint32_t whole_cpus(uint32_t cpu_millis) noexcept {
  return cpu_millis <= 1000 ? 1 : (cpu_millis + 999) / 1000;
}

struct sandbox_spec {
  std::string template_name;
  uint32_t cpu_millis = 1000;
  uint32_t memory_mb = 512;
  uint32_t disk_mb = 2048;
  std::map<std::string, std::string> env;
  std::map<std::string, std::string> metadata;
  uint32_t idle_timeout_s = 21600;
  egress_policy egress;
  std::string from_checkpoint;
  /// What placement reserves on a worker; the three above are the limits the
  /// sandbox may use. 0: the placing worker's default request.
  uint32_t cpu_request_millis = 0;
  uint32_t memory_request_mb = 0;
  uint32_t disk_request_mb = 0;
  idle_action on_idle = idle_action::suspend;
  uint32_t max_lifetime_s = 0;        ///< 0: none; counts running time only
  uint32_t checkpoint_interval_s = 0; ///< 0: no automatic checkpoints
  uint32_t checkpoints_max = 20;      ///< automatic checkpoints kept
  uint32_t template_version = 0;      ///< 0: a template without versions
  /// The template version's name in the worker's rootfs; empty: template_name.
  std::string template_worker_name;
  /// The worker that holds that version's files; empty: any worker (it
  /// builds a built-in template on first use).
  std::string template_worker_id;
  /// The create claims the warm pool member whose id the sandbox has
  /// (docs/pools.md) instead of starting a sandbox.
  bool from_pool = false;
  bool operator==(const sandbox_spec&) const = default;
};

struct sandbox_record {
  std::string id;
  std::string tenant_id;
  sandbox_state state = sandbox_state::creating;
  sandbox_spec spec;
  std::string worker_id;
  std::string data_url;
  std::optional<error_info> error_reason;
  int64_t created_at_ms = 0;
  int64_t updated_at_ms = 0;
  int64_t last_active_at_ms = 0;
  std::string last_operation_id;
  std::string snapshot_id; ///< the suspend snapshot while suspended
  /// Running time before the current stretch: paused and suspended time do
  /// not count against max_lifetime_s.
  int64_t lifetime_used_ms = 0;
  int64_t running_since_ms = 0; ///< when the current running stretch began; 0: not running
  bool operator==(const sandbox_record&) const = default;
};

std::string encode(const sandbox_record& record);
result<sandbox_record> decode_sandbox(std::string_view bytes);

enum class snapshot_kind : uint8_t { checkpoint, suspend };
std::string_view to_string(snapshot_kind kind) noexcept;

/// A frozen copy of a sandbox's files (docs/snapshots.md). Only a complete
/// one can be restored or forked.
struct snapshot_record {
  std::string id; ///< ckpt_...
  snapshot_kind kind = snapshot_kind::checkpoint;
  std::string sandbox_id;
  std::string tenant_id;
  std::string template_name;
  std::string template_version;
  std::string runtime;
  std::string worker_id; ///< the worker that holds it
  bool memory_persisted = false;
  uint64_t size_bytes = 0;
  std::string label;
  bool automatic = false;
  int64_t created_at_ms = 0;
  bool complete = false;
  bool operator==(const snapshot_record&) const = default;
};

std::string encode(const snapshot_record& record);
result<snapshot_record> decode_snapshot(std::string_view bytes);

} // namespace airlock::schema
