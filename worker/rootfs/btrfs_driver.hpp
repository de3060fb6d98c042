#pragma once
// rootfs_driver on btrfs: a template is a read-only subvolume, a sandbox a
// writable snapshot of it, a checkpoint a read-only snapshot of a sandbox, a
// fork a writable snapshot of a checkpoint; each costs about a millisecond
// whatever the size. Disk limits are qgroup limits on referenced bytes. When
// the data directory is not on btrfs, DATA_DIR/rootfs.img is created and
// loop-mounted at DATA_DIR/rootfs (see loop_image.hpp).

#include <filesystem>
#include <memory>

#include "worker/rootfs/rootfs_driver.hpp"

namespace airlock::worker {

class btrfs_driver final : public rootfs_driver {
public:
  /// Opens (and on first use creates) DATA_DIR/rootfs and turns quotas on when
  /// `options.disk_quota`. unavailable when btrfs cannot be had on this host.
  static result<std::unique_ptr<btrfs_driver>> open(const rootfs_options& options);

  std::string_view kind() const noexcept override { return "btrfs"; }
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

  /// DATA_DIR/rootfs: the btrfs directory (or mount of the image).
  const std::filesystem::path& root() const noexcept { return root_; }
  /// DATA_DIR/rootfs.img.
  const std::filesystem::path& image_path() const noexcept { return image_; }
  /// Whether the file system is the loop-mounted image (not a native btrfs).
  bool uses_image() const noexcept { return uses_image_; }
  /// Whether open() created and formatted the image (false when it reused one).
  bool created_image() const noexcept { return created_image_; }
  /// Whether open() mounted the image (false when it was still mounted).
  bool mounted_image() const noexcept { return mounted_image_; }

private:
  explicit btrfs_driver(const rootfs_options& options);

  status prepare();
  result<std::filesystem::path> writable_snapshot(const std::filesystem::path& source,
                                                  std::string_view sandbox_id, uint64_t disk_mb);
  result<std::vector<std::string>> list_subvolumes(const std::filesystem::path& dir,
                                                   bool sealed_only) const;

  rootfs_options options_;
  std::filesystem::path root_;
  std::filesystem::path image_;
  bool uses_image_ = false;
  bool created_image_ = false;
  bool mounted_image_ = false;
};

} // namespace airlock::worker
