#include "tests/rootfs/test_support.hpp"

#include <stdlib.h>
#include <unistd.h>

#include <vector>

#include "worker/rootfs/fs_util.hpp"
#include "worker/rootfs/loop_image.hpp"
#include "worker/command/command.hpp"

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
  if (::geteuid() != 0)
    return "the btrfs driver tests need root (loop devices, mount, btrfs ioctls)";
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
  if (::geteuid() != 0)
    return "the overlay driver tests need root (mount)";
  auto filesystems = read_file("/proc/filesystems");
  if (!filesystems || filesystems->find("overlay") == std::string::npos) {
    (void)run_command({"modprobe", "overlay"});
    filesystems = read_file("/proc/filesystems");
    if (!filesystems || filesystems->find("overlay") == std::string::npos)
      return "this kernel has no overlayfs (not in /proc/filesystems)";
  }
  return std::nullopt;
}

std::filesystem::path guest_binary_for_tests(const std::filesystem::path& dir) {
  std::filesystem::path built = AIRLOCK_GUEST_BINARY;
  if (!built.empty() && path_exists(built))
    return built;
  auto dummy = dir / "airlock-guest";
  (void)write_file(dummy, "#!/bin/sh\necho dummy airlock-guest\n", 0755);
  return dummy;
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

} // namespace airlock::worker::test
