#include "worker/rootfs/image_template.hpp"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>

#include "schema/atomic_file.hpp"
#include "worker/rootfs/fs_util.hpp"

namespace airlock::worker {

namespace {

/// openat2 with RESOLVE_IN_ROOT: `path` is resolved as if `root_fd` were /,
/// symlinks included (glibc 2.36 has no wrapper).
int open_in_root(int root_fd, const char* path, uint64_t flags, uint64_t mode) {
  open_how how{};
  how.flags = flags | O_CLOEXEC;
  how.mode = mode;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  return static_cast<int>(::syscall(SYS_openat2, root_fd, path, &how, sizeof how));
}

std::string single_quoted(const std::string& word) {
  std::string out = "'";
  for (char c : word) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

} // namespace

std::string start_cmd_of_image(const image_config& image) {
  std::string line;
  for (const auto* words : {&image.entrypoint, &image.cmd})
    for (const auto& word : *words)
      line += (line.empty() ? "" : " ") + single_quoted(word);
  return line;
}

status install_guest_in_root(const std::filesystem::path& root,
                             const std::filesystem::path& guest_binary) {
  auto root_fd = open_fd(root, O_RDONLY | O_DIRECTORY);
  if (!root_fd)
    return root_fd.error();
  // /sbin may be missing (an image of one static binary) or a symlink
  // (merged /usr): made when missing, followed inside the root otherwise.
  if (::mkdirat(root_fd->get(), "sbin", 0755) != 0 && errno != EEXIST)
    return errno_status("cannot create /sbin in " + root.string());
  auto source = open_fd(guest_binary, O_RDONLY);
  if (!source)
    return source.error();
  const int target =
    open_in_root(root_fd->get(), "/sbin/airlock-guest", O_WRONLY | O_CREAT | O_TRUNC, 0755);
  if (target < 0)
    return errno_status("cannot write /sbin/airlock-guest in the image (is its /sbin a link to a "
                        "directory the image lacks?)");
  unique_fd out(target);
  char buffer[1 << 16];
  for (;;) {
    const ssize_t got = ::read(source->get(), buffer, sizeof buffer);
    if (got < 0)
      return errno_status("cannot read " + guest_binary.string());
    if (got == 0)
      break;
    for (ssize_t done = 0; done < got;) {
      const ssize_t put = ::write(out.get(), buffer + done, static_cast<size_t>(got - done));
      if (put < 0)
        return errno_status("cannot write /sbin/airlock-guest in the image");
      done += put;
    }
  }
  if (::fchmod(out.get(), 0755) != 0)
    return errno_status("cannot make /sbin/airlock-guest executable");
  return status::ok();
}

result<template_manifest> build_image_template(rootfs_driver& driver,
                                               const template_options& options,
                                               const image_template_request& request,
                                               const import_progress_fn& progress) {
  const auto manifest_file = manifest_path(driver.templates_dir(), request.name);
  if (driver.has_template(request.name)) {
    auto text = read_file(manifest_file);
    if (!text)
      return text.error();
    return parse_manifest(*text);
  }
  auto dir = driver.create_template(request.name);
  if (!dir)
    return dir.error();
  template_manifest manifest;
  auto image = import_image(request.archive, request.format, *dir, request.limits, progress);
  status built = image ? install_guest_in_root(*dir, options.guest_binary) : image.error();
  if (built) {
    auto size = measure_tree(*dir);
    manifest.name = request.name;
    manifest.created_unix_s = std::chrono::duration_cast<std::chrono::seconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count();
    manifest.size_bytes = size ? size->apparent_bytes : 0;
    manifest.files = size ? size->files : 0;
    manifest.source = std::string(to_string(request.format)) + " archive " + image->digest;
    manifest.guest_binary = options.guest_binary.string();
    manifest.start_cmd = request.start_cmd.empty() ? start_cmd_of_image(*image) : request.start_cmd;
    manifest.env = image->env;
    manifest.workdir = image->working_dir;
    manifest.user = image->user;
    manifest.digest = image->digest;
    built = write_file_atomically(manifest_file.string(), manifest_to_json(manifest), 0644);
  }
  if (built)
    built = driver.seal_template(request.name);
  if (!built) {
    (void)unmount_below(*dir);
    (void)driver.delete_template(request.name);
    return built;
  }
  return manifest;
}

} // namespace airlock::worker
