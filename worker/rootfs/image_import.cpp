#include "worker/rootfs/image_import.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include "worker/rootfs/image_archive.hpp"

namespace airlock::worker {

using namespace image_detail;

namespace {

// ---- the import

status check_archive_size(const file_source& source, const archive_limits& limits) {
  if (source.size() > limits.compressed_bytes_max)
    return limit_hit("the archive is " + std::to_string(source.size()) + " bytes",
                     "compressed_bytes_max", limits.compressed_bytes_max,
                     "raise the limit or upload a smaller archive");
  return status::ok();
}

result<unique_fd> open_empty_root(const std::filesystem::path& root) {
  auto fd = open_fd(root, O_RDONLY | O_DIRECTORY);
  if (!fd)
    return fd.error();
  auto names = list_names(fd->get(), root.string());
  if (!names)
    return names.error();
  if (!names->empty())
    return make_status(errc::wrong_state, "the import target " + root.string()
                                            + " is not empty; import into a new directory");
  return std::move(*fd);
}

// Deletes the temporary directory when the import ends, however it ends.
class staging_dir {
public:
  explicit staging_dir(std::filesystem::path path) : path_(std::move(path)) {}
  ~staging_dir() {
    if (created_)
      (void)remove_path_tree(path_);
  }
  staging_dir(const staging_dir&) = delete;
  staging_dir& operator=(const staging_dir&) = delete;

  status create() {
    if (auto stale = remove_path_tree(path_); !stale) // left by a crash
      return stale;
    if (::mkdir(path_.c_str(), 0700) != 0)
      return errno_status("cannot create " + path_.string());
    created_ = true;
    return status::ok();
  }
  const std::filesystem::path& path() const noexcept { return path_; }

private:
  std::filesystem::path path_;
  bool created_ = false;
};

std::filesystem::path staging_path(const std::filesystem::path& root) {
  auto clean = root.lexically_normal();
  if (!clean.has_filename())
    clean = clean.parent_path();
  return clean.string() + ".import";
}

result<image_config> import_tar(const std::filesystem::path& archive, int root_fd,
                                const archive_limits& limits, progress_reporter& progress) {
  file_source source;
  if (auto opened = source.open(archive); !opened)
    return opened;
  if (auto fits = check_archive_size(source, limits); !fits)
    return fits;
  tree_writer writer(root_fd, limits, ::geteuid() == 0);
  if (auto applied = apply_layer(writer, source, 1, 1, progress); !applied)
    return in_context("the archive " + printable(archive.filename().string()), applied);
  if (auto drained = source.drain(); !drained)
    return drained;
  progress.start("finish", 0);
  if (auto finished = writer.finish(); !finished)
    return finished;
  image_config out;
  out.digest = "sha256:" + source.hex_digest();
  out.layers = 1;
  out.entries = writer.entries();
  out.bytes = writer.bytes();
  return out;
}

result<image_config> import_layout(const std::filesystem::path& archive, archive_format format,
                                   const std::filesystem::path& root, int root_fd,
                                   const archive_limits& limits, progress_reporter& progress) {
  file_source source;
  if (auto opened = source.open(archive); !opened)
    return opened;
  if (auto fits = check_archive_size(source, limits); !fits)
    return fits;
  staging_dir staging(staging_path(root));
  if (auto created = staging.create(); !created)
    return created;
  outer_archive outer(staging.path(), limits);
  if (auto unpacked = outer.unpack(source, progress); !unpacked)
    return in_context("the archive " + printable(archive.filename().string()), unpacked);
  auto plan = format == archive_format::oci ? plan_oci(outer) : plan_docker(outer, limits);
  if (!plan)
    return plan.error();
  image_config out;
  if (auto read = read_config(plan->config, out); !read)
    return read;
  tree_writer writer(root_fd, limits, ::geteuid() == 0);
  auto count = plan->layers.size();
  for (size_t i = 0; i < count; ++i) {
    file_source layer;
    if (auto opened = layer.open(plan->layers[i]->path); !opened)
      return opened;
    if (auto applied = apply_layer(writer, layer, static_cast<uint32_t>(i + 1),
                                   static_cast<uint32_t>(count), progress);
        !applied)
      return in_context(plan->layer_names[i], applied);
  }
  progress.start("finish", 0);
  if (auto finished = writer.finish(); !finished)
    return finished;
  out.digest = plan->digest;
  out.layers = count;
  out.entries = writer.entries();
  out.bytes = writer.bytes();
  return out;
}

} // namespace

result<archive_format> parse_archive_format(std::string_view name) {
  if (name == "oci")
    return archive_format::oci;
  if (name == "docker")
    return archive_format::docker;
  if (name == "tar")
    return archive_format::tar;
  return make_status(errc::invalid_argument,
                     "unknown archive format " + printable(name) + ": use oci, docker or tar");
}

std::string_view to_string(archive_format format) noexcept {
  switch (format) {
    case archive_format::oci: return "oci";
    case archive_format::docker: return "docker";
    case archive_format::tar: return "tar";
  }
  return "unknown";
}

result<image_config> import_image(const std::filesystem::path& archive, archive_format format,
                                  const std::filesystem::path& root, const archive_limits& limits,
                                  const import_progress_fn& progress) {
  progress_reporter reporter(progress);
  try {
    auto root_fd = open_empty_root(root);
    if (!root_fd)
      return root_fd.error();
    if (format == archive_format::tar)
      return import_tar(archive, root_fd->get(), limits, reporter);
    return import_layout(archive, format, root, root_fd->get(), limits, reporter);
  } catch (const std::bad_alloc&) {
    return make_status(errc::resource_exhausted, "out of memory while importing the image");
  } catch (const json::exception& e) {
    return make_status(errc::invalid_argument,
                       std::string("the image metadata is malformed: ") + e.what());
  }
}

} // namespace airlock::worker
