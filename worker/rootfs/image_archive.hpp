#pragma once
// The image importer's internals, shared by its parts: archive reading and
// text helpers (image_archive.cpp), writing layers into a root
// (image_layers.cpp), the outer archive of an OCI or docker upload and its
// manifests (image_manifest.cpp). The interface is image_import.hpp.

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <new>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "schema/unique_fd.hpp"
#include "worker/rootfs/fs_util.hpp"
#include "worker/rootfs/image_import.hpp"

namespace airlock::worker::image_detail {

using json = nlohmann::json;
using tick_fn = std::function<void()>;

constexpr size_t read_buffer_bytes = 1 << 20;
constexpr uint64_t progress_interval_bytes = 4 << 20;
// Docker dedupes layers with member symlinks; a chain longer than this is a loop.
constexpr int member_symlink_hops_max = 16;
// An index may name another index (per platform); deeper nesting is not an image.
constexpr int index_depth_max = 4;
constexpr int64_t id_max = 0xfffffffe; // (uid_t)-1 means "unchanged" to chown
constexpr std::string_view whiteout_prefix = ".wh.";
constexpr std::string_view opaque_marker = ".wh..wh..opq";

constexpr std::string_view host_architecture() {
#if defined(__x86_64__)
  return "amd64";
#elif defined(__aarch64__)
  return "arm64";
#else
  return "unknown";
#endif
}

// ---- text

std::string printable(std::string_view text);
std::string join_path(std::string_view dir, std::string_view name);
/// ("a/b", "c") for "a/b/c"; ("", "c") for "c".
std::pair<std::string, std::string> split_last(std::string_view path);
bool is_sha256_hex(std::string_view hex);
/// An archive limit was reached: which one, its value and what to do.
status limit_hit(const std::string& what, std::string_view limit, uint64_t value,
                 std::string_view advice);
/// `failure` with "<context>: " before its message.
status in_context(std::string_view context, status failure);

// ---- sha256

class sha256 {
public:
  sha256() : ctx_(EVP_MD_CTX_new()) {
    if (!ctx_ || EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr) != 1)
      throw std::bad_alloc();
  }
  void update(const void* data, size_t size) { EVP_DigestUpdate(ctx_.get(), data, size); }
  std::string hex() {
    std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
    unsigned size = 0;
    EVP_DigestFinal_ex(ctx_.get(), digest.data(), &size);
    std::string out;
    for (unsigned i = 0; i < size; ++i) {
      char pair[3];
      std::snprintf(pair, sizeof pair, "%02x", digest[i]);
      out += pair;
    }
    return out;
  }

private:
  struct free_ctx {
    void operator()(EVP_MD_CTX* ctx) const { EVP_MD_CTX_free(ctx); }
  };
  std::unique_ptr<EVP_MD_CTX, free_ctx> ctx_;
};

// ---- reading archives

// A file fed to libarchive through our own read callback, so that its sha256
// and the bytes read so far (for progress) come along with one read.
class file_source {
public:
  file_source() = default;
  file_source(const file_source&) = delete;
  file_source& operator=(const file_source&) = delete;

  status open(const std::filesystem::path& path) {
    auto fd = open_fd(path, O_RDONLY);
    if (!fd)
      return fd.error();
    struct stat st {};
    if (::fstat(fd->get(), &st) != 0)
      return errno_status("cannot stat " + path.string());
    if (!S_ISREG(st.st_mode))
      return make_status(errc::invalid_argument, path.string() + " is not a regular file");
    fd_ = std::move(*fd);
    path_ = path;
    size_ = static_cast<uint64_t>(st.st_size);
    buffer_.resize(read_buffer_bytes);
    return status::ok();
  }

  status attach(archive* a) {
    if (archive_read_open(a, this, nullptr, &file_source::read_callback, nullptr) != ARCHIVE_OK)
      return failure(a);
    return status::ok();
  }

  /// Reads what libarchive left after the end-of-archive marker, so that the
  /// digest covers the whole file.
  status drain() {
    for (;;) {
      auto n = read_some();
      if (n < 0)
        return failure_;
      if (n == 0)
        return status::ok();
    }
  }

  /// Whether a read of the file itself failed (an I/O error, not bad content).
  bool read_failed() const noexcept { return !failure_.is_ok(); }

  /// Why libarchive failed: our read error if there was one, else its own.
  status failure(archive* a) const {
    if (read_failed())
      return failure_;
    const char* why = archive_error_string(a);
    return make_status(errc::invalid_argument,
                       std::string("not a tar archive, or corrupt or truncated: ")
                         + (why != nullptr ? why : "unknown error"));
  }

  uint64_t size() const noexcept { return size_; }
  uint64_t bytes_read() const noexcept { return bytes_read_; }
  std::string hex_digest() { return hash_.hex(); }

private:
  static la_ssize_t read_callback(archive* a, void* self, const void** buffer) noexcept {
    auto* source = static_cast<file_source*>(self);
    auto n = source->read_some();
    if (n < 0) {
      archive_set_error(a, EIO, "%s", source->failure_.message.c_str());
      return -1;
    }
    *buffer = source->buffer_.data();
    return n;
  }

  // noexcept: libarchive (C) calls it; a failure is kept, not thrown.
  la_ssize_t read_some() noexcept {
    ssize_t n = 0;
    do {
      n = ::read(fd_.get(), buffer_.data(), buffer_.size());
    } while (n < 0 && errno == EINTR);
    if (n < 0) {
      try {
        failure_ = errno_status("cannot read " + path_.string());
      } catch (...) {
        failure_ = status{errc::io_error, {}};
      }
      return -1;
    }
    bytes_read_ += static_cast<uint64_t>(n);
    hash_.update(buffer_.data(), static_cast<size_t>(n));
    return n;
  }

  unique_fd fd_;
  std::filesystem::path path_;
  uint64_t size_ = 0;
  uint64_t bytes_read_ = 0;
  std::vector<char> buffer_;
  sha256 hash_;
  status failure_;
};

struct archive_free {
  void operator()(archive* a) const { archive_read_free(a); }
};
using archive_ptr = std::unique_ptr<archive, archive_free>;

/// A reader of tar (or, `raw`, of one compressed stream) with libarchive's
/// built-in decoders only.
archive_ptr new_reader(bool raw);

using entry_fn = std::function<status(archive*, archive_entry*)>;

/// Calls `fn` for each entry of the tar in `source`.
status for_each_entry(file_source& source, const entry_fn& fn);

class progress_reporter {
public:
  explicit progress_reporter(const import_progress_fn& fn) : fn_(fn) {}

  void start(std::string step, uint64_t bytes_total) {
    report_ = {std::move(step), 0, bytes_total, 0, 0};
    emit();
  }
  /// Layer `layer` (from 1) of `layers`: the step "layer <layer>/<layers>".
  void start_layer(uint32_t layer, uint32_t layers, uint64_t bytes_total) {
    report_ = {"layer " + std::to_string(layer) + "/" + std::to_string(layers), 0, bytes_total,
               layer, layers};
    emit();
  }
  void update(uint64_t bytes_done) {
    if (bytes_done >= report_.bytes_done + progress_interval_bytes) {
      report_.bytes_done = std::min(bytes_done, report_.bytes_total);
      emit();
    }
  }
  void end() {
    report_.bytes_done = report_.bytes_total;
    emit();
  }

private:
  void emit() {
    if (fn_)
      fn_(report_);
  }
  const import_progress_fn& fn_;
  import_progress report_;
};

// ---- layers (image_layers.cpp)

/// "a/b/c" for "./a//b/c/"; "" for the root itself. `what` names the path in
/// messages ("entry", "hard link target").
result<std::string> normalize_path(std::string_view raw, const archive_limits& limits,
                                   std::string_view what);
result<std::vector<std::string>> list_names(int dir_fd, std::string_view shown);
/// Removes the tree at `path` (its final component not followed).
status remove_path_tree(const std::filesystem::path& path);
status write_all_at(int fd, const char* data, size_t size, off_t offset, std::string_view shown);

struct entry_meta {
  mode_t mode = 0; ///< permission bits with setuid, setgid and sticky
  uid_t uid = 0;
  gid_t gid = 0;
  std::array<timespec, 2> times{}; ///< atime, mtime (UTIME_OMIT when the archive has none)
};

// One entry of a layer, its path split and its metadata read.
struct entry_ref {
  std::string path;  ///< normalized
  std::string dir;   ///< path of the parent ("" for the root)
  std::string name;  ///< last component
  std::string shown; ///< the raw path, quoted, for messages
  entry_meta meta;
};

// ---- applying layers

// Writes the entries of one or more layers into the root, relative to the
// root's descriptor, never following a symlink and never leaving the root.
// Directory modes, owners and times are applied last (finish()), deepest
// first: earlier, a read-only directory would refuse its own children and
// each child would change its directory's mtime.
class tree_writer {
public:
  tree_writer(int root_fd, const archive_limits& limits, bool set_owners)
      : root_fd_(root_fd), limits_(limits), set_owners_(set_owners) {}

  /// Whiteouts of the layer that starts spare what it writes itself.
  void begin_layer() { written_.clear(); }

  status apply(archive* a, archive_entry* entry, const tick_fn& tick);
  status finish();

  uint64_t entries() const noexcept { return entries_; }
  uint64_t bytes() const noexcept { return bytes_; }

private:
  result<unique_fd> open_dir(std::string_view dir, bool create, std::string_view shown);
  result<int> parent_dir(const entry_ref& ref);
  void mark_written(std::string_view path);
  status remove_path(int parent, const std::string& name, const std::string& path);
  status remove_lower(int parent, const std::string& name, const std::string& path);
  result<bool> clear_path(int parent, const entry_ref& ref, bool keep_dir);
  status set_attributes(int fd, const entry_meta& meta, std::string_view shown);
  status set_attributes_at(int parent, const entry_ref& ref, bool set_mode);

  status apply_whiteout(const entry_ref& ref);
  status write_dir(const entry_ref& ref);
  status write_file(archive* a, archive_entry* entry, const entry_ref& ref, const tick_fn& tick);
  status copy_data(archive* a, int fd, uint64_t size, const entry_ref& ref, const tick_fn& tick);
  status write_symlink(const entry_ref& ref, const char* target);
  status write_hardlink(const entry_ref& ref, const char* raw_target);
  status write_fifo(const entry_ref& ref);

  int root_fd_;
  const archive_limits& limits_;
  bool set_owners_;
  uint64_t entries_ = 0;
  uint64_t bytes_ = 0;
  /// Paths the current layer has written, with their ancestors.
  std::unordered_set<std::string> written_;
  /// Deferred directory metadata by path; sorted, so parents precede children.
  std::map<std::string, entry_meta> dirs_;
  /// The last parent directory written into: entries come grouped by directory.
  std::string cached_dir_;
  unique_fd cached_fd_;
};

/// Applies the tar in `source` as layer `layer` of `layers`.
status apply_layer(tree_writer& writer, file_source& source, uint32_t layer, uint32_t layers,
                   progress_reporter& progress);

// ---- the outer archive of an oci or docker upload

struct staged_file {
  std::filesystem::path path; ///< in the temporary directory
  uint64_t size = 0;
  std::string sha256; ///< hex
};

/// "a/c" for "a/b/../c"; nullopt when ".." climbs above the top. Lexical:
/// member symlinks are resolved by the table, never on disk.
std::optional<std::string> lexical_normal(std::string_view path);

// The outer archive's regular files, unpacked to flat names in a temporary
// directory (layers must be applied in manifest order, which is not archive
// order), each with its sha256; symlinks and hard links as a table.
class outer_archive {
public:
  outer_archive(std::filesystem::path dir, const archive_limits& limits)
      : dir_(std::move(dir)), limits_(limits), buffer_(read_buffer_bytes) {}

  status unpack(file_source& source, progress_reporter& progress) {
    progress.start("unpack", source.size());
    tick_fn tick = [&] { progress.update(source.bytes_read()); };
    auto unpacked = for_each_entry(source, [&](archive* a, archive_entry* entry) {
      auto done = stage(a, entry, tick);
      tick();
      return done;
    });
    if (!unpacked)
      return unpacked;
    progress.end();
    return status::ok();
  }

  /// The file `member` names, following member symlinks; `named_by` says
  /// where the name came from, for the message.
  result<const staged_file*> find(std::string_view member, std::string_view named_by) const {
    auto path = lexical_normal(member);
    for (int hop = 0; path && hop <= member_symlink_hops_max; ++hop) {
      if (auto file = files_.find(*path); file != files_.end())
        return &file->second;
      auto link = links_.find(*path);
      if (link == links_.end())
        break;
      const auto& target = link->second;
      path = lexical_normal(target.starts_with('/') ? target
                                                    : join_path(split_last(*path).first, target));
    }
    return make_status(errc::invalid_argument, "the archive has no file " + printable(member)
                                                 + " (named by " + std::string(named_by) + ")");
  }

  result<json> read_json(const staged_file& file, std::string_view shown) const {
    if (file.size > limits_.metadata_bytes_max)
      return limit_hit(std::string(shown) + " is " + std::to_string(file.size) + " bytes",
                       "metadata_bytes_max", limits_.metadata_bytes_max,
                       "raise the limit; image metadata is normally a few KiB");
    auto text = read_file(file.path, limits_.metadata_bytes_max);
    if (!text)
      return text.error();
    auto parsed = json::parse(*text, nullptr, false);
    if (parsed.is_discarded())
      return make_status(errc::invalid_argument, std::string(shown) + " is not valid JSON");
    return parsed;
  }

private:
  status stage(archive* a, archive_entry* entry, const tick_fn& tick) {
    if (++entries_ > limits_.entries_max)
      return limit_hit("the archive holds more than " + std::to_string(limits_.entries_max)
                         + " entries",
                       "entries_max", limits_.entries_max,
                       "raise the limit or check that this is an image archive");
    const char* raw = archive_entry_pathname(entry);
    if (raw == nullptr)
      return make_status(errc::invalid_argument, "a member of the archive has no readable path");
    auto path = normalize_path(raw, limits_, "archive member");
    if (!path)
      return path.error();
    if (const char* target = archive_entry_hardlink(entry)) {
      auto to = lexical_normal(target);
      auto file = to ? files_.find(*to) : files_.end();
      if (file == files_.end())
        return make_status(errc::invalid_argument, "archive member " + printable(raw)
                                                     + " is a hard link to a missing member");
      files_[*path] = file->second;
      return status::ok();
    }
    auto type = archive_entry_filetype(entry);
    if (type == AE_IFLNK && archive_entry_symlink(entry) != nullptr)
      links_[*path] = archive_entry_symlink(entry);
    if (type != AE_IFREG)
      return status::ok(); // directories and the rest: an image layout needs none
    return copy_member(a, entry, *path, tick);
  }

  status copy_member(archive* a, archive_entry* entry, const std::string& member,
                     const tick_fn& tick) {
    int64_t declared = archive_entry_size_is_set(entry) ? archive_entry_size(entry) : 0;
    uint64_t size = declared > 0 ? static_cast<uint64_t>(declared) : 0;
    if (size > limits_.uncompressed_bytes_max - bytes_)
      return limit_hit("the archive's files add up to more than "
                         + std::to_string(limits_.uncompressed_bytes_max) + " bytes",
                       "uncompressed_bytes_max", limits_.uncompressed_bytes_max,
                       "raise the limit or make the image smaller");
    staged_file staged{dir_ / ("member-" + std::to_string(next_id_++)), 0, {}};
    auto fd = open_fd(staged.path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
    if (!fd)
      return fd.error();
    sha256 hash;
    for (;;) {
      // archive_read_data fills holes of sparse members with zeros: the digest
      // is over the content.
      auto n = archive_read_data(a, buffer_.data(), buffer_.size());
      if (n < 0)
        return make_status(errc::invalid_argument,
                           "archive member " + printable(member) + ": cannot read its data: "
                             + (archive_error_string(a) ? archive_error_string(a) : "unknown"));
      if (n == 0)
        break;
      if (staged.size + static_cast<uint64_t>(n) > size)
        return make_status(errc::invalid_argument,
                           "archive member " + printable(member) + " is longer than it says");
      if (auto written = write_all_at(fd->get(), buffer_.data(), static_cast<size_t>(n),
                                      static_cast<off_t>(staged.size), staged.path.string());
          !written)
        return written;
      hash.update(buffer_.data(), static_cast<size_t>(n));
      staged.size += static_cast<uint64_t>(n);
      tick();
    }
    bytes_ += staged.size;
    staged.sha256 = hash.hex();
    files_[member] = std::move(staged);
    return status::ok();
  }

  std::filesystem::path dir_;
  const archive_limits& limits_;
  std::vector<char> buffer_;
  uint64_t entries_ = 0;
  uint64_t bytes_ = 0;
  uint64_t next_id_ = 0;
  std::map<std::string, staged_file> files_;
  std::map<std::string, std::string> links_; ///< member symlink -> its target as written
};

// ---- manifests and configs (image_manifest.cpp)

struct image_plan {
  std::vector<const staged_file*> layers;
  std::vector<std::string> layer_names; ///< for messages and progress
  json config;
  std::string digest;
};

result<image_plan> plan_oci(const outer_archive& outer);
result<image_plan> plan_docker(const outer_archive& outer, const archive_limits& limits);
/// The image config's Env, WorkingDir, User, Entrypoint and Cmd into `out`.
status read_config(const json& document, image_config& out);

} // namespace airlock::worker::image_detail
