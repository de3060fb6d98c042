#pragma once
// The root filesystem layer of a worker: templates (read-only trees that
// sandboxes start from), sandboxes (writable copies of a template), checkpoints
// (frozen copies of a sandbox) and forks (writable copies of a checkpoint).
// Two implementations: btrfs (snapshots, milliseconds, disk limits) and
// overlayfs (for hosts without btrfs: copies, no disk limits). See
// docs/rootfs.md for the layout on disk.
//
// Every call is synchronous and may block on the disk or on a child process:
// the worker calls the driver on a helper thread (a CAF blocking actor per
// job), never from an event-based actor. Calls for different ids may run concurrently; calls for
// the same id must be serialized by the caller.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "schema/errc.hpp"

namespace airlock::worker {

enum class rootfs_kind : uint8_t {
  automatic, ///< btrfs (native, else a loop-mounted image), overlay if btrfs cannot be had
  btrfs,
  overlay,
};

/// Options of make_rootfs_driver() and both drivers.
struct rootfs_options {
  /// Holds everything: DATA_DIR/rootfs (btrfs), DATA_DIR/rootfs.img (the
  /// image when DATA_DIR is not on btrfs), DATA_DIR/overlay (overlay driver).
  /// Default: /var/lib/airlock.
  std::filesystem::path data_dir = "/var/lib/airlock";
  /// Which driver. Default: automatic.
  rootfs_kind kind = rootfs_kind::automatic;
  /// Size of DATA_DIR/rootfs.img when it has to be created; the file is
  /// sparse, so only written blocks take disk space. Read only at creation.
  /// Default: 65536 (64 GiB).
  uint64_t image_size_mb = 65536;
  /// Turn btrfs quotas on so that disk_mb limits hold. Quotas cost some write
  /// throughput; without them disk_mb is ignored. Default: true.
  bool disk_quota = true;
  /// Overlay driver: accept disk_mb > 0 and ignore it (overlayfs cannot
  /// enforce it). When false such a request fails with invalid_argument.
  /// Default: false.
  bool overlay_ignore_disk_limit = false;
  /// The mkfs.btrfs program. Default: "mkfs.btrfs".
  std::string mkfs_btrfs = "mkfs.btrfs";
  /// Bound on external programs (mkfs.btrfs, cp, rm). Default: 600000.
  uint32_t command_timeout_ms = 600'000;
};

/// Disk use of one sandbox.
struct rootfs_usage {
  /// Everything the sandbox sees, blocks shared with its template included
  /// (btrfs); the bytes written since it started (overlay).
  uint64_t referenced_bytes = 0;
  /// Blocks only this sandbox holds (btrfs); same as referenced (overlay).
  uint64_t exclusive_bytes = 0;
  /// The disk limit on referenced_bytes, 0 when none.
  uint64_t limit_bytes = 0;
};

/// Templates, sandboxes and checkpoints on one host. Names and ids are single
/// path components: 1 to 128 of [A-Za-z0-9_-] (invalid_argument otherwise).
class rootfs_driver {
public:
  virtual ~rootfs_driver() = default;

  /// "btrfs" or "overlay".
  virtual std::string_view kind() const noexcept = 0;

  /// Where templates and their manifests live (the builder writes
  /// `<templates_dir>/<name>.manifest.json`; delete_template removes it).
  virtual std::filesystem::path templates_dir() const = 0;

  /// A fresh, empty, writable staging tree for template `name`, to populate
  /// and then seal. A leftover staging tree from a failed build is discarded
  /// first. already_exists when a sealed template of that name exists.
  virtual result<std::filesystem::path> create_template(std::string_view name) = 0;

  /// Makes the staged template read-only and visible under its name. Not
  /// idempotent: not_found when nothing is staged.
  virtual status seal_template(std::string_view name) = 0;

  /// Whether a sealed template `name` exists (a staging tree does not count).
  virtual bool has_template(std::string_view name) const = 0;

  /// The sealed template's tree; not_found when there is none. Every driver
  /// keeps sealed templates at templates_dir()/name, so this is shared.
  result<std::filesystem::path> template_path(std::string_view name) const;

  /// Deletes the template, its staging tree and its manifest. Idempotent.
  /// Overlay: wrong_state while a sandbox or checkpoint is layered on it.
  virtual status delete_template(std::string_view name) = 0;

  /// Stages template `name` as a writable copy of sandbox `sandbox_id`'s
  /// files (its processes gone), as create_template stages an empty one;
  /// seal_template finishes it. A template built in a sandbox (run steps)
  /// becomes a template this way. unimplemented where the driver cannot.
  virtual result<std::filesystem::path> template_from_sandbox(std::string_view sandbox_id,
                                                              std::string_view name) = 0;

  /// A writable copy of a sealed template for `sandbox_id`, limited to
  /// `disk_mb` MiB as seen from inside (template data included; 0 = no
  /// limit). Returns the root directory to pivot into. already_exists when the
  /// id is taken, not_found without the template.
  virtual result<std::filesystem::path>
  create_sandbox(std::string_view sandbox_id, std::string_view template_name, uint64_t disk_mb) = 0;

  /// The root directory of an existing sandbox, re-mounting it if the host
  /// rebooted since (overlay). not_found when there is no such sandbox.
  virtual result<std::filesystem::path> sandbox_path(std::string_view sandbox_id) = 0;

  /// Freezes the sandbox's current files as checkpoint `checkpoint_id`. Pause
  /// the sandbox first for a consistent copy. btrfs: a read-only snapshot
  /// (milliseconds); overlay: a copy of the files changed so far (slow,
  /// proportional to them). already_exists when the id is taken. Returns
  /// its size: the bytes the sandbox held beyond its template when it was
  /// taken (btrfs: its qgroup as of the snapshot's own commit, so no extra
  /// sync; 0 with quotas off), the copied files' blocks (overlay).
  virtual result<uint64_t> checkpoint(std::string_view sandbox_id,
                                      std::string_view checkpoint_id) = 0;

  /// The checkpoint's directory: the full read-only tree (btrfs) or only the
  /// files it changed relative to its layers below (overlay).
  virtual result<std::filesystem::path> checkpoint_path(std::string_view checkpoint_id) const = 0;

  /// A new sandbox `new_sandbox_id` starting from the checkpoint's files;
  /// both then diverge independently. Same limits and errors as
  /// create_sandbox.
  virtual result<std::filesystem::path> fork(std::string_view checkpoint_id,
                                             std::string_view new_sandbox_id, uint64_t disk_mb) = 0;

  /// Deletes the sandbox's files (and anything left mounted inside them).
  /// The sandbox's processes must be gone. Idempotent.
  virtual status delete_sandbox(std::string_view sandbox_id) = 0;

  /// Deletes a checkpoint. Idempotent. Overlay: wrong_state while a sandbox
  /// or checkpoint is layered on it.
  virtual status delete_checkpoint(std::string_view checkpoint_id) = 0;

  /// Every sandbox on disk, including those an earlier run left behind (a
  /// restarted worker re-attaches to them or deletes them).
  virtual result<std::vector<std::string>> list_sandboxes() const = 0;

  /// Every checkpoint on disk.
  virtual result<std::vector<std::string>> list_checkpoints() const = 0;

  /// Every sealed template on disk.
  virtual result<std::vector<std::string>> list_templates() const = 0;

  /// Disk use of a sandbox. btrfs commits the running transaction first so
  /// the numbers are current (costs a sync of the file system).
  virtual result<rootfs_usage> usage(std::string_view sandbox_id) = 0;

  /// Releases what this driver mounted: btrfs unmounts its image and frees
  /// the loop device (nothing to do on a native btrfs data dir); overlay
  /// unmounts sandbox overlays. Files stay on disk and a new driver on the
  /// same data_dir finds them again. For tests and uninstall; wrong_state
  /// while something still uses the file system.
  virtual status detach() = 0;
};

/// Opens the driver `options.kind` asks for. automatic: btrfs, native when
/// data_dir is on btrfs, else a loop-mounted image; overlay when btrfs is
/// impossible here (no kernel support, no loop devices, no mkfs.btrfs) or
/// when data_dir already holds overlay data and no btrfs data.
result<std::unique_ptr<rootfs_driver>> make_rootfs_driver(const rootfs_options& options);

} // namespace airlock::worker
