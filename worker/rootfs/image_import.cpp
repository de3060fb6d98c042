#include "worker/rootfs/image_import.hpp"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <new>
#include <nlohmann/json.hpp>
#include <optional>
#include <unordered_set>
#include <utility>

#include "schema/unique_fd.hpp"
#include "worker/rootfs/fs_util.hpp"

namespace airlock::worker {

namespace {

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

// Entry names come from the archive: bounded and with control bytes escaped,
// so that a message stays one readable line in logs and HTTP errors.
std::string printable(std::string_view text) {
  constexpr size_t shown_max = 200;
  std::string out = "'";
  for (size_t i = 0; i < text.size() && i < shown_max; ++i) {
    auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7f || c == '\'' || c == '\\') {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", c);
      out += escaped;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (text.size() > shown_max)
    out += "...";
  return out + "'";
}

std::string join_path(std::string_view dir, std::string_view name) {
  return dir.empty() ? std::string(name) : std::string(dir) + "/" + std::string(name);
}

// ("a/b", "c") for "a/b/c"; ("", "c") for "c".
std::pair<std::string, std::string> split_last(std::string_view path) {
  auto slash = path.rfind('/');
  if (slash == std::string_view::npos)
    return {std::string(), std::string(path)};
  return {std::string(path.substr(0, slash)), std::string(path.substr(slash + 1))};
}

bool is_sha256_hex(std::string_view hex) {
  return hex.size() == 64 && std::all_of(hex.begin(), hex.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

status limit_hit(const std::string& what, std::string_view limit, uint64_t value,
                 std::string_view advice) {
  return make_status(errc::resource_exhausted, what + " (archive_limits." + std::string(limit)
                                                 + " = " + std::to_string(value)
                                                 + "): " + std::string(advice));
}

status in_context(std::string_view context, status failure) {
  failure.message = std::string(context) + ": " + failure.message;
  return failure;
}

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

// Built-in decoders only: archive_read_support_filter_all would also run
// external programs (lrzip, lzop, grzip) on untrusted input.
archive_ptr new_reader(bool raw) {
  archive_ptr a(archive_read_new());
  if (!a)
    throw std::bad_alloc();
  archive_read_support_filter_gzip(a.get());
  archive_read_support_filter_zstd(a.get());
  archive_read_support_filter_xz(a.get());
  archive_read_support_filter_bzip2(a.get());
  if (raw)
    archive_read_support_format_raw(a.get());
  else
    archive_read_support_format_tar(a.get());
  return a;
}

using entry_fn = std::function<status(archive*, archive_entry*)>;

// Calls `fn` for each entry of the tar in `source`.
status for_each_entry(file_source& source, const entry_fn& fn) {
  auto a = new_reader(false);
  if (auto attached = source.attach(a.get()); !attached)
    return attached;
  for (;;) {
    archive_entry* entry = nullptr;
    int r = archive_read_next_header(a.get(), &entry);
    if (r == ARCHIVE_EOF)
      return status::ok();
    // A warning (a malformed pax attribute, a name in another charset) still
    // comes with a usable entry; ARCHIVE_RETRY does not.
    if (r != ARCHIVE_OK && r != ARCHIVE_WARN)
      return source.failure(a.get());
    if (auto done = fn(a.get(), entry); !done)
      return source.read_failed() ? source.failure(a.get()) : done;
  }
}

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

// ---- paths and metadata of entries

// "a/b/c" for "./a//b/c/"; "" for the root itself. `what` names the path in
// messages ("entry", "hard link target").
result<std::string> normalize_path(std::string_view raw, const archive_limits& limits,
                                   std::string_view what) {
  if (raw.size() > limits.path_bytes_max)
    return limit_hit(std::string(what) + " path " + printable(raw) + " is "
                       + std::to_string(raw.size()) + " bytes long",
                     "path_bytes_max", limits.path_bytes_max,
                     "raise the limit or shorten the path");
  if (raw.empty())
    return make_status(errc::invalid_argument, std::string(what) + " has an empty path");
  if (raw.front() == '/')
    return make_status(errc::invalid_argument,
                       std::string(what) + " path " + printable(raw)
                         + " is absolute; paths in an image are relative to its root");
  std::string out;
  size_t start = 0;
  while (start <= raw.size()) {
    auto slash = raw.find('/', start);
    auto end = slash == std::string_view::npos ? raw.size() : slash;
    auto part = raw.substr(start, end - start);
    start = end + 1;
    if (part.empty() || part == ".")
      continue;
    if (part == "..")
      return make_status(errc::invalid_argument,
                         std::string(what) + " path " + printable(raw)
                           + " has a '..' component, which could reach outside the root");
    if (part.size() > NAME_MAX)
      return make_status(errc::invalid_argument, std::string(what) + " path " + printable(raw)
                                                   + " has a component longer than "
                                                   + std::to_string(NAME_MAX) + " bytes");
    out = join_path(out, part);
  }
  return out;
}

struct entry_meta {
  mode_t mode = 0; ///< permission bits with setuid, setgid and sticky
  uid_t uid = 0;
  gid_t gid = 0;
  std::array<timespec, 2> times{}; ///< atime, mtime (UTIME_OMIT when the archive has none)
};

timespec to_timespec(int64_t seconds, long nanoseconds) {
  return timespec{static_cast<time_t>(seconds),
                  nanoseconds >= 0 && nanoseconds < 1'000'000'000 ? nanoseconds : 0};
}

result<entry_meta> read_meta(archive_entry* entry, std::string_view shown) {
  entry_meta meta;
  meta.mode = archive_entry_mode(entry) & 07777;
  int64_t uid = archive_entry_uid(entry);
  int64_t gid = archive_entry_gid(entry);
  if (uid < 0 || uid > id_max || gid < 0 || gid > id_max)
    return make_status(errc::invalid_argument, "entry " + std::string(shown)
                                                 + " has an out-of-range owner "
                                                 + std::to_string(uid) + ":" + std::to_string(gid));
  meta.uid = static_cast<uid_t>(uid);
  meta.gid = static_cast<gid_t>(gid);
  meta.times = {timespec{0, UTIME_OMIT}, timespec{0, UTIME_OMIT}};
  if (archive_entry_mtime_is_set(entry)) {
    meta.times[1] = to_timespec(archive_entry_mtime(entry), archive_entry_mtime_nsec(entry));
    meta.times[0] = meta.times[1];
  }
  if (archive_entry_atime_is_set(entry))
    meta.times[0] = to_timespec(archive_entry_atime(entry), archive_entry_atime_nsec(entry));
  return meta;
}

// One entry of a layer, its path split and its metadata read.
struct entry_ref {
  std::string path;  ///< normalized
  std::string dir;   ///< path of the parent ("" for the root)
  std::string name;  ///< last component
  std::string shown; ///< the raw path, quoted, for messages
  entry_meta meta;
};

// ---- file-system primitives relative to directory descriptors

result<std::vector<std::string>> list_names(int dir_fd, std::string_view shown) {
  int fd = ::fcntl(dir_fd, F_DUPFD_CLOEXEC, 0);
  if (fd < 0)
    return errno_status("cannot list " + std::string(shown));
  DIR* dir = ::fdopendir(fd);
  if (dir == nullptr) {
    ::close(fd);
    return errno_status("cannot list " + std::string(shown));
  }
  std::unique_ptr<DIR, int (*)(DIR*)> closer(dir, &::closedir);
  ::rewinddir(dir); // the duplicate shares dir_fd's offset
  std::vector<std::string> names;
  errno = 0;
  while (auto* item = ::readdir(dir)) {
    std::string_view name(item->d_name);
    if (name != "." && name != "..")
      names.emplace_back(name);
  }
  if (errno != 0)
    return errno_status("cannot list " + std::string(shown));
  return names;
}

// Runs `visit(dir_fd, child, child_shown)` for every entry of directory
// `name` in `parent` (opened without following a symlink).
status
for_each_child(int parent, const std::string& name, const std::string& shown,
               const std::function<status(int, const std::string&, const std::string&)>& visit) {
  unique_fd dir(::openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dir)
    return errno_status("cannot open " + printable(shown));
  auto names = list_names(dir.get(), printable(shown));
  if (!names)
    return names.error();
  for (const auto& child : *names)
    if (auto done = visit(dir.get(), child, join_path(shown, child)); !done)
      return done;
  return status::ok();
}

// Deletes `name` in `parent` and, for a directory, everything below it,
// without following symlinks.
status remove_entry(int parent, const std::string& name, const std::string& shown) {
  struct stat st {};
  if (::fstatat(parent, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
    return errno == ENOENT ? status::ok() : errno_status("cannot stat " + printable(shown));
  if (!S_ISDIR(st.st_mode)) {
    if (::unlinkat(parent, name.c_str(), 0) != 0 && errno != ENOENT)
      return errno_status("cannot remove " + printable(shown));
    return status::ok();
  }
  // Without root a directory needs write and search permission to be emptied.
  if ((st.st_mode & S_IRWXU) != S_IRWXU)
    (void)::fchmodat(parent, name.c_str(), (st.st_mode & 07777) | S_IRWXU, 0);
  if (auto emptied = for_each_child(parent, name, shown, remove_entry); !emptied)
    return emptied;
  if (::unlinkat(parent, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT)
    return errno_status("cannot remove " + printable(shown));
  return status::ok();
}

// Removes the tree at `path` (its final component not followed).
status remove_path_tree(const std::filesystem::path& path) {
  auto parent = open_fd(path.has_parent_path() ? path.parent_path() : ".", O_RDONLY | O_DIRECTORY);
  if (!parent)
    return parent.code() == errc::not_found ? status::ok() : parent.error();
  return remove_entry(parent->get(), path.filename().string(), path.string());
}

status write_all_at(int fd, const char* data, size_t size, off_t offset, std::string_view shown) {
  while (size > 0) {
    auto n = ::pwrite(fd, data, size, offset);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return errno_status("cannot write " + std::string(shown));
    data += n;
    size -= static_cast<size_t>(n);
    offset += n;
  }
  return status::ok();
}

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

// Opens `dir` below the root one component at a time with O_NOFOLLOW, so
// that neither a symlink in the archive nor one written earlier is followed.
// `create` makes missing components (tar archives may omit parents).
result<unique_fd> tree_writer::open_dir(std::string_view dir, bool create, std::string_view shown) {
  unique_fd current(::fcntl(root_fd_, F_DUPFD_CLOEXEC, 0));
  if (!current)
    return errno_status("cannot duplicate the root's descriptor");
  size_t start = 0;
  while (start < dir.size()) {
    auto slash = dir.find('/', start);
    auto end = slash == std::string_view::npos ? dir.size() : slash;
    std::string part(dir.substr(start, end - start));
    auto so_far = dir.substr(0, end);
    start = end + 1;
    constexpr int flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
    int fd = ::openat(current.get(), part.c_str(), flags);
    if (fd < 0 && errno == ENOENT && create) {
      if (::mkdirat(current.get(), part.c_str(), 0755) != 0 && errno != EEXIST)
        return errno_status("entry " + std::string(shown) + ": cannot create directory "
                            + printable(so_far));
      fd = ::openat(current.get(), part.c_str(), flags);
    }
    if (fd < 0) {
      int error = errno;
      if (error == ELOOP || error == ENOTDIR)
        return make_status(errc::invalid_argument,
                           "entry " + std::string(shown) + ": " + printable(so_far)
                             + " is a symlink or not a directory; entries are never written "
                               "through one, since it could lead outside the root");
      return errno_status("entry " + std::string(shown) + ": cannot open " + printable(so_far),
                          error);
    }
    current.reset(fd);
  }
  return current;
}

result<int> tree_writer::parent_dir(const entry_ref& ref) {
  if (cached_fd_ && cached_dir_ == ref.dir)
    return cached_fd_.get();
  auto fd = open_dir(ref.dir, true, ref.shown);
  if (!fd)
    return fd.error();
  cached_dir_ = ref.dir;
  cached_fd_ = std::move(*fd);
  return cached_fd_.get();
}

void tree_writer::mark_written(std::string_view path) {
  // Ancestors go in too: an opaque directory above keeps them for this
  // layer's entries while its lower contents go.
  while (!path.empty()) {
    if (!written_.emplace(path).second)
      return; // its ancestors are in already
    auto slash = path.rfind('/');
    path = slash == std::string_view::npos ? std::string_view() : path.substr(0, slash);
  }
}

status tree_writer::remove_path(int parent, const std::string& name, const std::string& path) {
  // The cached directory may be at or below `path`: never write into a
  // directory that is no longer in the tree.
  if (cached_fd_ && (cached_dir_ == path || cached_dir_.starts_with(path + "/")))
    cached_fd_.reset();
  dirs_.erase(path);
  auto prefix = path + "/";
  for (auto it = dirs_.lower_bound(prefix); it != dirs_.end() && it->first.starts_with(prefix);)
    it = dirs_.erase(it);
  return remove_entry(parent, name, path);
}

// Removes what lower layers put at `path`, keeping what this layer wrote.
status tree_writer::remove_lower(int parent, const std::string& name, const std::string& path) {
  if (!written_.contains(path))
    return remove_path(parent, name, path);
  struct stat st {};
  if (::fstatat(parent, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
    return errno == ENOENT ? status::ok() : errno_status("cannot stat " + printable(path));
  if (!S_ISDIR(st.st_mode))
    return status::ok();
  return for_each_child(parent, name, path,
                        [this](int dir, const std::string& child, const std::string& shown) {
                          return remove_lower(dir, child, shown);
                        });
}

// Makes room for `ref` in `parent`: removes what is there unless it is a
// directory and `keep_dir`. Returns whether a directory was kept.
result<bool> tree_writer::clear_path(int parent, const entry_ref& ref, bool keep_dir) {
  struct stat st {};
  if (::fstatat(parent, ref.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT)
      return false;
    return errno_status("entry " + ref.shown + ": cannot stat it");
  }
  if (keep_dir && S_ISDIR(st.st_mode))
    return true;
  if (auto removed = remove_path(parent, ref.name, ref.path); !removed)
    return in_context("entry " + ref.shown, removed);
  return false;
}

// Owner first: chown clears setuid and setgid, so the mode goes on after it.
status tree_writer::set_attributes(int fd, const entry_meta& meta, std::string_view shown) {
  if (set_owners_ && ::fchown(fd, meta.uid, meta.gid) != 0)
    return errno_status("entry " + std::string(shown) + ": cannot set its owner");
  if (::fchmod(fd, meta.mode) != 0)
    return errno_status("entry " + std::string(shown) + ": cannot set its mode");
  if (::futimens(fd, meta.times.data()) != 0)
    return errno_status("entry " + std::string(shown) + ": cannot set its times");
  return status::ok();
}

// For entries that cannot be opened (symlinks, FIFOs) just after creating them.
status tree_writer::set_attributes_at(int parent, const entry_ref& ref, bool set_mode) {
  const char* name = ref.name.c_str();
  const auto& meta = ref.meta;
  if (set_owners_ && ::fchownat(parent, name, meta.uid, meta.gid, AT_SYMLINK_NOFOLLOW) != 0)
    return errno_status("entry " + ref.shown + ": cannot set its owner");
  if (set_mode && ::fchmodat(parent, name, meta.mode, 0) != 0)
    return errno_status("entry " + ref.shown + ": cannot set its mode");
  if (::utimensat(parent, name, meta.times.data(), AT_SYMLINK_NOFOLLOW) != 0)
    return errno_status("entry " + ref.shown + ": cannot set its times");
  return status::ok();
}

status tree_writer::apply(archive* a, archive_entry* entry, const tick_fn& tick) {
  if (++entries_ > limits_.entries_max)
    return limit_hit(
      "the image's layers hold more than " + std::to_string(limits_.entries_max) + " entries",
      "entries_max", limits_.entries_max, "raise the limit or build the image with fewer files");
  const char* raw = archive_entry_pathname(entry);
  if (raw == nullptr)
    return make_status(errc::invalid_argument,
                       "entry " + std::to_string(entries_) + " of the layer has no readable path");
  auto path = normalize_path(raw, limits_, "entry");
  if (!path)
    return path.error();
  auto meta = read_meta(entry, printable(raw));
  if (!meta)
    return meta.error();
  auto [dir, name] = split_last(*path);
  entry_ref ref{*path, std::move(dir), std::move(name), printable(raw), *meta};
  auto type = archive_entry_filetype(entry);
  if (ref.path.empty()) { // "./": the root directory's own metadata
    if (type != AE_IFDIR || archive_entry_hardlink(entry) != nullptr)
      return make_status(errc::invalid_argument,
                         "entry " + ref.shown + " names the root but is not a directory");
    dirs_[""] = ref.meta;
    return status::ok();
  }
  if (ref.name.starts_with(whiteout_prefix))
    return apply_whiteout(ref);
  mark_written(ref.path);
  if (const char* target = archive_entry_hardlink(entry))
    return write_hardlink(ref, target);
  switch (type) {
    case AE_IFDIR: return write_dir(ref);
    case AE_IFREG: return write_file(a, entry, ref, tick);
    case AE_IFLNK: return write_symlink(ref, archive_entry_symlink(entry));
    case AE_IFIFO: return write_fifo(ref);
    case AE_IFCHR:
    case AE_IFBLK:
      return make_status(errc::invalid_argument,
                         "entry " + ref.shown + " is a "
                           + (type == AE_IFCHR ? "character" : "block") + " device ("
                           + std::to_string(archive_entry_rdevmajor(entry)) + ":"
                           + std::to_string(archive_entry_rdevminor(entry))
                           + "): device nodes are refused (the sandbox runtime provides "
                             "/dev); remove it from the image");
    default:
      return make_status(errc::invalid_argument,
                         "entry " + ref.shown + " has an unsupported file type");
  }
}

// `.wh.NAME` deletes NAME from lower layers; `.wh..wh..opq` deletes all
// that lower layers put in its directory. Either spares what this layer
// writes, before or after the whiteout (written_ holds what came before;
// what comes after is written after the deletion).
status tree_writer::apply_whiteout(const entry_ref& ref) {
  mark_written(ref.dir); // the whiteout's directory is part of this layer
  bool opaque = ref.name == opaque_marker;
  if (!opaque && ref.name.starts_with(".wh..wh."))
    return status::ok(); // aufs bookkeeping (.wh..wh.plnk), not content
  std::string target = ref.name.substr(whiteout_prefix.size());
  if (!opaque && (target.empty() || target == "." || target == ".."))
    return make_status(errc::invalid_argument,
                       "entry " + ref.shown + " is a whiteout of no valid name");
  auto dir = open_dir(ref.dir, false, ref.shown);
  if (!dir)
    return dir.code() == errc::not_found ? status::ok() : dir.error();
  if (!opaque)
    return remove_lower(dir->get(), target, join_path(ref.dir, target));
  auto names = list_names(dir->get(), printable(ref.dir));
  if (!names)
    return names.error();
  for (const auto& child : *names)
    if (auto removed = remove_lower(dir->get(), child, join_path(ref.dir, child)); !removed)
      return removed;
  return status::ok();
}

status tree_writer::write_dir(const entry_ref& ref) {
  auto parent = parent_dir(ref);
  if (!parent)
    return parent.error();
  auto kept = clear_path(*parent, ref, true);
  if (!kept)
    return kept.error();
  // 0700 until finish(): writable for its children whatever the final mode.
  if (!*kept && ::mkdirat(*parent, ref.name.c_str(), 0700) != 0)
    return errno_status("entry " + ref.shown + ": cannot create the directory");
  dirs_[ref.path] = ref.meta;
  return status::ok();
}

status tree_writer::write_file(archive* a, archive_entry* entry, const entry_ref& ref,
                               const tick_fn& tick) {
  int64_t declared = archive_entry_size_is_set(entry) ? archive_entry_size(entry) : 0;
  uint64_t size = declared > 0 ? static_cast<uint64_t>(declared) : 0;
  if (size > limits_.uncompressed_bytes_max - bytes_)
    return limit_hit("the image's files add up to more than "
                       + std::to_string(limits_.uncompressed_bytes_max) + " bytes",
                     "uncompressed_bytes_max", limits_.uncompressed_bytes_max,
                     "raise the limit or make the image smaller");
  auto parent = parent_dir(ref);
  if (!parent)
    return parent.error();
  if (auto cleared = clear_path(*parent, ref, false); !cleared)
    return cleared.error();
  // O_EXCL after the unlink: never write through a link left by a lower layer.
  unique_fd fd(::openat(*parent, ref.name.c_str(),
                        O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd)
    return errno_status("entry " + ref.shown + ": cannot create the file");
  if (auto copied = copy_data(a, fd.get(), size, ref, tick); !copied)
    return copied;
  bytes_ += size;
  return set_attributes(fd.get(), ref.meta, ref.shown);
}

// Writes block by block at libarchive's offsets, so sparse files stay sparse.
status tree_writer::copy_data(archive* a, int fd, uint64_t size, const entry_ref& ref,
                              const tick_fn& tick) {
  for (;;) {
    const void* block = nullptr;
    size_t length = 0;
    la_int64_t offset = 0;
    int r = archive_read_data_block(a, &block, &length, &offset);
    if (r == ARCHIVE_EOF)
      break;
    if (r != ARCHIVE_OK) {
      const char* why = archive_error_string(a);
      return make_status(errc::invalid_argument, "entry " + ref.shown + ": cannot read its data: "
                                                   + (why != nullptr ? why : "unknown error"));
    }
    if (offset < 0 || static_cast<uint64_t>(offset) > size
        || length > size - static_cast<uint64_t>(offset))
      return make_status(errc::invalid_argument,
                         "entry " + ref.shown + " has data beyond its declared size");
    if (auto written = write_all_at(fd, static_cast<const char*>(block), length,
                                    static_cast<off_t>(offset), "entry " + ref.shown);
        !written)
      return written;
    tick();
  }
  if (::ftruncate(fd, static_cast<off_t>(size)) != 0) // a trailing hole
    return errno_status("entry " + ref.shown + ": cannot set its size");
  return status::ok();
}

status tree_writer::write_symlink(const entry_ref& ref, const char* target) {
  if (target == nullptr || *target == '\0')
    return make_status(errc::invalid_argument, "entry " + ref.shown + " is a symlink to nothing");
  if (std::strlen(target) > limits_.path_bytes_max)
    return limit_hit("the target of symlink " + ref.shown + " is longer than "
                       + std::to_string(limits_.path_bytes_max) + " bytes",
                     "path_bytes_max", limits_.path_bytes_max,
                     "raise the limit or shorten the target");
  auto parent = parent_dir(ref);
  if (!parent)
    return parent.error();
  if (auto cleared = clear_path(*parent, ref, false); !cleared)
    return cleared.error();
  // The target is stored as is: it is never followed while importing.
  if (::symlinkat(target, *parent, ref.name.c_str()) != 0)
    return errno_status("entry " + ref.shown + ": cannot create the symlink");
  return set_attributes_at(*parent, ref, false);
}

status tree_writer::write_hardlink(const entry_ref& ref, const char* raw_target) {
  auto target = normalize_path(raw_target, limits_, "hard link target");
  if (!target)
    return in_context("entry " + ref.shown, target.error());
  if (*target == ref.path)
    return status::ok(); // a link to itself changes nothing
  if (target->empty())
    return make_status(errc::invalid_argument,
                       "entry " + ref.shown + " is a hard link to the root directory");
  auto not_written = [&] {
    return make_status(errc::invalid_argument,
                       "entry " + ref.shown + " is a hard link to " + printable(raw_target)
                         + ", which is not in the root (the archive has not written it)");
  };
  auto [target_dir, target_name] = split_last(*target);
  auto from = open_dir(target_dir, false, ref.shown);
  if (!from)
    return from.code() == errc::not_found ? not_written() : from.error();
  struct stat st {};
  if (::fstatat(from->get(), target_name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
    return errno == ENOENT ? not_written()
                           : errno_status("entry " + ref.shown + ": cannot stat its target");
  if (S_ISDIR(st.st_mode))
    return make_status(errc::invalid_argument,
                       "entry " + ref.shown + " is a hard link to a directory");
  auto parent = parent_dir(ref);
  if (!parent)
    return parent.error();
  if (auto cleared = clear_path(*parent, ref, false); !cleared)
    return cleared.error();
  if (::linkat(from->get(), target_name.c_str(), *parent, ref.name.c_str(), 0) != 0)
    return errno_status("entry " + ref.shown + ": cannot link it to " + printable(raw_target));
  return status::ok();
}

status tree_writer::write_fifo(const entry_ref& ref) {
  auto parent = parent_dir(ref);
  if (!parent)
    return parent.error();
  if (auto cleared = clear_path(*parent, ref, false); !cleared)
    return cleared.error();
  if (::mkfifoat(*parent, ref.name.c_str(), 0600) != 0)
    return errno_status("entry " + ref.shown + ": cannot create the FIFO");
  return set_attributes_at(*parent, ref, true);
}

status tree_writer::finish() {
  for (auto it = dirs_.rbegin(); it != dirs_.rend(); ++it) {
    auto shown = printable(it->first.empty() ? "." : it->first);
    auto dir = open_dir(it->first, false, shown);
    if (!dir) {
      if (dir.code() == errc::not_found)
        continue; // deleted by a whiteout since
      return dir.error();
    }
    if (auto set = set_attributes(dir->get(), it->second, shown); !set)
      return set;
  }
  dirs_.clear();
  return status::ok();
}

status apply_layer(tree_writer& writer, file_source& source, uint32_t layer, uint32_t layers,
                   progress_reporter& progress) {
  progress.start_layer(layer, layers, source.size());
  writer.begin_layer();
  tick_fn tick = [&] { progress.update(source.bytes_read()); };
  auto applied = for_each_entry(source, [&](archive* a, archive_entry* entry) {
    auto done = writer.apply(a, entry, tick);
    tick();
    return done;
  });
  if (!applied)
    return applied;
  progress.end();
  return status::ok();
}

// ---- the outer archive of an oci or docker upload

struct staged_file {
  std::filesystem::path path; ///< in the temporary directory
  uint64_t size = 0;
  std::string sha256; ///< hex
};

// "a/c" for "a/b/../c"; nullopt when ".." climbs above the top. Lexical:
// member symlinks are resolved by the table, never on disk.
std::optional<std::string> lexical_normal(std::string_view path) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (start <= path.size()) {
    auto slash = path.find('/', start);
    auto end = slash == std::string_view::npos ? path.size() : slash;
    auto part = path.substr(start, end - start);
    start = end + 1;
    if (part.empty() || part == ".")
      continue;
    if (part == "..") {
      if (parts.empty())
        return std::nullopt;
      parts.pop_back();
      continue;
    }
    parts.push_back(part);
  }
  std::string out;
  for (auto part : parts)
    out = join_path(out, part);
  return out;
}

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

// ---- image metadata

// nlohmann's checked accessors: a field of the wrong type is the upload's
// fault, never an exception.
const json* field(const json& object, const char* key) {
  if (!object.is_object())
    return nullptr;
  auto it = object.find(key);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

result<std::string> string_field(const json& object, const char* key, std::string_view shown) {
  const json* value = field(object, key);
  if (value == nullptr)
    return std::string();
  if (!value->is_string())
    return make_status(errc::invalid_argument,
                       std::string(shown) + ": \"" + key + "\" is not a string");
  return value->get<std::string>();
}

result<std::vector<std::string>> strings_field(const json& object, const char* key,
                                               std::string_view shown) {
  std::vector<std::string> out;
  const json* value = field(object, key);
  if (value == nullptr)
    return out;
  if (!value->is_array())
    return make_status(errc::invalid_argument,
                       std::string(shown) + ": \"" + key + "\" is not an array of strings");
  for (const auto& item : *value) {
    if (!item.is_string())
      return make_status(errc::invalid_argument,
                         std::string(shown) + ": \"" + key + "\" is not an array of strings");
    out.push_back(item.get<std::string>());
  }
  return out;
}

// The hex of a "sha256:<hex>" digest.
result<std::string> sha256_of_digest(std::string_view digest, std::string_view shown) {
  constexpr std::string_view prefix = "sha256:";
  if (digest.starts_with(prefix) && is_sha256_hex(digest.substr(prefix.size())))
    return std::string(digest.substr(prefix.size()));
  return make_status(errc::invalid_argument,
                     std::string(shown) + " has digest " + printable(digest)
                       + "; only sha256:<64 lowercase hex digits> is supported");
}

struct descriptor {
  std::string media_type;
  std::string digest; ///< "sha256:<hex>"
  std::string hex;
  int64_t size = -1;     ///< -1: not given
  std::string platform;  ///< "os/architecture" or empty
  bool metadata = false; ///< an attestation or other non-image manifest
};

result<descriptor> parse_descriptor(const json& value, std::string_view shown) {
  if (!value.is_object())
    return make_status(errc::invalid_argument, std::string(shown) + " is not a descriptor");
  descriptor out;
  auto media_type = string_field(value, "mediaType", shown);
  auto digest = string_field(value, "digest", shown);
  if (!media_type || !digest)
    return !media_type ? media_type.error() : digest.error();
  out.media_type = *media_type;
  out.digest = *digest;
  auto hex = sha256_of_digest(out.digest, shown);
  if (!hex)
    return hex.error();
  out.hex = *hex;
  if (const json* size = field(value, "size"); size != nullptr && size->is_number_integer())
    out.size = size->get<int64_t>();
  if (const json* platform = field(value, "platform")) {
    auto os = string_field(*platform, "os", shown);
    auto architecture = string_field(*platform, "architecture", shown);
    if (os && architecture && !os->empty())
      out.platform = *os + "/" + *architecture;
    out.metadata = os && *os == "unknown"; // buildx attestations: unknown/unknown
  }
  if (const json* annotations = field(value, "annotations")) {
    auto kind = string_field(*annotations, "vnd.docker.reference.type", shown);
    out.metadata = out.metadata || (kind && !kind->empty());
  }
  return out;
}

status verify_blob(const staged_file& file, const descriptor& wanted, std::string_view shown) {
  if (file.sha256 != wanted.hex)
    return make_status(errc::invalid_argument, std::string(shown) + " does not match its digest "
                                                 + wanted.digest
                                                 + ": its content hashes to sha256:" + file.sha256
                                                 + "; the archive is corrupt or was altered");
  if (wanted.size >= 0 && file.size != static_cast<uint64_t>(wanted.size))
    return make_status(errc::invalid_argument,
                       std::string(shown) + " is " + std::to_string(file.size)
                         + " bytes but its descriptor says " + std::to_string(wanted.size));
  return status::ok();
}

result<const staged_file*> oci_blob(const outer_archive& outer, const descriptor& wanted,
                                    const std::string& shown) {
  auto file = outer.find("blobs/sha256/" + wanted.hex, shown);
  if (!file)
    return file.error();
  if (auto verified = verify_blob(**file, wanted, shown); !verified)
    return verified;
  return *file;
}

// The manifest for this host among an index's: the linux/<host architecture>
// one, else the first without a platform.
result<descriptor> choose_manifest(const json& index, std::string_view shown) {
  const json* list = field(index, "manifests");
  if (list == nullptr || !list->is_array() || list->empty())
    return make_status(errc::invalid_argument, std::string(shown) + " lists no manifests");
  std::vector<descriptor> images;
  for (const auto& item : *list) {
    auto parsed = parse_descriptor(item, std::string(shown) + " manifest");
    if (!parsed)
      return parsed.error();
    if (!parsed->metadata)
      images.push_back(std::move(*parsed));
  }
  auto wanted = "linux/" + std::string(host_architecture());
  for (const auto& image : images)
    if (image.platform == wanted)
      return image;
  std::string found;
  for (const auto& image : images) {
    if (image.platform.empty())
      return image;
    found += (found.empty() ? "" : ", ") + image.platform;
  }
  return make_status(errc::invalid_argument,
                     std::string(shown) + " has no " + wanted + " image (it has: " + found + ")");
}

struct image_plan {
  std::vector<const staged_file*> layers;
  std::vector<std::string> layer_names; ///< for messages and progress
  json config;
  std::string digest;
};

struct chosen_manifest {
  descriptor manifest;
  json document;
};

// index.json, then through nested indexes to the manifest for this host.
result<chosen_manifest> find_manifest(const outer_archive& outer) {
  if (!outer.find("oci-layout", "the OCI image layout"))
    return make_status(errc::invalid_argument,
                       "the archive has no oci-layout file: it is not an OCI image layout "
                       "(for the output of docker save, use format docker)");
  auto index_file = outer.find("index.json", "the OCI image layout");
  if (!index_file)
    return index_file.error();
  auto document = outer.read_json(**index_file, "index.json");
  std::string shown = "index.json";
  for (int depth = 0; depth < index_depth_max; ++depth) {
    if (!document)
      return document.error();
    auto chosen = choose_manifest(*document, shown);
    if (!chosen)
      return chosen.error();
    shown = "manifest " + chosen->digest;
    auto blob = oci_blob(outer, *chosen, shown);
    if (!blob)
      return blob.error();
    document = outer.read_json(**blob, shown);
    if (document && field(*document, "manifests") == nullptr)
      return chosen_manifest{std::move(*chosen), std::move(*document)};
  }
  if (!document)
    return document.error();
  return make_status(errc::invalid_argument, "image indexes are nested more than "
                                               + std::to_string(index_depth_max) + " deep");
}

result<image_plan> plan_oci(const outer_archive& outer) {
  auto chosen = find_manifest(outer);
  if (!chosen)
    return chosen.error();
  const json& manifest = chosen->document;
  auto shown = "manifest " + chosen->manifest.digest;
  const json* config_field = field(manifest, "config");
  auto config =
    parse_descriptor(config_field != nullptr ? *config_field : json(), shown + " config");
  if (!config)
    return config.error();
  auto config_blob = oci_blob(outer, *config, "config " + config->digest);
  if (!config_blob)
    return config_blob.error();
  auto config_json = outer.read_json(**config_blob, "config " + config->digest);
  if (!config_json)
    return config_json.error();
  image_plan plan;
  plan.digest = chosen->manifest.digest;
  plan.config = std::move(*config_json);
  const json* layers = field(manifest, "layers");
  if (layers == nullptr || !layers->is_array())
    return make_status(errc::invalid_argument, shown + " has no layers array");
  for (const auto& item : *layers) {
    auto layer = parse_descriptor(item, shown + " layer");
    if (!layer)
      return layer.error();
    auto name = "layer " + layer->digest;
    if (!layer->media_type.empty() && layer->media_type.find("tar") == std::string::npos)
      return make_status(errc::invalid_argument, name + " has media type "
                                                   + printable(layer->media_type)
                                                   + ", which is not a tar layer");
    auto blob = oci_blob(outer, *layer, name);
    if (!blob)
      return blob.error();
    plan.layers.push_back(*blob);
    plan.layer_names.push_back(std::move(name));
  }
  return plan;
}

// The digest a docker save member's name carries: blobs/sha256/<hex> (docker
// 25 and later) or <hex>.json (the config, before). <id>/layer.tar carries
// none: the layer is checked against the config's diff_ids instead.
std::optional<std::string> digest_in_name(std::string_view member) {
  auto path = lexical_normal(member).value_or("");
  constexpr std::string_view blobs = "blobs/sha256/";
  if (path.starts_with(blobs) && is_sha256_hex(path.substr(blobs.size())))
    return path.substr(blobs.size());
  if (path.size() == 64 + 5 && path.ends_with(".json") && is_sha256_hex(path.substr(0, 64)))
    return path.substr(0, 64);
  return std::nullopt;
}

// The sha256 of a file's decompressed content (libarchive's raw format).
result<std::string> content_sha256(const staged_file& file, const archive_limits& limits,
                                   std::string_view shown) {
  file_source source;
  if (auto opened = source.open(file.path); !opened)
    return opened;
  auto a = new_reader(true);
  if (auto attached = source.attach(a.get()); !attached)
    return in_context(shown, attached);
  archive_entry* entry = nullptr;
  if (int r = archive_read_next_header(a.get(), &entry); r != ARCHIVE_OK && r != ARCHIVE_WARN)
    return in_context(shown, source.failure(a.get()));
  sha256 hash;
  std::vector<char> buffer(read_buffer_bytes);
  uint64_t total = 0;
  for (;;) {
    auto n = archive_read_data(a.get(), buffer.data(), buffer.size());
    if (n < 0)
      return in_context(shown, source.failure(a.get()));
    if (n == 0)
      return hash.hex();
    total += static_cast<uint64_t>(n);
    if (total > limits.uncompressed_bytes_max)
      return limit_hit(std::string(shown) + " decompresses to more than "
                         + std::to_string(limits.uncompressed_bytes_max) + " bytes",
                       "uncompressed_bytes_max", limits.uncompressed_bytes_max,
                       "raise the limit or make the image smaller");
    hash.update(buffer.data(), static_cast<size_t>(n));
  }
}

// A layer's diff_id is the sha256 of its uncompressed tar; docker save
// writes layers uncompressed, so the staged digest usually answers.
status verify_diff_id(const staged_file& file, const json& diff_id, const archive_limits& limits,
                      const std::string& shown) {
  auto hex = sha256_of_digest(diff_id.is_string() ? diff_id.get<std::string>() : std::string(),
                              shown + " diff_id");
  if (!hex)
    return hex.error();
  if (file.sha256 == *hex)
    return status::ok();
  auto content = content_sha256(file, limits, shown);
  if (!content)
    return content.error();
  if (*content != *hex)
    return make_status(errc::invalid_argument, shown + " does not match its diff_id sha256:" + *hex
                                                 + ": its content hashes to sha256:" + *content
                                                 + "; the archive is corrupt or was altered");
  return status::ok();
}

result<const staged_file*> docker_member(const outer_archive& outer, const json& name,
                                         const std::string& shown) {
  if (!name.is_string())
    return make_status(errc::invalid_argument, "manifest.json: " + shown + " is not a string");
  auto member = name.get<std::string>();
  auto file = outer.find(member, "manifest.json");
  if (!file)
    return file.error();
  if (auto hex = digest_in_name(member)) {
    descriptor wanted;
    wanted.hex = *hex;
    wanted.digest = "sha256:" + *hex;
    if (auto verified = verify_blob(**file, wanted, shown + " " + printable(member)); !verified)
      return verified;
  }
  return *file;
}

result<image_plan> plan_docker(const outer_archive& outer, const archive_limits& limits) {
  auto manifest_file = outer.find("manifest.json", "docker save");
  if (!manifest_file)
    return make_status(errc::invalid_argument,
                       "the archive has no manifest.json: it is not the output of docker save "
                       "(for an OCI image layout, use format oci)");
  auto manifest = outer.read_json(**manifest_file, "manifest.json");
  if (!manifest)
    return manifest.error();
  if (!manifest->is_array() || manifest->empty() || !(*manifest)[0].is_object())
    return make_status(errc::invalid_argument, "manifest.json lists no image");
  const json& image = (*manifest)[0]; // docker save of several images: the first
  const json* config_name = field(image, "Config");
  const json* layers = field(image, "Layers");
  if (config_name == nullptr || layers == nullptr || !layers->is_array())
    return make_status(errc::invalid_argument, "manifest.json: the image has no Config or Layers");
  auto config_file = docker_member(outer, *config_name, "Config");
  if (!config_file)
    return config_file.error();
  image_plan plan;
  auto config = outer.read_json(**config_file, "the image config");
  if (!config)
    return config.error();
  plan.config = std::move(*config);
  plan.digest = "sha256:" + (*config_file)->sha256; // the image ID
  const json* rootfs = field(plan.config, "rootfs");
  const json* diff_ids = rootfs != nullptr ? field(*rootfs, "diff_ids") : nullptr;
  if (diff_ids != nullptr && (!diff_ids->is_array() || diff_ids->size() != layers->size()))
    return make_status(errc::invalid_argument,
                       "the image config's rootfs.diff_ids do not match manifest.json's Layers");
  for (size_t i = 0; i < layers->size(); ++i) {
    auto shown = "layer " + std::to_string(i + 1);
    auto file = docker_member(outer, (*layers)[i], shown);
    if (!file)
      return file.error();
    if (diff_ids != nullptr && !digest_in_name((*layers)[i].get<std::string>()))
      if (auto verified = verify_diff_id(**file, (*diff_ids)[i], limits, shown); !verified)
        return verified;
    plan.layers.push_back(*file);
    plan.layer_names.push_back(shown + " " + printable((*layers)[i].get<std::string>()));
  }
  return plan;
}

status read_config(const json& document, image_config& out) {
  const json* config = field(document, "config");
  if (config == nullptr)
    return status::ok();
  constexpr std::string_view shown = "the image config";
  auto env = strings_field(*config, "Env", shown);
  if (!env)
    return env.error();
  auto entrypoint = strings_field(*config, "Entrypoint", shown);
  if (!entrypoint)
    return entrypoint.error();
  auto cmd = strings_field(*config, "Cmd", shown);
  if (!cmd)
    return cmd.error();
  auto working_dir = string_field(*config, "WorkingDir", shown);
  if (!working_dir)
    return working_dir.error();
  auto user = string_field(*config, "User", shown);
  if (!user)
    return user.error();
  out.env = std::move(*env);
  out.entrypoint = std::move(*entrypoint);
  out.cmd = std::move(*cmd);
  out.working_dir = std::move(*working_dir);
  out.user = std::move(*user);
  return status::ok();
}

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
