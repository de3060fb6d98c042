// Writing the entries of image layers into a root, never outside it.
#include "worker/rootfs/image_archive.hpp"

#include <dirent.h>

#include <algorithm>
#include <climits>
#include <cstring>

namespace airlock::worker::image_detail {

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

namespace {

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

} // namespace

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

namespace {

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

} // namespace

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

} // namespace airlock::worker::image_detail
