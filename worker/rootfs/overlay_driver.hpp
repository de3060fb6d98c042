#pragma once
// rootfs_driver on overlayfs, for hosts where btrfs cannot be had. A template
// is a plain directory (sealed by convention: nothing writes to it once
// sealed); a sandbox is an overlay mount with the template as its lower layer
// and its own upper and work directories; a checkpoint is a copy of a
// sandbox's upper directory (slow: proportional to what the sandbox changed);
// a fork is an overlay whose lower layers are the checkpoint's copy on top of
// the checkpoint's own layers. There are no disk limits. Layers are shared, so
// a template or checkpoint cannot be deleted while something is layered on it.

#include <filesystem>
#include <memory>
#include <vector>

#include "worker/rootfs/rootfs_driver.hpp"

namespace airlock::worker {

class overlay_driver final : public rootfs_driver {
public:
  /// Opens (and on first use creates) DATA_DIR/overlay.
  static result<std::unique_ptr<overlay_driver>> open(const rootfs_options& options);

  std::string_view kind() const noexcept override { return "overlay"; }
  std::filesystem::path templates_dir() const override;
  result<std::filesystem::path> create_template(std::string_view name) override;
  status seal_template(std::string_view name) override;
  result<std::filesystem::path> template_from_sandbox(std::string_view sandbox_id,
                                                      std::string_view name) override;
  bool has_template(std::string_view name) const override;
  status delete_template(std::string_view name) override;
  result<std::filesystem::path> create_sandbox(std::string_view sandbox_id,
                                               std::string_view template_name,
                                               uint64_t disk_mb) override;
  result<std::filesystem::path> sandbox_path(std::string_view sandbox_id) override;
  result<uint64_t> checkpoint(std::string_view sandbox_id, std::string_view checkpoint_id) override;
  result<std::filesystem::path> checkpoint_path(std::string_view checkpoint_id) const override;
  result<std::filesystem::path> fork(std::string_view checkpoint_id,
                                     std::string_view new_sandbox_id, uint64_t disk_mb) override;
  status delete_sandbox(std::string_view sandbox_id) override;
  status delete_checkpoint(std::string_view checkpoint_id) override;
  result<std::vector<std::string>> list_sandboxes() const override;
  result<std::vector<std::string>> list_checkpoints() const override;
  result<std::vector<std::string>> list_templates() const override;
  result<rootfs_usage> usage(std::string_view sandbox_id) override;
  status detach() override;

  /// DATA_DIR/overlay.
  const std::filesystem::path& root() const noexcept { return root_; }

private:
  explicit overlay_driver(const rootfs_options& options);

  using layers = std::vector<std::filesystem::path>; // top first

  status prepare();
  status check_disk_limit(uint64_t disk_mb) const;
  result<std::filesystem::path> make_sandbox(std::string_view sandbox_id, const layers& lowers);
  status mount_sandbox(const std::filesystem::path& dir, const layers& lowers) const;
  result<layers> read_layers(const std::filesystem::path& dir) const;
  status check_unused(const std::filesystem::path& layer, std::string_view what) const;
  std::filesystem::path sandbox_dir(std::string_view sandbox_id) const;
  std::filesystem::path checkpoint_dir(std::string_view checkpoint_id) const;

  rootfs_options options_;
  std::filesystem::path root_;
};

} // namespace airlock::worker
