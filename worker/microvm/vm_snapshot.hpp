#pragma once
// A microVM's memory snapshot on disk: one directory holding the device
// state (a QEMU migration stream without RAM), the guest's RAM as a file,
// the root disk and a record of what it needs to be restored. Paths inside
// the record are relative to the directory, so that a snapshot directory can
// be moved to another host; the record names what must match there (QEMU's
// version, the machine line, memory, vCPUs, the guest kernel and initramfs)
// so that a mismatched host refuses it with the reason instead of loading a
// stream it cannot run. Pure apart from the file reads and writes.

#include <cstdint>
#include <string>

#include "schema/errc.hpp"

namespace airlock::worker::microvm {

/// The record's format; a reader refuses other versions.
inline constexpr uint32_t vm_snapshot_format_version = 1;
inline constexpr const char* vm_snapshot_record_name = "snapshot.json";
inline constexpr const char* vm_snapshot_state_name = "state";
inline constexpr const char* vm_snapshot_memory_name = "memory";
inline constexpr const char* vm_snapshot_disk_name = "disk.ext4";

struct vm_snapshot_record {
  uint32_t format_version = vm_snapshot_format_version;
  std::string source_id; ///< the sandbox it was taken from
  int64_t created_unix_ms = 0;
  std::string qemu_version; ///< query-version: "7.2.19 (Debian 1:7.2+dfsg-7+deb12u18)"
  std::string machine;      ///< the -M argument
  std::string accel;        ///< tcg or kvm
  std::string cpu;          ///< the -cpu argument
  uint32_t memory_mb = 0;
  uint32_t vcpus = 0;
  std::string kernel_sha256;
  std::string initrd_sha256;
  std::string guest_release;
  /// The VM had a NIC: a restore must give it one (its device state names
  /// one), wired to the new sandbox's slot. Absent in a record: false.
  bool network = false;
  /// Relative to the snapshot directory.
  std::string state_file = vm_snapshot_state_name;
  /// "": the RAM is in the state stream (a VM whose RAM was not a file of
  /// its own: a clone's private mapping, or one restored from such a state).
  std::string memory_file = vm_snapshot_memory_name;
  std::string disk_file = vm_snapshot_disk_name;
};

std::string to_json(const vm_snapshot_record& record);
/// corrupt_record when it does not parse; unsupported_version for another
/// format version; invalid_argument for a file name that leaves the directory.
result<vm_snapshot_record> vm_snapshot_record_from_json(const std::string& text);

/// Why a snapshot taken as `saved` cannot be restored where `here` describes
/// the host (only the fields that must match are compared: QEMU's version,
/// machine, accelerator, cpu, memory, vCPUs, kernel and initramfs hashes);
/// ok when it can.
status check_restorable(const vm_snapshot_record& saved, const vm_snapshot_record& here);

/// Writes `dir`/snapshot.json (beside it, then renamed).
status write_vm_snapshot_record(const std::string& dir, const vm_snapshot_record& record);
result<vm_snapshot_record> read_vm_snapshot_record(const std::string& dir);

/// Lowercase hex sha256 of a file's contents; "" when it cannot be read.
std::string file_sha256(const std::string& path);

} // namespace airlock::worker::microvm
