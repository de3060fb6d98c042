#include "worker/rootfs/fs_util.hpp"

#include <fcntl.h>
#include <fts.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <dirent.h>

#include "worker/command/command.hpp"

namespace airlock::worker {

status errno_status(std::string_view what, int error_number) {
  errc code = errc::io_error;
  switch (error_number) {
    case ENOENT: code = errc::not_found; break;
    case EEXIST: code = errc::already_exists; break;
    case EDQUOT:
    case ENOSPC: code = errc::resource_exhausted; break;
    case EPERM:
    case EACCES: code = errc::permission_denied; break;
    case EBUSY: code = errc::wrong_state; break;
    default: break;
  }
  return make_status(code, std::string(what) + ": " + std::strerror(error_number));
}

status errno_status(std::string_view what) { return errno_status(what, errno); }

result<unique_fd> open_fd(const std::filesystem::path& path, int flags, mode_t mode) {
  int fd = ::open(path.c_str(), flags | O_CLOEXEC, mode);
  if (fd < 0)
    return errno_status("cannot open " + path.string());
  return unique_fd(fd);
}

status make_dirs(const std::filesystem::path& path, mode_t mode) {
  std::string current;
  for (const auto& part : path) {
    current =
      current.empty() || current == "/" ? current + part.string() : current + "/" + part.string();
    if (part == "/" || current.empty())
      continue;
    if (::mkdir(current.c_str(), mode) != 0 && errno != EEXIST)
      return errno_status("cannot create directory " + current);
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return make_status(errc::io_error, path.string() + " exists but is not a directory");
  return status::ok();
}

bool path_exists(const std::filesystem::path& path) noexcept {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

status write_file(const std::filesystem::path& path, std::string_view contents, mode_t mode) {
  auto fd = open_fd(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
  if (!fd)
    return fd.error();
  while (!contents.empty()) {
    auto n = ::write(fd->get(), contents.data(), contents.size());
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return errno_status("cannot write " + path.string());
    contents.remove_prefix(static_cast<size_t>(n));
  }
  if (::fchmod(fd->get(), mode) != 0)
    return errno_status("cannot set the mode of " + path.string());
  return status::ok();
}

result<std::string> read_file(const std::filesystem::path& path, size_t bytes_max) {
  auto fd = open_fd(path, O_RDONLY);
  if (!fd)
    return fd.error();
  std::string out;
  char buffer[8192];
  for (;;) {
    auto n = ::read(fd->get(), buffer, sizeof buffer);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return errno_status("cannot read " + path.string());
    if (n == 0)
      return out;
    out.append(buffer, static_cast<size_t>(n));
    if (out.size() > bytes_max)
      return make_status(errc::resource_exhausted,
                         path.string() + " is larger than " + std::to_string(bytes_max) + " bytes");
  }
}

result<std::vector<std::string>> list_dir(const std::filesystem::path& dir) {
  DIR* handle = ::opendir(dir.c_str());
  if (handle == nullptr)
    return errno_status("cannot list " + dir.string());
  std::vector<std::string> names;
  while (auto* entry = ::readdir(handle)) {
    std::string_view name(entry->d_name);
    if (name != "." && name != "..")
      names.emplace_back(name);
  }
  ::closedir(handle);
  std::sort(names.begin(), names.end());
  return names;
}

namespace {

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string unescape_octal(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 3 < text.size()) {
      auto digits = text.substr(i + 1, 3);
      if (std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '7'; })) {
        out +=
          static_cast<char>((digits[0] - '0') * 64 + (digits[1] - '0') * 8 + (digits[2] - '0'));
        i += 3;
        continue;
      }
    }
    out += text[i];
  }
  return out;
}

std::vector<std::string_view> split_spaces(std::string_view line) {
  std::vector<std::string_view> fields;
  while (!line.empty()) {
    auto space = line.find(' ');
    if (space != 0)
      fields.push_back(line.substr(0, space));
    if (space == std::string_view::npos)
      break;
    line.remove_prefix(space + 1);
  }
  return fields;
}

bool is_at_or_below(std::string_view candidate, std::string_view base) {
  if (candidate.substr(0, base.size()) != base)
    return false;
  return candidate.size() == base.size() || candidate[base.size()] == '/' || base == "/";
}

} // namespace

std::vector<mount_entry> parse_mountinfo(std::string_view text) {
  std::vector<mount_entry> mounts;
  while (!text.empty()) {
    auto nl = text.find('\n');
    auto line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    auto fields = split_spaces(line);
    auto dash = std::find(fields.begin(), fields.end(), "-");
    if (fields.size() < 5 || dash == fields.end() || fields.end() - dash < 3)
      continue;
    mounts.push_back(
      mount_entry{unescape_octal(fields[4]), std::string(dash[1]), unescape_octal(dash[2])});
  }
  return mounts;
}

result<std::vector<mount_entry>> read_mounts() {
  auto text = read_file("/proc/self/mountinfo", 64 << 20);
  if (!text)
    return text.error();
  return parse_mountinfo(*text);
}

status unmount_below(const std::filesystem::path& path) {
  auto mounts = read_mounts();
  if (!mounts)
    return mounts.error();
  std::error_code ec;
  auto base = std::filesystem::weakly_canonical(path, ec);
  if (ec)
    base = path;
  // Later mounts may sit on top of earlier ones: undo them in reverse order.
  for (auto it = mounts->rbegin(); it != mounts->rend(); ++it) {
    if (!is_at_or_below(it->mount_point, base.string()))
      continue;
    if (::umount2(it->mount_point.c_str(), UMOUNT_NOFOLLOW) == 0 || errno == EINVAL
        || errno == ENOENT)
      continue;
    if (errno == EBUSY && ::umount2(it->mount_point.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW) == 0)
      continue;
    return errno_status("cannot unmount " + it->mount_point);
  }
  return status::ok();
}

status remove_tree(const std::filesystem::path& path, uint32_t timeout_ms) {
  if (!path.is_absolute() || path == "/")
    return make_status(errc::invalid_argument,
                       "remove_tree needs an absolute path below /, got '" + path.string() + "'");
  if (!path_exists(path))
    return status::ok();
  command_options options;
  options.timeout_ms = timeout_ms;
  return run_checked("deleting " + path.string(),
                     {"rm", "-rf", "--one-file-system", "--", path.string()}, options);
}

result<tree_size> measure_tree(const std::filesystem::path& path) {
  std::string root = path.string();
  char* roots[] = {root.data(), nullptr};
  // FTS_NOCHDIR: fts must not change the working directory of a threaded process.
  FTS* fts = ::fts_open(roots, FTS_PHYSICAL | FTS_XDEV | FTS_NOCHDIR, nullptr);
  if (fts == nullptr)
    return errno_status("cannot walk " + root);
  tree_size size;
  while (FTSENT* entry = ::fts_read(fts)) {
    if (entry->fts_info == FTS_DP || entry->fts_info == FTS_DNR || entry->fts_info == FTS_ERR
        || entry->fts_info == FTS_NS)
      continue;
    ++size.files;
    if (entry->fts_statp == nullptr)
      continue;
    if (S_ISREG(entry->fts_statp->st_mode))
      size.apparent_bytes += static_cast<uint64_t>(entry->fts_statp->st_size);
    size.allocated_bytes += static_cast<uint64_t>(entry->fts_statp->st_blocks) * 512;
  }
  ::fts_close(fts);
  return size;
}

bool is_valid_name(std::string_view name) noexcept {
  if (name.empty() || name.size() > 128)
    return false;
  auto alnum = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
  };
  if (!alnum(name.front()))
    return false;
  return std::all_of(name.begin(), name.end(),
                     [&alnum](char c) { return alnum(c) || c == '_' || c == '-'; });
}

status check_name(std::string_view what, std::string_view name) {
  if (is_valid_name(name))
    return status::ok();
  return make_status(errc::invalid_argument,
                     std::string(what) + " '" + std::string(name)
                       + "' is not a valid name: use 1 to 128 letters, digits, '_' or '-', "
                         "starting with a letter or digit");
}

} // namespace airlock::worker
