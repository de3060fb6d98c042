#include "worker/rootfs/loop_image.hpp"

#include <fcntl.h>
#include <linux/loop.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "worker/command/command.hpp"
#include "worker/rootfs/fs_util.hpp"

namespace airlock::worker {

namespace {

// mkfs.btrfs refuses smaller devices (with single profiles it needs ~110 MiB).
constexpr uint64_t image_size_mb_min = 256;
// Another process may take the free device between GET_FREE and CONFIGURE.
constexpr int attach_attempts_max = 16;
// Autoclear detaches the device after the last close; give it this long.
constexpr auto detach_wait = std::chrono::milliseconds(3000);

std::filesystem::path absolute_lexical(const std::filesystem::path& path) {
  std::error_code ec;
  auto canonical = std::filesystem::weakly_canonical(path, ec);
  return ec ? std::filesystem::absolute(path, ec).lexically_normal() : canonical;
}

std::optional<mount_entry> mount_at(const std::filesystem::path& mount_point) {
  auto mounts = read_mounts();
  if (!mounts)
    return std::nullopt;
  auto target = absolute_lexical(mount_point).string();
  std::optional<mount_entry> found;
  for (auto& entry : *mounts)
    if (entry.mount_point == target)
      found = entry; // the last one is on top
  return found;
}

status create_image(const loop_image_options& options) {
  auto partial = options.image;
  partial += ".partial";
  {
    auto fd = open_fd(partial, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (!fd)
      return fd.error();
    if (::ftruncate(fd->get(), static_cast<off_t>(options.size_mb << 20)) != 0)
      return errno_status("cannot size the btrfs image " + partial.string());
  }
  command_options run;
  run.timeout_ms = options.mkfs_timeout_ms;
  // Single profiles: duplicating metadata inside one image file buys nothing.
  auto formatted = run_checked("formatting the btrfs image " + partial.string(),
                               {options.mkfs_btrfs, "-q", "-f", "-m", "single", "-d", "single",
                                "-L", "airlock-rootfs", partial.string()},
                               run);
  if (!formatted) {
    ::unlink(partial.c_str());
    if (formatted.code == errc::not_found)
      return make_status(errc::unavailable, formatted.message + " (package btrfs-progs)");
    return formatted;
  }
  // Renamed only once formatted: an image file is always a whole file system.
  if (::rename(partial.c_str(), options.image.c_str()) != 0)
    return errno_status("cannot rename " + partial.string() + " to " + options.image.string());
  return status::ok();
}

struct attached_loop {
  unique_fd fd; // closing it arms autoclear once the mount holds the device
  std::string device;
};

status configure_loop(int loop_fd, int image_fd, const std::filesystem::path& image) {
  loop_config config{};
  config.fd = static_cast<uint32_t>(image_fd);
  config.info.lo_flags = LO_FLAGS_AUTOCLEAR;
  auto name = image.string();
  std::strncpy(reinterpret_cast<char*>(config.info.lo_file_name), name.c_str(), LO_NAME_SIZE - 1);
  if (::ioctl(loop_fd, LOOP_CONFIGURE, &config) == 0)
    return status::ok();
  if (errno != EINVAL && errno != ENOTTY)
    return errno_status("cannot attach " + image.string() + " to a loop device");
  // Kernels before 5.8: the two-step interface.
  if (::ioctl(loop_fd, LOOP_SET_FD, image_fd) != 0)
    return errno_status("cannot attach " + image.string() + " to a loop device");
  if (::ioctl(loop_fd, LOOP_SET_STATUS64, &config.info) != 0) {
    auto failed = errno_status("cannot set autoclear on the loop device for " + image.string());
    ::ioctl(loop_fd, LOOP_CLR_FD, 0);
    return failed;
  }
  return status::ok();
}

result<attached_loop> attach_loop(const std::filesystem::path& image) {
  auto image_fd = open_fd(image, O_RDWR);
  if (!image_fd)
    return image_fd.error();
  auto control = open_fd("/dev/loop-control", O_RDWR);
  if (!control)
    return make_status(errc::unavailable, control.error().message
                                            + " (the loop module is needed for the btrfs image)");
  for (int attempt = 0; attempt < attach_attempts_max; ++attempt) {
    int number = ::ioctl(control->get(), LOOP_CTL_GET_FREE);
    if (number < 0)
      return errno_status("no free loop device for " + image.string());
    std::string device = "/dev/loop" + std::to_string(number);
    auto loop_fd = open_fd(device, O_RDWR);
    if (!loop_fd)
      return loop_fd.error();
    auto configured = configure_loop(loop_fd->get(), image_fd->get(), image);
    if (configured)
      return attached_loop{std::move(*loop_fd), device};
    if (configured.code != errc::wrong_state) // EBUSY: lost a race, take the next one
      return configured;
  }
  return make_status(errc::unavailable, "every free loop device was taken before " + image.string()
                                          + " could be attached; retry");
}

status mount_image(const loop_image_options& options, loop_image_state& state) {
  auto loop = attach_loop(options.image);
  if (!loop)
    return loop.error();
  state.loop_device = loop->device;
  if (::mount(loop->device.c_str(), options.mount_point.c_str(), "btrfs", MS_NODEV | MS_NOATIME,
              nullptr)
      != 0) {
    if (errno == ENODEV)
      return make_status(errc::unavailable, "this kernel has no btrfs support (mount said "
                                            "ENODEV); use the overlay driver");
    return errno_status("cannot mount " + options.image.string() + " (" + loop->device + ") at "
                        + options.mount_point.string());
  }
  state.mounted_now = true;
  return status::ok();
}

} // namespace

result<loop_image_state> ensure_image_mounted(const loop_image_options& options) {
  if (options.image.empty() || options.mount_point.empty())
    return make_status(errc::invalid_argument,
                       "the btrfs image needs an image path and a mount point");
  if (options.size_mb < image_size_mb_min)
    return make_status(errc::invalid_argument,
                       "image_size_mb must be at least " + std::to_string(image_size_mb_min));
  if (auto made = make_dirs(options.mount_point); !made)
    return made;
  loop_image_state state;
  if (auto existing = mount_at(options.mount_point)) {
    if (existing->fs_type != "btrfs")
      return make_status(errc::wrong_state,
                         options.mount_point.string() + " already has a " + existing->fs_type
                           + " file system mounted; unmount it or choose another data_dir");
    state.loop_device = existing->source;
    return state;
  }
  if (!path_exists(options.image)) {
    if (auto created = create_image(options); !created)
      return created;
    state.created = true;
  }
  if (auto mounted = mount_image(options, state); !mounted)
    return mounted;
  return state;
}

std::optional<std::string> find_loop_device(const std::filesystem::path& image) {
  auto target = absolute_lexical(image).string();
  auto names = list_dir("/sys/block");
  if (!names)
    return std::nullopt;
  for (const auto& name : *names) {
    if (name.rfind("loop", 0) != 0)
      continue;
    auto backing = read_file("/sys/block/" + name + "/loop/backing_file", 8192);
    if (!backing)
      continue;
    std::string_view text(*backing);
    while (!text.empty() && text.back() == '\n')
      text.remove_suffix(1);
    if (text == target || text == target + " (deleted)")
      return "/dev/" + name;
  }
  return std::nullopt;
}

status detach_loop_device(const std::string& device) {
  auto fd = open_fd(device, O_RDWR);
  if (!fd)
    return fd.error();
  if (::ioctl(fd->get(), LOOP_CLR_FD, 0) != 0 && errno != ENXIO)
    return errno_status("cannot detach " + device);
  return status::ok();
}

status unmount_image(const std::filesystem::path& image, const std::filesystem::path& mount_point) {
  // Two racing workers could have stacked two mounts; take them all off.
  for (int layer = 0; layer < 8 && mount_at(mount_point); ++layer) {
    if (::umount2(mount_point.c_str(), UMOUNT_NOFOLLOW) != 0) {
      if (errno == EBUSY)
        return make_status(errc::wrong_state, mount_point.string()
                                                + " is still in use (a sandbox or a shell has "
                                                  "files open in it); stop them and retry");
      return errno_status("cannot unmount " + mount_point.string());
    }
  }
  auto deadline = std::chrono::steady_clock::now() + detach_wait;
  auto device = find_loop_device(image);
  while (device && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    device = find_loop_device(image);
  }
  if (!device)
    return status::ok();
  if (auto detached = detach_loop_device(*device); !detached)
    return detached;
  if (find_loop_device(image))
    return make_status(errc::wrong_state,
                       *device + " still backs " + image.string()
                         + ": something else holds it open (another mount namespace?); it "
                           "detaches by itself when the last user closes it");
  return status::ok();
}

} // namespace airlock::worker
