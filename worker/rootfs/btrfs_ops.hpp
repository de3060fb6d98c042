#pragma once
// Thin wrappers over the btrfs ioctls in <linux/btrfs.h>: subvolumes,
// snapshots, the read-only flag and qgroups. ioctls instead of btrfs-progs
// because a snapshot through an ioctl takes about a millisecond and a fork+exec
// of `btrfs` several. All need CAP_SYS_ADMIN except create and snapshot.

#include <cstdint>
#include <filesystem>
#include <string_view>

#include "schema/errc.hpp"

namespace airlock::worker {

/// Whether `path` lives on a btrfs file system (statfs f_type).
bool is_on_btrfs(const std::filesystem::path& path) noexcept;

/// Whether `path` is the root directory of a btrfs subvolume.
bool is_btrfs_subvolume(const std::filesystem::path& path) noexcept;

/// Creates the empty subvolume `parent_dir/name`.
status btrfs_create_subvolume(const std::filesystem::path& parent_dir, std::string_view name);

/// Snapshots the subvolume `source` as `parent_dir/name`; the snapshot is
/// read-only when `read_only`. Nested subvolumes of `source` appear as empty
/// directories in the snapshot (btrfs does not recurse).
status btrfs_snapshot(const std::filesystem::path& source, const std::filesystem::path& parent_dir,
                      std::string_view name, bool read_only);

/// Deletes the subvolume at `path` and every subvolume nested inside it (a
/// sandbox's root may create its own), clearing read-only flags on the way
/// where a nested one must be removed from a read-only parent. Ok when absent.
status btrfs_delete_subvolume(const std::filesystem::path& path);

/// The BTRFS_SUBVOL_RDONLY flag of a subvolume.
result<bool> btrfs_is_read_only(const std::filesystem::path& subvolume);

/// Sets or clears BTRFS_SUBVOL_RDONLY.
status btrfs_set_read_only(const std::filesystem::path& subvolume, bool read_only);

/// The subvolume (tree) id of the subvolume containing `path`.
result<uint64_t> btrfs_subvolume_id(const std::filesystem::path& path);

/// Turns quotas on for the file system holding `path` (simple quotas where
/// the kernel has them, full qgroups otherwise) and waits for the initial
/// rescan. Ok when they are already on, in whichever mode.
status btrfs_enable_quota(const std::filesystem::path& path);

/// Limits the referenced bytes of level-0 qgroup 0/`subvolume_id`; 0 removes
/// the limit.
status btrfs_limit_referenced(const std::filesystem::path& any_path, uint64_t subvolume_id,
                              uint64_t bytes);

/// What a level-0 qgroup accounts, as of the last committed transaction.
struct btrfs_qgroup_usage {
  uint64_t referenced_bytes = 0;
  uint64_t exclusive_bytes = 0;
  uint64_t referenced_limit_bytes = 0; ///< 0 = none
};

/// Reads qgroup 0/`subvolume_id` from the quota tree; not_found when quotas
/// are off or the qgroup does not exist.
result<btrfs_qgroup_usage> btrfs_qgroup(const std::filesystem::path& any_path,
                                        uint64_t subvolume_id);

} // namespace airlock::worker
