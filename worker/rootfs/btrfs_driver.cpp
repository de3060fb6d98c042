#include "worker/rootfs/btrfs_driver.hpp"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "worker/rootfs/btrfs_ops.hpp"
#include "worker/rootfs/fs_util.hpp"
#include "worker/rootfs/loop_image.hpp"

namespace airlock::worker {

namespace {

constexpr std::string_view staging_suffix = ".staging";
constexpr std::string_view manifest_suffix = ".manifest.json";

std::filesystem::path with_suffix(const std::filesystem::path& dir, std::string_view name,
                                  std::string_view suffix) {
  return dir / (std::string(name) + std::string(suffix));
}

} // namespace

btrfs_driver::btrfs_driver(const rootfs_options& options)
    : options_(options), root_(options.data_dir / "rootfs"),
      image_(options.data_dir / "rootfs.img") {}

result<std::unique_ptr<btrfs_driver>> btrfs_driver::open(const rootfs_options& options) {
  if (!options.data_dir.is_absolute())
    return make_status(errc::invalid_argument, "data_dir must be an absolute path, got '"
                                                 + options.data_dir.string() + "'");
  std::unique_ptr<btrfs_driver> driver(new btrfs_driver(options));
  if (auto prepared = driver->prepare(); !prepared)
    return prepared;
  return driver;
}

status btrfs_driver::prepare() {
  if (auto made = make_dirs(options_.data_dir, 0700); !made)
    return made;
  // An image once created stays the file system even if data_dir moves to btrfs.
  uses_image_ = path_exists(image_) || !is_on_btrfs(options_.data_dir);
  if (uses_image_) {
    loop_image_options loop;
    loop.image = image_;
    loop.mount_point = root_;
    loop.size_mb = options_.image_size_mb;
    loop.mkfs_btrfs = options_.mkfs_btrfs;
    loop.mkfs_timeout_ms = options_.command_timeout_ms;
    auto state = ensure_image_mounted(loop);
    if (!state)
      return state.error();
    created_image_ = state->created;
    mounted_image_ = state->mounted_now;
  } else if (auto made = make_dirs(root_, 0700); !made) {
    return made;
  }
  // Sandbox roots hold files their root user chose (setuid binaries too): no
  // other host user may reach them.
  if (::chmod(root_.c_str(), 0700) != 0)
    return errno_status("cannot restrict the mode of " + root_.string());
  for (const char* dir : {"templates", "sandboxes", "checkpoints"})
    if (auto made = make_dirs(root_ / dir, 0700); !made)
      return made;
  if (options_.disk_quota)
    return btrfs_enable_quota(root_);
  return status::ok();
}

std::filesystem::path btrfs_driver::templates_dir() const { return root_ / "templates"; }

result<std::filesystem::path> btrfs_driver::create_template(std::string_view name) {
  if (auto valid = check_name("template name", name); !valid)
    return valid;
  if (has_template(name))
    return make_status(errc::already_exists, "template '" + std::string(name)
                                               + "' is already built; delete it to rebuild");
  auto staging = with_suffix(templates_dir(), name, staging_suffix);
  // A staging subvolume left by a crashed build is half-populated: start over.
  if (auto deleted = btrfs_delete_subvolume(staging); !deleted)
    return deleted;
  auto final_path = templates_dir() / std::string(name);
  if (path_exists(final_path)) {
    // An unsealed final path (crash between rename and flag) is as suspect.
    if (auto deleted = btrfs_delete_subvolume(final_path); !deleted)
      return deleted;
  }
  if (auto created = btrfs_create_subvolume(templates_dir(), staging.filename().string()); !created)
    return created;
  if (::chmod(staging.c_str(), 0755) != 0)
    return errno_status("cannot set the mode of " + staging.string());
  return staging;
}

result<std::filesystem::path> btrfs_driver::template_from_sandbox(std::string_view sandbox_id,
                                                                  std::string_view name) {
  auto source = sandbox_path(sandbox_id);
  if (!source)
    return source.error();
  auto staging = create_template(name); // checks the name, clears what a crash left
  if (!staging)
    return staging.error();
  if (auto deleted = btrfs_delete_subvolume(*staging); !deleted)
    return deleted;
  if (auto made = btrfs_snapshot(*source, templates_dir(), staging->filename().string(), false);
      !made)
    return made;
  if (::chmod(staging->c_str(), 0755) != 0)
    return errno_status("cannot set the mode of " + staging->string());
  return staging;
}

status btrfs_driver::seal_template(std::string_view name) {
  if (auto valid = check_name("template name", name); !valid)
    return valid;
  auto staging = with_suffix(templates_dir(), name, staging_suffix);
  if (!is_btrfs_subvolume(staging))
    return make_status(errc::not_found, "no staged template '" + std::string(name)
                                          + "' to seal; call create_template first");
  // Commit the build's data now, so that the first sandbox snapshot does not
  // pay for writing the whole template out.
  if (auto fd = open_fd(staging, O_RDONLY | O_DIRECTORY); !fd || ::syncfs(fd->get()) != 0)
    return errno_status("cannot commit template " + staging.string() + " to disk");
  if (auto frozen = btrfs_set_read_only(staging, true); !frozen)
    return frozen;
  // Renaming a read-only subvolume changes only its parent directory, so it is
  // allowed, and has_template() never sees a writable tree under the name.
  auto final_path = templates_dir() / std::string(name);
  if (::renameat2(AT_FDCWD, staging.c_str(), AT_FDCWD, final_path.c_str(), RENAME_NOREPLACE) != 0)
    return errno_status("cannot move the sealed template to " + final_path.string());
  return status::ok();
}

bool btrfs_driver::has_template(std::string_view name) const {
  if (!is_valid_name(name))
    return false;
  auto path = templates_dir() / std::string(name);
  if (!is_btrfs_subvolume(path))
    return false;
  auto read_only = btrfs_is_read_only(path);
  return read_only && *read_only;
}

status btrfs_driver::delete_template(std::string_view name) {
  if (auto valid = check_name("template name", name); !valid)
    return valid;
  for (auto path :
       {with_suffix(templates_dir(), name, staging_suffix), templates_dir() / std::string(name)})
    if (auto deleted = btrfs_delete_subvolume(path); !deleted)
      return deleted;
  auto manifest = with_suffix(templates_dir(), name, manifest_suffix);
  if (::unlink(manifest.c_str()) != 0 && errno != ENOENT)
    return errno_status("cannot delete " + manifest.string());
  return status::ok();
}

result<std::filesystem::path> btrfs_driver::writable_snapshot(const std::filesystem::path& source,
                                                              std::string_view sandbox_id,
                                                              uint64_t disk_mb) {
  auto target = root_ / "sandboxes" / std::string(sandbox_id);
  if (auto made = btrfs_snapshot(source, root_ / "sandboxes", sandbox_id, false); !made) {
    if (made.code == errc::already_exists)
      made.message = "sandbox '" + std::string(sandbox_id) + "' already exists";
    return made;
  }
  if (disk_mb == 0 || !options_.disk_quota)
    return target;
  auto id = btrfs_subvolume_id(target);
  status limited = id ? btrfs_limit_referenced(root_, *id, disk_mb << 20) : id.error();
  if (!limited) {
    // Without its limit the sandbox could fill the host's disk: do not hand it out.
    (void)btrfs_delete_subvolume(target);
    return limited;
  }
  return target;
}

result<std::filesystem::path> btrfs_driver::create_sandbox(std::string_view sandbox_id,
                                                           std::string_view template_name,
                                                           uint64_t disk_mb) {
  if (auto valid = check_name("sandbox id", sandbox_id); !valid)
    return valid;
  auto source = template_path(template_name);
  if (!source)
    return source.error();
  return writable_snapshot(*source, sandbox_id, disk_mb);
}

result<std::filesystem::path> btrfs_driver::sandbox_path(std::string_view sandbox_id) {
  if (auto valid = check_name("sandbox id", sandbox_id); !valid)
    return valid;
  auto path = root_ / "sandboxes" / std::string(sandbox_id);
  if (!is_btrfs_subvolume(path))
    return make_status(errc::not_found, "no sandbox '" + std::string(sandbox_id) + "' on disk");
  return path;
}

result<uint64_t> btrfs_driver::checkpoint(std::string_view sandbox_id,
                                          std::string_view checkpoint_id) {
  if (auto valid = check_name("checkpoint id", checkpoint_id); !valid)
    return valid;
  auto source = sandbox_path(sandbox_id);
  if (!source)
    return source.error();
  auto made = btrfs_snapshot(*source, root_ / "checkpoints", checkpoint_id, true);
  if (!made && made.code == errc::already_exists)
    made.message = "checkpoint '" + std::string(checkpoint_id) + "' already exists";
  if (!made)
    return made;
  // Creating a snapshot commits the transaction, so the sandbox's qgroup is
  // current as of the snapshot without the sync usage() pays for.
  auto id = btrfs_subvolume_id(*source);
  if (!options_.disk_quota || !id)
    return uint64_t{0};
  auto qgroup = btrfs_qgroup(root_, *id);
  return qgroup ? qgroup->referenced_bytes : uint64_t{0};
}

result<std::filesystem::path> btrfs_driver::checkpoint_path(std::string_view checkpoint_id) const {
  if (auto valid = check_name("checkpoint id", checkpoint_id); !valid)
    return valid;
  auto path = root_ / "checkpoints" / std::string(checkpoint_id);
  if (!is_btrfs_subvolume(path))
    return make_status(errc::not_found, "no checkpoint '" + std::string(checkpoint_id) + "'");
  return path;
}

result<std::filesystem::path> btrfs_driver::fork(std::string_view checkpoint_id,
                                                 std::string_view new_sandbox_id,
                                                 uint64_t disk_mb) {
  if (auto valid = check_name("sandbox id", new_sandbox_id); !valid)
    return valid;
  auto source = checkpoint_path(checkpoint_id);
  if (!source)
    return source.error();
  return writable_snapshot(*source, new_sandbox_id, disk_mb);
}

status btrfs_driver::delete_sandbox(std::string_view sandbox_id) {
  if (auto valid = check_name("sandbox id", sandbox_id); !valid)
    return valid;
  return btrfs_delete_subvolume(root_ / "sandboxes" / std::string(sandbox_id));
}

status btrfs_driver::delete_checkpoint(std::string_view checkpoint_id) {
  if (auto valid = check_name("checkpoint id", checkpoint_id); !valid)
    return valid;
  return btrfs_delete_subvolume(root_ / "checkpoints" / std::string(checkpoint_id));
}

result<std::vector<std::string>> btrfs_driver::list_subvolumes(const std::filesystem::path& dir,
                                                               bool sealed_only) const {
  auto names = list_dir(dir);
  if (!names)
    return names.error();
  std::vector<std::string> out;
  for (auto& name : *names) {
    if (!is_valid_name(name) || !is_btrfs_subvolume(dir / name))
      continue;
    if (sealed_only && !has_template(name))
      continue;
    out.push_back(std::move(name));
  }
  return out;
}

result<std::vector<std::string>> btrfs_driver::list_sandboxes() const {
  return list_subvolumes(root_ / "sandboxes", false);
}

result<std::vector<std::string>> btrfs_driver::list_checkpoints() const {
  return list_subvolumes(root_ / "checkpoints", false);
}

result<std::vector<std::string>> btrfs_driver::list_templates() const {
  return list_subvolumes(templates_dir(), true);
}

result<rootfs_usage> btrfs_driver::usage(std::string_view sandbox_id) {
  auto path = sandbox_path(sandbox_id);
  if (!path)
    return path.error();
  if (!options_.disk_quota)
    return make_status(errc::unavailable, "disk usage needs btrfs quotas, which are off "
                                          "(rootfs_options.disk_quota=false)");
  auto id = btrfs_subvolume_id(*path);
  if (!id)
    return id.error();
  // qgroup numbers change only when a transaction commits.
  if (auto fd = open_fd(root_, O_RDONLY | O_DIRECTORY); fd && ::syncfs(fd->get()) != 0)
    return errno_status("cannot commit " + root_.string() + " before reading disk usage");
  auto qgroup = btrfs_qgroup(root_, *id);
  if (!qgroup)
    return qgroup.error();
  return rootfs_usage{qgroup->referenced_bytes, qgroup->exclusive_bytes,
                      qgroup->referenced_limit_bytes};
}

status btrfs_driver::detach() {
  if (!uses_image_)
    return status::ok();
  return unmount_image(image_, root_);
}

} // namespace airlock::worker
