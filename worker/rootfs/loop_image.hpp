#pragma once
// The btrfs image file used when the data directory is not on btrfs: created
// sparse and formatted once, attached to a free loop device with autoclear (so
// the device goes away with the last unmount), and mounted. A restarted
// worker finds the mount still there, or re-attaches the same image; it never
// formats an existing image again.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "schema/errc.hpp"

namespace airlock::worker {

struct loop_image_options {
  /// The image file. Default: empty (required).
  std::filesystem::path image;
  /// Where it is mounted. Default: empty (required).
  std::filesystem::path mount_point;
  /// Size of a new image; sparse, so blocks are used only when written.
  /// Default: 65536.
  uint64_t size_mb = 65536;
  /// The mkfs.btrfs program. Default: "mkfs.btrfs".
  std::string mkfs_btrfs = "mkfs.btrfs";
  /// How long mkfs.btrfs may take. Default: 120000.
  uint32_t mkfs_timeout_ms = 120'000;
};

/// What ensure_image_mounted() found or did.
struct loop_image_state {
  bool created = false;     ///< the image was created and formatted now
  bool mounted_now = false; ///< this call mounted it (else it already was)
  std::string loop_device;  ///< /dev/loopN backing the mount, when known
};

/// Makes sure a btrfs file system from `options.image` is mounted at
/// `options.mount_point`. Fails with unavailable when btrfs, loop devices or
/// mkfs.btrfs are missing on this host (the caller may then fall back to the
/// overlay driver), wrong_state when something else is mounted there.
result<loop_image_state> ensure_image_mounted(const loop_image_options& options);

/// Unmounts `mount_point` and makes sure the loop device backing `image` is
/// gone. wrong_state when the file system is still in use (stop the sandboxes
/// first). Ok when nothing is mounted or attached.
status unmount_image(const std::filesystem::path& image, const std::filesystem::path& mount_point);

/// The /dev/loopN whose backing file is `image`, from /sys/block.
std::optional<std::string> find_loop_device(const std::filesystem::path& image);

/// Detaches one loop device (LOOP_CLR_FD); for cleanup after crashes.
status detach_loop_device(const std::string& device);

} // namespace airlock::worker
