#pragma once
// Mount namespace: what the sandbox sees as its filesystem. The plan is data
// built in the worker (so tests can read it and the child never allocates);
// the child applies it step by step between clone and exec:
//
//   1. make every mount private: nothing propagates to or from the host;
//   2. attach the rootfs (an id-mapped clone prepared by the worker, or a
//      plain bind) over its own path, and chdir into it;
//   3. a fresh /proc with runc's masked paths (/dev/null or an empty
//      read-only tmpfs over them) and read-only paths, and the sandbox's own
//      boot_id (a read-only file mount prepared by the worker) over
//      /proc/sys/kernel/random/boot_id;
//   4. /sys read-only with /sys/firmware masked;
//   5. /dev: a small tmpfs with null, zero, full, random, urandom and tty bound
//      from the host, its own devpts instance, /dev/ptmx, /dev/shm;
//   6. pivot_root into it and detach the old root.

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "schema/errc.hpp"
#include "schema/unique_fd.hpp"

namespace airlock::worker {

/// One step of the plan. Strings point into the owning mount_plan.
struct mount_op {
  enum class kind : uint8_t {
    make_private,  ///< mount --make-rprivate /
    attach_rootfs, ///< move the prepared rootfs fd onto target, or bind target onto itself
    attach_file,   ///< move the prepared boot_id file mount onto target; skipped without one
    enter,         ///< chdir(target): later targets are relative to the new root
    mount_fs,      ///< mount(source, target, fstype, flags, data)
    bind,          ///< bind source over target (recursive)
    remount_ro,    ///< bind target onto itself, then remount it read-only
    make_dir,      ///< mkdir target (existing is fine)
    make_file,     ///< create an empty file as a bind target (existing is fine)
    symlink,       ///< symlink source at target
    pivot,         ///< pivot_root(".", ".") and detach the old root
  };
  kind what = kind::make_private;
  const char* source = nullptr;
  const char* target = nullptr;
  const char* fstype = nullptr;
  unsigned long flags = 0;
  const char* data = nullptr;
  /// Skip this step when its target does not exist (masks of /proc files
  /// that this kernel lacks).
  bool optional = false;
};

/// Limits and choices of the sandbox's filesystem view.
struct mount_options {
  /// The rootfs path on the host.
  std::string rootfs_path;
  /// Mount sysfs read-only at /sys; false leaves /sys empty. Default: true.
  bool mount_sysfs = true;
  /// Size of the /dev/shm tmpfs (charged to the sandbox's memory). Default: 64.
  uint32_t dev_shm_size_mb = 64;
};

/// The prepared mounts the child attaches (-1: none).
struct mount_fds {
  int rootfs = -1;  ///< attach_rootfs: the id-mapped rootfs clone; -1 binds the path
  int boot_id = -1; ///< attach_file: the sandbox's boot_id file, read-only
};

/// Where the sandbox's own boot id is mounted, relative to its root.
inline constexpr const char* boot_id_target = "proc/sys/kernel/random/boot_id";

/// The steps and the strings they point into. Not copyable (pointers).
class mount_plan {
public:
  mount_plan() = default;
  mount_plan(const mount_plan&) = delete;
  mount_plan& operator=(const mount_plan&) = delete;

  const std::vector<mount_op>& ops() const noexcept { return ops_; }

  /// Number of leading steps (up to and including `enter`) that walk host
  /// paths. The child runs them while it still has the worker's host uid, so
  /// that a rootfs below a root-only directory (0700) can be reached; the
  /// rest runs as the sandbox's root, inside the rootfs.
  size_t host_steps() const noexcept;

  /// Appends a step; copies the strings into the plan.
  void add(mount_op::kind what, const std::string& source, const std::string& target,
           const std::string& fstype = {}, unsigned long flags = 0, const std::string& data = {},
           bool optional = false);

  /// "mount proc on proc (fstype proc)": for error messages.
  std::string describe(size_t index) const;

private:
  const char* keep(const std::string& text);

  std::deque<std::string> strings_;
  std::vector<mount_op> ops_;
};

/// /proc paths that runc masks: a bind of /dev/null over files, an empty
/// read-only tmpfs over directories.
const std::vector<std::string>& masked_proc_paths();

/// /proc paths that runc makes read-only.
const std::vector<std::string>& readonly_proc_paths();

/// Builds the plan for `options` (see the sequence at the top of this file).
void build_mount_plan(const mount_options& options, mount_plan& plan);

/// Worker side: a detached clone of `rootfs_path` id-mapped through the user
/// namespace `userns_fd` (host uid 0 on disk is the sandbox's root), with
/// nodev, and nosuid unless `setuid` (docs/runtime.md). The sandbox's writes
/// land on disk with the image's owners, so the rootfs stays usable for
/// snapshots; see docs/runtime.md for why the host must keep the rootfs
/// directory private.
result<unique_fd> open_idmapped_rootfs(const std::string& rootfs_path, int userns_fd,
                                       bool setuid = false);

/// Worker side: a detached, read-only (also nosuid, nodev, noexec) bind mount
/// of the host file `path`, for attach_file. The file stays owned by the
/// host's root, which the sandbox's user namespace does not map.
result<unique_fd> open_readonly_file_mount(const std::string& path);

/// Child side: applies ops [begin, end); `fds` serve attach_rootfs and
/// attach_file. Returns 0, or an errno with the failing index in
/// `failed_index`. Allocation-free.
int apply_mount_plan(const std::vector<mount_op>& ops, size_t begin, size_t end,
                     const mount_fds& fds, size_t& failed_index) noexcept;

} // namespace airlock::worker
