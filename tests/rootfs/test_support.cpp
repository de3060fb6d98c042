#include "tests/rootfs/test_support.hpp"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/file.h>
#include <unistd.h>

#include <cstdlib>

#include <vector>

#include "tests/support/environment.hpp"
#include "worker/command/command.hpp"
#include "worker/rootfs/apt_sources.hpp"
#include "worker/rootfs/fs_util.hpp"
#include "worker/rootfs/loop_image.hpp"
#include "worker/rootfs/overlay_driver.hpp"
#include "worker/rootfs/templates.hpp"

#ifndef AIRLOCK_GUEST_BINARY
#define AIRLOCK_GUEST_BINARY ""
#endif

namespace airlock::worker::test {

scratch_dir::scratch_dir() {
  auto pattern = (std::filesystem::temp_directory_path() / "airlock-rootfs-XXXXXX").string();
  if (::mkdtemp(pattern.data()) != nullptr)
    path_ = pattern;
}

scratch_dir::~scratch_dir() {
  if (path_.empty())
    return;
  (void)unmount_below(path_);
  detach_loops_below(path_);
  (void)remove_tree(path_);
}

int detach_loops_below(const std::filesystem::path& dir) {
  auto names = list_dir("/sys/block");
  if (!names)
    return 0;
  int detached = 0;
  auto prefix = dir.string() + "/";
  for (const auto& name : *names) {
    auto backing = read_file("/sys/block/" + name + "/loop/backing_file", 8192);
    if (backing && backing->rfind(prefix, 0) == 0 && detach_loop_device("/dev/" + name))
      ++detached;
  }
  return detached;
}

std::optional<std::string> btrfs_unavailable_reason() {
  if (auto missing = airlock::test::root_missing(
        "the btrfs driver tests use loop devices, mount and btrfs ioctls"))
    return missing;
  auto filesystems = read_file("/proc/filesystems");
  if (!filesystems || filesystems->find("btrfs") == std::string::npos) {
    // The module may just not be loaded yet.
    (void)run_command({"modprobe", "btrfs"});
    filesystems = read_file("/proc/filesystems");
    if (!filesystems || filesystems->find("btrfs") == std::string::npos)
      return "this kernel has no btrfs (not in /proc/filesystems, modprobe btrfs failed)";
  }
  if (::access("/dev/loop-control", R_OK | W_OK) != 0)
    return "no /dev/loop-control: loop devices are unavailable here";
  if (find_program("mkfs.btrfs", "").empty())
    return "mkfs.btrfs is not installed (package btrfs-progs)";
  return std::nullopt;
}

std::optional<std::string> overlay_unavailable_reason() {
  if (auto missing = airlock::test::root_missing("the overlay driver tests mount"))
    return missing;
  auto filesystems = read_file("/proc/filesystems");
  if (!filesystems || filesystems->find("overlay") == std::string::npos) {
    (void)run_command({"modprobe", "overlay"});
    filesystems = read_file("/proc/filesystems");
    if (!filesystems || filesystems->find("overlay") == std::string::npos)
      return "this kernel has no overlayfs (not in /proc/filesystems)";
  }
  return std::nullopt;
}

std::string run_in_chroot(const std::filesystem::path& root, const std::vector<std::string>& argv) {
  std::vector<std::string> full{"chroot", root.string()};
  full.insert(full.end(), argv.begin(), argv.end());
  std::string output;
  command_options options;
  options.timeout_ms = 30'000;
  options.on_line = [&output](std::string_view line) { output += std::string(line) + "\n"; };
  auto ran = run_command(full, options);
  if (!ran)
    return "error: " + ran.error().message;
  while (!output.empty() && output.back() == '\n')
    output.pop_back();
  if (!ran->succeeded())
    return "error: exit " + std::to_string(ran->exit_code) + ": " + output;
  return output;
}

std::filesystem::path test_cache_dir() {
  const char* override_dir = std::getenv("AIRLOCK_TEST_CACHE");
  return override_dir != nullptr ? override_dir : "/var/tmp/airlock-test-cache";
}

std::filesystem::path base_template_cache_dir() { return test_cache_dir() / "base"; }

base_template_lock::base_template_lock() {
  std::error_code ec;
  std::filesystem::create_directories(test_cache_dir(), ec);
  auto path = test_cache_dir() / "base.lock";
  fd_.reset(::open(path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600));
  // Without the lock file the build still runs, only unserialised.
  if (fd_.valid())
    while (::flock(fd_.get(), LOCK_EX) != 0 && errno == EINTR) {
    }
}

base_template ensure_base_template() {
  base_template found;
  if (auto reason = overlay_unavailable_reason()) {
    found.skip_reason = reason;
    return found;
  }
  template_options templates;
  auto mirror = find_host_mirror(templates.apt_dir, templates.suite);
  if (!mirror) {
    found.skip_reason = "cannot build the base template: " + mirror.error().message;
    return found;
  }
  base_template_lock lock;
  scratch_dir scratch;
  rootfs_options options;
  options.data_dir = base_template_cache_dir();
  auto driver = overlay_driver::open(options);
  if (!driver) {
    found.error = driver.error().message;
    return found;
  }
  template_builder builder(**driver, templates);
  auto manifest = builder.ensure("base");
  if (!manifest) {
    // An unreachable mirror is this host's limit, not a failure of the test.
    if (auto reachable = probe_mirror(*mirror, templates.suite, 5'000); !reachable)
      found.skip_reason = "cannot build the base template: " + reachable.message;
    else
      found.error = manifest.error().message;
    return found;
  }
  auto root = (*driver)->template_path("base");
  if (!root)
    found.error = root.error().message;
  else
    found.root = *root;
  return found;
}

} // namespace airlock::worker::test
