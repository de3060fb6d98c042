#include "worker/rootfs/image_template.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>

#include "schema/atomic_file.hpp"
#include "worker/rootfs/fs_util.hpp"

namespace airlock::worker {

namespace {

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

result<template_manifest> build_image_template(rootfs_driver& driver,
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
  result<image_config> image = make_status(errc::internal, "no import ran");
  try {
    image = import_image(request.archive, request.format, *dir, request.limits, progress);
  } catch (const import_stopped& stop) {
    image = make_status(errc::cancelled, stop.what());
  }
  status built = image ? status::ok() : image.error();
  if (built) {
    auto size = measure_tree(*dir);
    manifest.name = request.name;
    manifest.created_unix_s = std::chrono::duration_cast<std::chrono::seconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count();
    manifest.size_bytes = size ? size->apparent_bytes : 0;
    manifest.files = size ? size->files : 0;
    manifest.source = std::string(to_string(request.format)) + " archive " + image->digest;
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
