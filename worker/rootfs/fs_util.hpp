#pragma once
// Small file-system helpers shared by the rootfs drivers and the template
// builder: errno-to-status conversion, the mount table, and whole-tree
// operations. Everything here is synchronous and blocks
// on the disk; callers run it on a worker helper thread, never in an actor.

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "schema/errc.hpp"
#include "schema/unique_fd.hpp"

namespace airlock::worker {

/// A status built from the current `errno`: "<what>: <strerror>". ENOENT maps
/// to not_found, EEXIST to already_exists, EDQUOT/ENOSPC to resource_exhausted,
/// EPERM/EACCES to permission_denied, EBUSY to wrong_state; the rest to io_error.
status errno_status(std::string_view what);

/// The same for an explicit error number.
status errno_status(std::string_view what, int error_number);

/// Opens `path` with `flags | O_CLOEXEC`; the message names the path.
result<unique_fd> open_fd(const std::filesystem::path& path, int flags, mode_t mode = 0);

/// Creates `path` and its parents (like mkdir -p); ok when it already exists.
status make_dirs(const std::filesystem::path& path, mode_t mode = 0755);

/// Whether `path` exists (without following a final symlink).
bool path_exists(const std::filesystem::path& path) noexcept;

/// Writes `contents` to `path` (created or truncated).
status write_file(const std::filesystem::path& path, std::string_view contents, mode_t mode = 0644);

/// The whole file; not_found when absent.
result<std::string> read_file(const std::filesystem::path& path, size_t bytes_max = 1 << 20);

/// Names in a directory except "." and "..", sorted.
result<std::vector<std::string>> list_dir(const std::filesystem::path& dir);

/// One row of /proc/self/mountinfo.
struct mount_entry {
  std::string mount_point; ///< unescaped absolute path
  std::string fs_type;
  std::string source;
};

/// Parses mountinfo text (tests feed fixed text; see read_mounts()).
std::vector<mount_entry> parse_mountinfo(std::string_view text);

/// The mounts of this process's mount namespace, in mount order.
result<std::vector<mount_entry>> read_mounts();

/// Unmounts every mount at or below `path`, deepest first, lazily (MNT_DETACH)
/// when a plain unmount says busy. Used before deleting a tree that a build or
/// a crashed sandbox may have left mounts in.
status unmount_below(const std::filesystem::path& path);

/// Deletes a directory tree without crossing into other mounts (rm -rf
/// --one-file-system, which handles any depth); ok when it is absent.
status remove_tree(const std::filesystem::path& path, uint32_t timeout_ms = 600'000);

/// Apparent size and block usage of a tree, best effort (entries deeper than
/// PATH_MAX are skipped); does not cross mounts.
struct tree_size {
  uint64_t apparent_bytes = 0;  ///< sum of regular file sizes
  uint64_t allocated_bytes = 0; ///< sum of st_blocks * 512
  uint64_t files = 0;           ///< entries of any type
};
result<tree_size> measure_tree(const std::filesystem::path& path);

/// Whether a name is safe as one path component for a template, sandbox or
/// checkpoint: 1 to 128 of [A-Za-z0-9_-], starting with a letter or digit.
bool is_valid_name(std::string_view name) noexcept;

/// invalid_argument naming `what` unless is_valid_name(name).
status check_name(std::string_view what, std::string_view name);

} // namespace airlock::worker
