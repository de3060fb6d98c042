#include "worker/rootfs/rootfs_driver.hpp"

#include "worker/rootfs/btrfs_driver.hpp"
#include "worker/rootfs/fs_util.hpp"
#include "worker/rootfs/overlay_driver.hpp"

namespace airlock::worker {

namespace {

result<std::unique_ptr<rootfs_driver>> open_btrfs(const rootfs_options& options) {
  auto driver = btrfs_driver::open(options);
  if (!driver)
    return driver.error();
  return std::unique_ptr<rootfs_driver>(std::move(*driver));
}

result<std::unique_ptr<rootfs_driver>> open_overlay(const rootfs_options& options) {
  auto driver = overlay_driver::open(options);
  if (!driver)
    return driver.error();
  return std::unique_ptr<rootfs_driver>(std::move(*driver));
}

} // namespace

result<std::filesystem::path> rootfs_driver::template_path(std::string_view name) const {
  if (auto valid = check_name("template name", name); !valid)
    return valid;
  if (!has_template(name))
    return make_status(errc::not_found, "template '" + std::string(name)
                                          + "' is not built; build it with the template builder");
  return templates_dir() / std::string(name);
}

result<std::unique_ptr<rootfs_driver>> make_rootfs_driver(const rootfs_options& options) {
  switch (options.kind) {
    case rootfs_kind::btrfs: return open_btrfs(options);
    case rootfs_kind::overlay: return open_overlay(options);
    case rootfs_kind::automatic: break;
  }
  // Stay with the driver that holds this host's sandboxes: switching would
  // orphan them.
  bool has_overlay = path_exists(options.data_dir / "overlay");
  bool has_btrfs = path_exists(options.data_dir / "rootfs.img")
                   || path_exists(options.data_dir / "rootfs" / "sandboxes");
  if (has_overlay && !has_btrfs)
    return open_overlay(options);
  auto btrfs = open_btrfs(options);
  if (btrfs || btrfs.code() != errc::unavailable)
    return btrfs;
  return open_overlay(options);
}

} // namespace airlock::worker
