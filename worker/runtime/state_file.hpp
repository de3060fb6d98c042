#pragma once
// One small text file per sandbox under the runtime's state directory, so
// that a restarted worker can find what an earlier run left: re-attach to a
// live sandbox or remove the resources of a dead or half-created one. It is
// written before any resource exists and removed after the last one is gone.

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "schema/errc.hpp"

namespace airlock::worker {

/// What the runtime needs to find every resource of one sandbox again.
struct sandbox_record {
  std::string id;
  uint32_t slot = 0;
  pid_t init_pid = 0; ///< 0 while the sandbox is being created
  uint64_t init_start_time = 0;
  uint32_t uid_base = 0;
  uint32_t ids_count = 0;
  std::string cgroup_driver; ///< "v1" or "v2"
  bool network = false;
  std::string host_interface;
  std::string host_address;
  std::string sandbox_address;
  uint32_t prefix_length = 0;
};

/// "key=value" lines, starting with "version=1".
std::string encode_record(const sandbox_record& record);

/// corrupt_record when a field is missing or malformed; unsupported_version
/// for a newer format.
result<sandbox_record> decode_record(std::string_view text);

/// <dir>/<id>.state, replaced atomically.
status save_record(const std::string& dir, const sandbox_record& record);

/// Removes <dir>/<id>.state; ok when absent.
status remove_record(const std::string& dir, std::string_view id);

/// A fresh random (version 4) UUID as the kernel writes a boot id:
/// "xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx\n", lowercase hex, y one of 8, 9, a, b.
/// From getrandom(2).
result<std::string> random_boot_id();

/// <dir>/<id>.boot_id: the sandbox's own /proc/sys/kernel/random/boot_id,
/// bind-mounted read-only inside it. A new one for every start of the
/// sandbox's processes (create, restore, fork), the same across pause.
std::string boot_id_path(const std::string& dir, std::string_view id);

/// Writes a new random boot id to boot_id_path (mode 0444, owned by the
/// host's root), replacing any earlier one.
status save_boot_id(const std::string& dir, std::string_view id);

/// Removes <dir>/<id>.boot_id; ok when absent.
status remove_boot_id(const std::string& dir, std::string_view id);

/// Every record in `dir`, and one failure per unreadable file.
struct loaded_records {
  std::vector<sandbox_record> records;
  std::vector<status> failures;
};
result<loaded_records> load_records(const std::string& dir);

} // namespace airlock::worker
