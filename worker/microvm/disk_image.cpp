#include "worker/microvm/disk_image.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "worker/command/command.hpp"
#include "worker/rootfs/templates.hpp"

namespace airlock::worker::microvm {
namespace fs = std::filesystem;
namespace {

bool valid_key(const std::string& key) {
  if (key.empty() || key.size() > 128 || key[0] == '.')
    return false;
  for (char c : key)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-')
      return false;
  return true;
}

/// Bytes the tree's regular files hold, plus a block per entry for metadata.
uint64_t tree_bytes(const std::string& tree) {
  uint64_t total = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(tree, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    total += 4096;
    if (it->is_regular_file(ec) && !it->is_symlink(ec))
      total += it->file_size(ec);
  }
  return total;
}

/// FNV-1a: a stable cache key, not a security boundary (the manifest is the
/// worker's own file).
std::string hash_hex(std::string_view bytes) {
  uint64_t hash = 14695981039346656037ull;
  for (unsigned char c : bytes) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(hash));
  return out;
}

} // namespace

result<std::string> template_disk(const std::string& tree, const std::string& images_dir,
                                  const std::string& key, const disk_image_options& options) {
  if (!valid_key(key))
    return make_status(errc::invalid_argument, "microvm: bad image key '" + key + "'");
  std::error_code ec;
  if (!fs::is_directory(tree, ec))
    return make_status(errc::not_found, "microvm: no template tree at " + tree);
  const std::string path = images_dir + "/" + key + ".ext4";
  if (fs::exists(path, ec))
    return path;
  fs::create_directories(images_dir, ec);
  const std::string partial = path + ".partial";
  fs::remove(partial, ec);
  const uint64_t size_mb = tree_bytes(tree) / (1024 * 1024) * 5 / 4 + options.headroom_mb;
  command_options run;
  run.timeout_ms = options.command_timeout_ms;
  // -d copies the tree with its owners and modes; root_owner keeps / root's
  // whoever runs mkfs. No journal discard pass: the file is new and sparse.
  auto made = run_checked("make the template's ext4 image",
                          {"mkfs.ext4", "-q", "-F", "-E", "root_owner=0:0,nodiscard", "-d", tree,
                           partial, std::to_string(size_mb) + "M"},
                          run);
  if (!made.is_ok()) {
    fs::remove(partial, ec);
    return made;
  }
  fs::rename(partial, path, ec);
  if (ec)
    return make_status(errc::io_error, "microvm: rename " + partial + ": " + ec.message());
  return path;
}

result<std::string> template_disk_of(const rootfs_driver& driver, std::string_view name,
                                     const std::string& images_dir,
                                     const disk_image_options& options) {
  auto tree = driver.template_path(name);
  if (!tree)
    return tree.error();
  std::ifstream manifest(manifest_path(driver.templates_dir(), name));
  if (!manifest)
    return make_status(errc::not_found,
                       "microvm: template '" + std::string(name) + "' has no manifest");
  std::stringstream bytes;
  bytes << manifest.rdbuf();
  const std::string prefix = std::string(name) + "-";
  const std::string key = prefix + hash_hex(bytes.str());
  auto image = template_disk(tree->string(), images_dir, key, options);
  if (!image)
    return image;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(images_dir, ec)) {
    const std::string file = entry.path().filename().string();
    if (file.rfind(prefix, 0) == 0 && file != key + ".ext4"
        && file.find('-', prefix.size()) == std::string::npos)
      fs::remove(entry.path(), ec);
  }
  return image;
}

status sandbox_disk(const std::string& image, const std::string& to,
                    const disk_image_options& options) {
  std::error_code ec;
  if (fs::exists(to, ec))
    return make_status(errc::already_exists, "microvm: " + to + " exists");
  command_options run;
  run.timeout_ms = options.command_timeout_ms;
  return run_checked("copy the template's disk for the sandbox",
                     {"cp", "--reflink=auto", "--sparse=always", image, to}, run);
}

} // namespace airlock::worker::microvm
