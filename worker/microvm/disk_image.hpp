#pragma once
// The microVM's root disk: an ext4 image made from a template's tree with
// `mkfs.ext4 -d` once per template version, and a writable copy of it per
// sandbox (a reflink on btrfs, a plain copy elsewhere). Blocking.

#include <cstdint>
#include <string>
#include <string_view>

#include "schema/errc.hpp"
#include "worker/rootfs/rootfs_driver.hpp"

namespace airlock::worker::microvm {

struct disk_image_options {
  /// Free space the image gets beyond what the tree holds. Default: 256.
  uint64_t headroom_mb = 256;
  /// mkfs.ext4 and cp each. Default: 300000.
  uint32_t command_timeout_ms = 300'000;
};

/// `images_dir`/<key>.ext4, made from the directory `tree` when it does not
/// exist yet (under a temporary name, renamed once complete). `key` names
/// one template version ("base_v3"); [A-Za-z0-9_.-] only. Returns the path.
result<std::string> template_disk(const std::string& tree, const std::string& images_dir,
                                  const std::string& key, const disk_image_options& options = {});

/// The image of the sealed template `name` (a version's worker name,
/// "python_v3", or a built-in) held by `driver`: template_disk() of its tree,
/// keyed `<name>-<hash of its manifest>`. A rebuilt template (the built-in
/// `base` after a recipe change keeps its name) has a new manifest and so
/// gets a new image; the older images of that name are removed (sandboxes
/// run on their own copies). not_found without the template or its manifest.
result<std::string> template_disk_of(const rootfs_driver& driver, std::string_view name,
                                     const std::string& images_dir,
                                     const disk_image_options& options = {});

/// Copies `image` to `to` for one sandbox: shares the blocks where the
/// filesystem can (cp --reflink=auto), keeps holes. `to` must not exist.
status sandbox_disk(const std::string& image, const std::string& to,
                    const disk_image_options& options = {});

} // namespace airlock::worker::microvm
