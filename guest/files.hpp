#pragma once
// File operations the agent serves. The agent runs inside the sandbox's own
// mount namespace and root, so paths are resolved as given; what is refused is
// input that is malformed rather than dangerous: relative paths, NUL bytes and
// over-long paths. Writes are atomic (temporary file in the same directory,
// fsync, renameat, fsync of the directory) and never follow a symlink at the
// final component. All calls block on the disk; the agent accepts that, since
// it is single-threaded by design and disk calls are short.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "guest/protocol.hpp"
#include "schema/errc.hpp"
#include "schema/unique_fd.hpp"

namespace airlock::guest {

/// Maps an errno from `what` (a verb and a path) to the errc a caller can act on.
status errno_status(int error, std::string_view what);

/// invalid_argument unless `path` is absolute, NUL-free and at most `bytes_max` long.
status check_path(std::string_view path, size_t bytes_max);

/// The sandbox's user and group names (its /etc/passwd and /etc/group, read
/// once per call that needs them, at most 1 MiB each).
class id_names {
public:
  /// Reads both files; a missing or unreadable one gives no names.
  static id_names read();
  /// The uid's name, else the uid as text.
  std::string user(uint32_t uid) const;
  /// The gid's name, else the gid as text.
  std::string group(uint32_t gid) const;

private:
  std::map<uint32_t, std::string> users_;
  std::map<uint32_t, std::string> groups_;
};

/// Fills `info`'s owner and group names and, for a symlink, its target
/// (where it resolves to, else its text made absolute); `path` is the
/// entry's absolute path.
void describe_entry(file_info& info, const std::string& path, const id_names& names);

/// lstat (or stat when `follow`) of `path` with owner, group and symlink
/// target; `name` is its last component.
result<file_info> stat_path(const std::string& path, bool follow);

/// Entries of a directory, sorted by name, without "." and "..", each
/// described as stat_path's. Stops at `entries_max` entries or when their
/// texts (name, owner, group, symlink target) would exceed
/// `name_bytes_budget`, and then sets `truncated`.
struct dir_listing {
  std::vector<file_info> entries;
  bool truncated = false;
};
result<dir_listing> list_dir(const std::string& path, size_t entries_max, size_t name_bytes_budget);

/// mkdir, or mkdir -p when `parents` (then an existing directory is success).
status make_dirs(const std::string& path, uint32_t mode, bool parents);

/// unlink or rmdir; when `recursive`, removes a tree without following
/// symlinks and fails with resource_exhausted below `depth_max` levels.
status remove_path(const std::string& path, bool recursive, int depth_max);

status rename_path(const std::string& from, const std::string& to);

/// Opens a regular file for streamed reading; anything else (a directory, a
/// FIFO, a device) is invalid_argument, so a read can never block forever.
result<unique_fd> open_for_read(const std::string& path);

/// One atomic write in progress. The destructor removes the temporary file
/// unless commit() succeeded.
class atomic_writer {
public:
  /// Creates the temporary file next to `path`. `unique` makes its name
  /// unique among the writers of this agent.
  static result<atomic_writer> begin(const std::string& path, uint32_t mode, bool create_parents,
                                     uint64_t unique);

  atomic_writer(atomic_writer&&) noexcept = default;
  atomic_writer& operator=(atomic_writer&&) noexcept = default;
  ~atomic_writer();

  status write(std::string_view bytes);

  /// fsync, renameat over the destination, fsync of the directory.
  status commit();

  /// Removes the temporary file; idempotent.
  void abort() noexcept;

  uint64_t bytes_written() const noexcept { return bytes_; }

private:
  atomic_writer() = default;

  unique_fd dir_;
  unique_fd file_;
  std::string temp_name_;
  std::string final_name_;
  uint64_t bytes_ = 0;
  bool done_ = false;
};

} // namespace airlock::guest
