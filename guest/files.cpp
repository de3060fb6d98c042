#include "guest/files.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <map>

namespace airlock::guest {

namespace {

/// Longest base name kept in a temporary file's name, so that the suffix
/// still fits in NAME_MAX (255).
constexpr size_t temp_base_bytes_max = 180;
/// Passes over one directory when removing a tree: entries created while we
/// remove it are retried a bounded number of times, not forever.
constexpr int remove_passes_max = 3;

errc errc_for(int error) {
  switch (error) {
    case ENOENT: return errc::not_found;
    case EEXIST: return errc::already_exists;
    case EACCES:
    case EPERM:
    case EROFS: return errc::permission_denied;
    case ENOTDIR:
    case EISDIR:
    case EINVAL:
    case ENAMETOOLONG:
    case ELOOP:
    case EXDEV: return errc::invalid_argument;
    case ENOTEMPTY:
    case EBUSY: return errc::wrong_state;
    case ENOSPC:
    case EDQUOT:
    case EMFILE:
    case ENFILE:
    case ENOMEM: return errc::resource_exhausted;
    default: return errc::io_error;
  }
}

file_type type_of(mode_t mode) {
  if (S_ISREG(mode))
    return file_type::regular;
  if (S_ISDIR(mode))
    return file_type::directory;
  if (S_ISLNK(mode))
    return file_type::symlink;
  return file_type::other;
}

file_info info_of(std::string name, const struct stat& st) {
  file_info info;
  info.name = std::move(name);
  info.type = type_of(st.st_mode);
  info.size = static_cast<uint64_t>(st.st_size);
  info.mode = st.st_mode & 07777;
  info.uid = st.st_uid;
  info.gid = st.st_gid;
  info.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
  return info;
}

/// Parent directory and last component of an absolute path ("/" for "/x").
std::pair<std::string, std::string> split_path(const std::string& path) {
  auto slash = path.rfind('/');
  auto parent = slash == 0 ? std::string("/") : path.substr(0, slash);
  return {parent, path.substr(slash + 1)};
}

/// Largest /etc/passwd or /etc/group read for names; a larger one is read
/// up to this (the names past it show as numbers).
constexpr size_t id_file_bytes_max = 1 << 20;

/// "name:x:id:..." lines of /etc/passwd or /etc/group as id -> name (the
/// first name of an id wins, as getpwuid's). Read with the agent's own
/// parser: the agent is static, without NSS.
std::map<uint32_t, std::string> read_id_names(const char* path) {
  std::map<uint32_t, std::string> names;
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return names;
  std::string text;
  char buffer[8192];
  ssize_t n;
  while (text.size() < id_file_bytes_max && (n = ::read(fd, buffer, sizeof buffer)) != 0) {
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      break;
    text.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  std::string_view rest(text);
  while (!rest.empty()) {
    auto line = rest.substr(0, rest.find('\n'));
    rest.remove_prefix(std::min(rest.size(), line.size() + 1));
    auto first = line.find(':');
    auto second = first == std::string_view::npos ? first : line.find(':', first + 1);
    auto third = second == std::string_view::npos ? second : line.find(':', second + 1);
    if (third == std::string_view::npos || first == 0)
      continue;
    auto id_text = line.substr(second + 1, third - second - 1);
    uint32_t id = 0;
    auto [end, ec] = std::from_chars(id_text.data(), id_text.data() + id_text.size(), id);
    if (ec == std::errc{} && end == id_text.data() + id_text.size() && !id_text.empty())
      names.emplace(id, std::string(line.substr(0, first)));
  }
  return names;
}

/// A symlink's target, absolute: where it leads once resolved (as E2B's
/// envd answers), else its text as read, made absolute against its
/// directory when relative. Empty when it cannot be read.
std::string symlink_target(const std::string& path) {
  char resolved[PATH_MAX];
  if (::realpath(path.c_str(), resolved) != nullptr)
    return resolved;
  char text[PATH_MAX];
  ssize_t n = ::readlink(path.c_str(), text, sizeof text - 1);
  if (n <= 0)
    return {};
  std::string target(text, static_cast<size_t>(n));
  if (target.front() == '/')
    return target;
  auto dir = split_path(path).first;
  return (dir == "/" ? dir : dir + "/") + target;
}

status remove_tree_at(int parent_fd, const std::string& name, int depth_left);

/// Removes everything inside the directory `dir_fd` (which it closes).
status remove_children(int dir_fd, int depth_left) {
  DIR* dir = ::fdopendir(dir_fd);
  if (dir == nullptr) {
    auto error = errno;
    ::close(dir_fd);
    return errno_status(error, "open directory for removal");
  }
  status outcome = status::ok();
  for (int pass = 0; pass < remove_passes_max && outcome.is_ok(); ++pass) {
    bool removed_any = false;
    ::rewinddir(dir);
    while (auto* entry = ::readdir(dir)) {
      std::string name = entry->d_name;
      if (name == "." || name == "..")
        continue;
      outcome = remove_tree_at(::dirfd(dir), name, depth_left);
      if (!outcome.is_ok())
        break;
      removed_any = true;
    }
    if (!removed_any)
      break;
  }
  ::closedir(dir);
  return outcome;
}

/// Removes `name` in `parent_fd`: a file or symlink directly, a directory
/// after its contents. Symlinks are never followed.
status remove_tree_at(int parent_fd, const std::string& name, int depth_left) {
  if (::unlinkat(parent_fd, name.c_str(), 0) == 0)
    return status::ok();
  if (errno != EISDIR)
    return errno_status(errno, "remove " + name);
  if (depth_left <= 0)
    return make_status(errc::resource_exhausted, "directory tree too deep to remove at " + name);
  int fd = ::openat(parent_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return errno_status(errno, "open directory " + name);
  if (auto removed = remove_children(fd, depth_left - 1); !removed.is_ok())
    return removed;
  if (::unlinkat(parent_fd, name.c_str(), AT_REMOVEDIR) != 0)
    return errno_status(errno, "remove directory " + name);
  return status::ok();
}

} // namespace

status errno_status(int error, std::string_view what) {
  return make_status(errc_for(error), std::string(what) + ": " + std::strerror(error));
}

status check_path(std::string_view path, size_t bytes_max) {
  if (path.empty() || path.front() != '/')
    return make_status(errc::invalid_argument,
                       "path must be absolute: \"" + std::string(path.substr(0, 64)) + "\"");
  if (path.find('\0') != std::string_view::npos)
    return make_status(errc::invalid_argument, "path contains a NUL byte");
  if (path.size() > bytes_max) {
    return make_status(errc::invalid_argument, "path of " + std::to_string(path.size())
                                                 + " bytes exceeds the limit of "
                                                 + std::to_string(bytes_max));
  }
  return status::ok();
}

id_names id_names::read() {
  id_names out;
  out.users_ = read_id_names("/etc/passwd");
  out.groups_ = read_id_names("/etc/group");
  return out;
}

std::string id_names::user(uint32_t uid) const {
  auto it = users_.find(uid);
  return it != users_.end() ? it->second : std::to_string(uid);
}

std::string id_names::group(uint32_t gid) const {
  auto it = groups_.find(gid);
  return it != groups_.end() ? it->second : std::to_string(gid);
}

void describe_entry(file_info& info, const std::string& path, const id_names& names) {
  info.owner = names.user(info.uid);
  info.group = names.group(info.gid);
  if (info.type == file_type::symlink)
    info.symlink_target = symlink_target(path);
}

result<file_info> stat_path(const std::string& path, bool follow) {
  struct stat st {};
  if (::fstatat(AT_FDCWD, path.c_str(), &st, follow ? 0 : AT_SYMLINK_NOFOLLOW) != 0)
    return errno_status(errno, "stat " + path);
  auto info = info_of(split_path(path).second, st);
  describe_entry(info, path, id_names::read());
  return info;
}

result<dir_listing> list_dir(const std::string& path, size_t entries_max,
                             size_t name_bytes_budget) {
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return errno_status(errno, "list " + path);
  DIR* dir = ::fdopendir(fd);
  if (dir == nullptr) {
    auto error = errno;
    ::close(fd);
    return errno_status(error, "list " + path);
  }
  dir_listing listing;
  const auto names = id_names::read();
  const std::string prefix = path.back() == '/' ? path : path + "/";
  size_t text_bytes = 0;
  while (auto* entry = ::readdir(dir)) {
    std::string name = entry->d_name;
    if (name == "." || name == "..")
      continue;
    if (listing.entries.size() >= entries_max) {
      listing.truncated = true;
      break;
    }
    struct stat st {};
    if (::fstatat(::dirfd(dir), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
      continue; // removed while we listed: not an error of the listing
    auto info = info_of(std::move(name), st);
    describe_entry(info, prefix + info.name, names);
    // The texts are most of a reply: they count against the budget.
    size_t bytes =
      info.name.size() + info.owner.size() + info.group.size() + info.symlink_target.size();
    if (text_bytes + bytes > name_bytes_budget) {
      listing.truncated = true;
      break;
    }
    text_bytes += bytes;
    listing.entries.push_back(std::move(info));
  }
  ::closedir(dir);
  std::sort(listing.entries.begin(), listing.entries.end(),
            [](const file_info& a, const file_info& b) { return a.name < b.name; });
  return listing;
}

status make_dirs(const std::string& path, uint32_t mode, bool parents) {
  mode_t bits = mode == 0 ? 0755 : (mode & 07777);
  if (!parents) {
    if (::mkdir(path.c_str(), bits) != 0)
      return errno_status(errno, "mkdir " + path);
    ::chmod(path.c_str(), bits); // honour the mode exactly, whatever the umask
    return status::ok();
  }
  for (size_t at = 1; at <= path.size(); ++at) {
    if (at != path.size() && path[at] != '/')
      continue;
    auto prefix = path.substr(0, at);
    if (prefix.back() == '/')
      continue;
    if (::mkdir(prefix.c_str(), bits) == 0) {
      ::chmod(prefix.c_str(), bits);
      continue;
    }
    if (errno != EEXIST)
      return errno_status(errno, "mkdir " + prefix);
    struct stat st {};
    if (::stat(prefix.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
      return make_status(errc::invalid_argument, prefix + " exists and is not a directory");
  }
  return status::ok();
}

status remove_path(const std::string& path, bool recursive, int depth_max) {
  if (path == "/")
    return make_status(errc::invalid_argument, "refusing to remove /");
  if (!recursive) {
    if (::unlink(path.c_str()) == 0)
      return status::ok();
    if (errno != EISDIR)
      return errno_status(errno, "remove " + path);
    if (::rmdir(path.c_str()) != 0)
      return errno_status(errno, "remove directory " + path);
    return status::ok();
  }
  auto [parent, name] = split_path(path);
  if (name.empty())
    return make_status(errc::invalid_argument, "path ends in '/': " + path);
  int parent_fd = ::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (parent_fd < 0)
    return errno_status(errno, "open " + parent);
  unique_fd owner(parent_fd);
  return remove_tree_at(parent_fd, name, depth_max);
}

status rename_path(const std::string& from, const std::string& to) {
  if (::renameat(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str()) != 0)
    return errno_status(errno, "rename " + from + " to " + to);
  return status::ok();
}

result<unique_fd> open_for_read(const std::string& path) {
  unique_fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (!fd)
    return errno_status(errno, "open " + path);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0)
    return errno_status(errno, "stat " + path);
  if (!S_ISREG(st.st_mode))
    return make_status(errc::invalid_argument, path + " is not a regular file");
  return fd;
}

// ---- atomic_writer ------------------------------------------------------------

result<atomic_writer> atomic_writer::begin(const std::string& path, uint32_t mode,
                                           bool create_parents, uint64_t unique) {
  auto [parent, name] = split_path(path);
  if (name.empty() || name == "." || name == "..")
    return make_status(errc::invalid_argument, "not a file name: " + path);
  if (create_parents) {
    if (auto made = make_dirs(parent, 0755, true); !made.is_ok())
      return made;
  }
  atomic_writer writer;
  writer.dir_.reset(::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!writer.dir_)
    return errno_status(errno, "open directory " + parent);
  struct stat st {};
  if (::fstatat(writer.dir_.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0
      && S_ISDIR(st.st_mode))
    return make_status(errc::invalid_argument, path + " is a directory");
  writer.final_name_ = name;
  writer.temp_name_ = "." + name.substr(0, temp_base_bytes_max) + ".airlock-"
                      + std::to_string(::getpid()) + "-" + std::to_string(unique) + ".tmp";
  writer.file_.reset(::openat(writer.dir_.get(), writer.temp_name_.c_str(),
                              O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!writer.file_)
    return errno_status(errno, "create temporary file in " + parent);
  // fchmod, not the open mode: the umask must not change what the host asked for.
  if (::fchmod(writer.file_.get(), mode == 0 ? 0644 : (mode & 07777)) != 0) {
    auto failed = errno_status(errno, "chmod " + path);
    writer.abort();
    return failed;
  }
  return writer;
}

atomic_writer::~atomic_writer() { abort(); }

status atomic_writer::write(std::string_view bytes) {
  while (!bytes.empty()) {
    auto n = ::write(file_.get(), bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return errno_status(errno, "write " + final_name_);
    bytes.remove_prefix(static_cast<size_t>(n));
    bytes_ += static_cast<uint64_t>(n);
  }
  return status::ok();
}

status atomic_writer::commit() {
  if (::fsync(file_.get()) != 0)
    return errno_status(errno, "fsync " + final_name_);
  file_.reset();
  if (::renameat(dir_.get(), temp_name_.c_str(), dir_.get(), final_name_.c_str()) != 0)
    return errno_status(errno, "rename into place " + final_name_);
  done_ = true;
  // The rename is durable only once the directory is.
  if (::fsync(dir_.get()) != 0)
    return errno_status(errno, "fsync directory of " + final_name_);
  return status::ok();
}

void atomic_writer::abort() noexcept {
  if (done_ || !dir_)
    return;
  file_.reset();
  ::unlinkat(dir_.get(), temp_name_.c_str(), 0);
  done_ = true;
}

} // namespace airlock::guest
