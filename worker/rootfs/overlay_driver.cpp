#include "worker/rootfs/overlay_driver.hpp"

#include <stdio.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "schema/atomic_file.hpp"
#include "worker/command/command.hpp"
#include "worker/rootfs/fs_util.hpp"

namespace airlock::worker {

namespace {

constexpr std::string_view staging_suffix = ".staging";
constexpr std::string_view partial_suffix = ".partial";
constexpr std::string_view manifest_suffix = ".manifest.json";
// mount(2) takes at most one page of options.
constexpr size_t mount_options_bytes_max = 4000;

bool is_real_directory(const std::filesystem::path& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// An overlay is mounted on `merged` when it is on another device than its parent.
bool is_mounted(const std::filesystem::path& merged) {
  struct stat self {};
  struct stat parent {};
  return ::stat(merged.c_str(), &self) == 0 && ::stat(merged.parent_path().c_str(), &parent) == 0
         && self.st_dev != parent.st_dev;
}

std::string join_layers(const std::vector<std::filesystem::path>& lowers, char separator) {
  std::string out;
  for (const auto& layer : lowers) {
    if (!out.empty())
      out += separator;
    out += layer.string();
  }
  return out;
}

} // namespace

overlay_driver::overlay_driver(const rootfs_options& options)
    : options_(options), root_(options.data_dir / "overlay") {}

result<std::unique_ptr<overlay_driver>> overlay_driver::open(const rootfs_options& options) {
  auto dir = options.data_dir.string();
  if (!options.data_dir.is_absolute() || dir.find_first_of(":,\\") != std::string::npos)
    return make_status(errc::invalid_argument,
                       "data_dir must be an absolute path without ':', ',' or '\\' (overlay mount "
                       "options cannot carry them), got '"
                         + dir + "'");
  std::unique_ptr<overlay_driver> driver(new overlay_driver(options));
  if (auto prepared = driver->prepare(); !prepared)
    return prepared;
  return driver;
}

status overlay_driver::prepare() {
  if (auto made = make_dirs(options_.data_dir, 0700); !made)
    return made;
  // Sandbox trees hold files their root user chose (setuid binaries too): no
  // other host user may reach them.
  if (auto made = make_dirs(root_, 0700); !made)
    return made;
  if (::chmod(root_.c_str(), 0700) != 0)
    return errno_status("cannot restrict the mode of " + root_.string());
  for (const char* dir : {"templates", "sandboxes", "checkpoints"})
    if (auto made = make_dirs(root_ / dir, 0700); !made)
      return made;
  return status::ok();
}

std::filesystem::path overlay_driver::templates_dir() const { return root_ / "templates"; }

std::filesystem::path overlay_driver::sandbox_dir(std::string_view sandbox_id) const {
  return root_ / "sandboxes" / std::string(sandbox_id);
}

std::filesystem::path overlay_driver::checkpoint_dir(std::string_view checkpoint_id) const {
  return root_ / "checkpoints" / std::string(checkpoint_id);
}

result<std::filesystem::path> overlay_driver::create_template(std::string_view name) {
  if (auto valid = check_name("template name", name); !valid)
    return valid;
  if (has_template(name))
    return make_status(errc::already_exists, "template '" + std::string(name)
                                               + "' is already built; delete it to rebuild");
  auto staging = templates_dir() / (std::string(name) + std::string(staging_suffix));
  // A staging tree left by a crashed build is half-populated: start over.
  if (auto unmounted = unmount_below(staging); !unmounted)
    return unmounted;
  if (auto removed = remove_tree(staging, options_.command_timeout_ms); !removed)
    return removed;
  if (::mkdir(staging.c_str(), 0755) != 0)
    return errno_status("cannot create " + staging.string());
  return staging;
}

result<std::filesystem::path> overlay_driver::template_from_sandbox(std::string_view,
                                                                    std::string_view name) {
  return make_status(errc::unimplemented,
                     "template " + std::string(name)
                       + ": builds with run steps need the btrfs driver (a sandbox's files "
                         "become the template as a snapshot); this worker uses overlay");
}

status overlay_driver::seal_template(std::string_view name) {
  if (auto valid = check_name("template name", name); !valid)
    return valid;
  auto staging = templates_dir() / (std::string(name) + std::string(staging_suffix));
  if (!is_real_directory(staging))
    return make_status(errc::not_found, "no staged template '" + std::string(name)
                                          + "' to seal; call create_template first");
  auto final_path = templates_dir() / std::string(name);
  if (::renameat2(AT_FDCWD, staging.c_str(), AT_FDCWD, final_path.c_str(), RENAME_NOREPLACE) != 0)
    return errno_status("cannot move the sealed template to " + final_path.string());
  return status::ok();
}

bool overlay_driver::has_template(std::string_view name) const {
  return is_valid_name(name) && is_real_directory(templates_dir() / std::string(name));
}

status overlay_driver::delete_template(std::string_view name) {
  if (auto valid = check_name("template name", name); !valid)
    return valid;
  auto final_path = templates_dir() / std::string(name);
  if (auto unused = check_unused(final_path, "template '" + std::string(name) + "'"); !unused)
    return unused;
  for (auto path :
       {templates_dir() / (std::string(name) + std::string(staging_suffix)), final_path})
    if (auto removed = remove_tree(path, options_.command_timeout_ms); !removed)
      return removed;
  auto manifest = templates_dir() / (std::string(name) + std::string(manifest_suffix));
  if (::unlink(manifest.c_str()) != 0 && errno != ENOENT)
    return errno_status("cannot delete " + manifest.string());
  return status::ok();
}

status overlay_driver::check_disk_limit(uint64_t disk_mb) const {
  if (disk_mb == 0 || options_.overlay_ignore_disk_limit)
    return status::ok();
  return make_status(errc::invalid_argument,
                     "the overlay root filesystem driver cannot enforce a disk limit (asked for "
                       + std::to_string(disk_mb)
                       + " MiB): pass disk_mb=0, set rootfs_options.overlay_ignore_disk_limit, or "
                         "run the worker where btrfs is available");
}

status overlay_driver::mount_sandbox(const std::filesystem::path& dir, const layers& lowers) const {
  for (const auto& layer : lowers)
    if (!is_real_directory(layer))
      return make_status(errc::not_found, "layer " + layer.string() + " of " + dir.string()
                                            + " is missing; delete this sandbox");
  // No redirects or metacopy: an upper directory copied into a checkpoint must
  // stand on its own as a lower layer.
  std::string data = "lowerdir=" + join_layers(lowers, ':')
                     + ",upperdir=" + (dir / "upper").string()
                     + ",workdir=" + (dir / "work").string() + ",redirect_dir=off,metacopy=off";
  if (data.size() > mount_options_bytes_max)
    return make_status(errc::resource_exhausted,
                       "too many layers below " + dir.string()
                         + " for one overlay mount (a long chain of forks of forks); fork from "
                           "an earlier checkpoint or use btrfs");
  auto merged = dir / "merged";
  if (::mount("overlay", merged.c_str(), "overlay", MS_NODEV, data.c_str()) != 0)
    return errno_status("cannot mount the overlay at " + merged.string()
                        + (errno == ENODEV ? " (no overlayfs in this kernel)" : ""));
  return status::ok();
}

result<overlay_driver::layers> overlay_driver::read_layers(const std::filesystem::path& dir) const {
  auto text = read_file(dir / "lowers", 64 * 1024);
  if (!text)
    return text.error();
  layers lowers;
  std::string_view rest(*text);
  while (!rest.empty()) {
    auto nl = rest.find('\n');
    auto line = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? std::string_view{} : rest.substr(nl + 1);
    if (!line.empty())
      lowers.emplace_back(line);
  }
  if (lowers.empty())
    return make_status(errc::corrupt_record, (dir / "lowers").string() + " lists no layers");
  return lowers;
}

result<std::filesystem::path> overlay_driver::make_sandbox(std::string_view sandbox_id,
                                                           const layers& lowers) {
  auto dir = sandbox_dir(sandbox_id);
  if (::mkdir(dir.c_str(), 0700) != 0) {
    if (errno == EEXIST)
      return make_status(errc::already_exists,
                         "sandbox '" + std::string(sandbox_id) + "' already exists");
    return errno_status("cannot create " + dir.string());
  }
  status made = status::ok();
  for (const char* sub : {"upper", "work", "merged"})
    if (made && ::mkdir((dir / sub).c_str(), 0755) != 0)
      made = errno_status("cannot create " + (dir / sub).string());
  if (made)
    made = write_file_atomically((dir / "lowers").string(), join_layers(lowers, '\n') + "\n", 0644);
  if (made)
    made = mount_sandbox(dir, lowers);
  if (!made) {
    (void)unmount_below(dir);
    (void)remove_tree(dir, options_.command_timeout_ms);
    return made;
  }
  return dir / "merged";
}

result<std::filesystem::path> overlay_driver::create_sandbox(std::string_view sandbox_id,
                                                             std::string_view template_name,
                                                             uint64_t disk_mb) {
  if (auto valid = check_name("sandbox id", sandbox_id); !valid)
    return valid;
  if (auto limit = check_disk_limit(disk_mb); !limit)
    return limit;
  auto source = template_path(template_name);
  if (!source)
    return source.error();
  return make_sandbox(sandbox_id, {*source});
}

result<std::filesystem::path> overlay_driver::sandbox_path(std::string_view sandbox_id) {
  if (auto valid = check_name("sandbox id", sandbox_id); !valid)
    return valid;
  auto dir = sandbox_dir(sandbox_id);
  if (!is_real_directory(dir))
    return make_status(errc::not_found, "no sandbox '" + std::string(sandbox_id) + "' on disk");
  if (is_mounted(dir / "merged"))
    return dir / "merged";
  // The host rebooted (or detach() ran) since it was created.
  auto lowers = read_layers(dir);
  if (!lowers)
    return lowers.error();
  if (auto mounted = mount_sandbox(dir, *lowers); !mounted)
    return mounted;
  return dir / "merged";
}

result<uint64_t> overlay_driver::checkpoint(std::string_view sandbox_id,
                                            std::string_view checkpoint_id) {
  if (auto valid = check_name("checkpoint id", checkpoint_id); !valid)
    return valid;
  if (auto valid = check_name("sandbox id", sandbox_id); !valid)
    return valid;
  auto source = sandbox_dir(sandbox_id);
  auto lowers = read_layers(source);
  if (!lowers)
    return lowers.code() == errc::not_found
             ? make_status(errc::not_found, "no sandbox '" + std::string(sandbox_id) + "' on disk")
             : lowers.error();
  auto target = checkpoint_dir(checkpoint_id);
  if (path_exists(target))
    return make_status(errc::already_exists,
                       "checkpoint '" + std::string(checkpoint_id) + "' already exists");
  auto partial = target;
  partial += std::string(partial_suffix);
  if (auto removed = remove_tree(partial, options_.command_timeout_ms); !removed)
    return removed;
  if (::mkdir(partial.c_str(), 0700) != 0)
    return errno_status("cannot create " + partial.string());
  command_options copy;
  copy.timeout_ms = options_.command_timeout_ms;
  // cp -a keeps whiteouts (0/0 character devices) and the overlay xattrs.
  auto copied = run_checked(
    "copying the upper directory of sandbox " + std::string(sandbox_id),
    {"cp", "-a", "--reflink=auto", "--", (source / "upper").string(), (partial / "upper").string()},
    copy);
  if (copied)
    copied =
      write_file_atomically((partial / "lowers").string(), join_layers(*lowers, '\n') + "\n", 0644);
  if (copied && ::rename(partial.c_str(), target.c_str()) != 0)
    copied = errno_status("cannot rename " + partial.string() + " to " + target.string());
  if (!copied) {
    (void)remove_tree(partial, options_.command_timeout_ms);
    return copied;
  }
  auto size = measure_tree(target / "upper");
  return size ? size->allocated_bytes : uint64_t{0};
}

result<std::filesystem::path>
overlay_driver::checkpoint_path(std::string_view checkpoint_id) const {
  if (auto valid = check_name("checkpoint id", checkpoint_id); !valid)
    return valid;
  auto dir = checkpoint_dir(checkpoint_id);
  if (!is_real_directory(dir / "upper"))
    return make_status(errc::not_found, "no checkpoint '" + std::string(checkpoint_id) + "'");
  return dir / "upper";
}

result<std::filesystem::path> overlay_driver::fork(std::string_view checkpoint_id,
                                                   std::string_view new_sandbox_id,
                                                   uint64_t disk_mb) {
  if (auto valid = check_name("sandbox id", new_sandbox_id); !valid)
    return valid;
  if (auto limit = check_disk_limit(disk_mb); !limit)
    return limit;
  auto upper = checkpoint_path(checkpoint_id);
  if (!upper)
    return upper.error();
  auto below = read_layers(checkpoint_dir(checkpoint_id));
  if (!below)
    return below.error();
  layers lowers{*upper};
  lowers.insert(lowers.end(), below->begin(), below->end());
  return make_sandbox(new_sandbox_id, lowers);
}

status overlay_driver::delete_sandbox(std::string_view sandbox_id) {
  if (auto valid = check_name("sandbox id", sandbox_id); !valid)
    return valid;
  auto dir = sandbox_dir(sandbox_id);
  if (!path_exists(dir))
    return status::ok();
  if (auto unmounted = unmount_below(dir); !unmounted)
    return unmounted;
  return remove_tree(dir, options_.command_timeout_ms);
}

status overlay_driver::check_unused(const std::filesystem::path& layer,
                                    std::string_view what) const {
  for (const char* kind : {"sandboxes", "checkpoints"}) {
    auto names = list_dir(root_ / kind);
    if (!names)
      return names.error();
    for (const auto& name : *names) {
      auto lowers = read_layers(root_ / kind / name);
      if (!lowers)
        continue;
      for (const auto& lower : *lowers)
        if (lower == layer)
          return make_status(errc::wrong_state,
                             std::string(what) + " is a layer of " + std::string(kind) + "/" + name
                               + " (overlay layers are shared, not copied); delete that first");
    }
  }
  return status::ok();
}

status overlay_driver::delete_checkpoint(std::string_view checkpoint_id) {
  if (auto valid = check_name("checkpoint id", checkpoint_id); !valid)
    return valid;
  auto dir = checkpoint_dir(checkpoint_id);
  if (!path_exists(dir))
    return status::ok();
  if (auto unused = check_unused(dir / "upper", "checkpoint '" + std::string(checkpoint_id) + "'");
      !unused)
    return unused;
  return remove_tree(dir, options_.command_timeout_ms);
}

namespace {

result<std::vector<std::string>> valid_directories(const std::filesystem::path& dir) {
  auto names = list_dir(dir);
  if (!names)
    return names.error();
  std::vector<std::string> out;
  for (auto& name : *names)
    if (is_valid_name(name) && is_real_directory(dir / name))
      out.push_back(std::move(name));
  return out;
}

} // namespace

result<std::vector<std::string>> overlay_driver::list_sandboxes() const {
  return valid_directories(root_ / "sandboxes");
}

result<std::vector<std::string>> overlay_driver::list_checkpoints() const {
  return valid_directories(root_ / "checkpoints");
}

result<std::vector<std::string>> overlay_driver::list_templates() const {
  return valid_directories(templates_dir());
}

result<rootfs_usage> overlay_driver::usage(std::string_view sandbox_id) {
  if (auto valid = check_name("sandbox id", sandbox_id); !valid)
    return valid;
  auto upper = sandbox_dir(sandbox_id) / "upper";
  if (!is_real_directory(upper))
    return make_status(errc::not_found, "no sandbox '" + std::string(sandbox_id) + "' on disk");
  auto size = measure_tree(upper);
  if (!size)
    return size.error();
  return rootfs_usage{size->allocated_bytes, size->allocated_bytes, 0};
}

status overlay_driver::detach() {
  auto names = list_sandboxes();
  if (!names)
    return names.error();
  for (const auto& name : *names) {
    auto merged = sandbox_dir(name) / "merged";
    if (is_mounted(merged) && ::umount2(merged.c_str(), UMOUNT_NOFOLLOW) != 0)
      return errno_status("cannot unmount " + merged.string()
                          + (errno == EBUSY ? " (still in use: stop the sandbox first)" : ""));
  }
  return status::ok();
}

} // namespace airlock::worker
