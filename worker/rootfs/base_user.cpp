#include "worker/rootfs/base_user.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <charconv>
#include <string_view>
#include <vector>

#include "worker/rootfs/fs_util.hpp"

namespace airlock::worker {

namespace {

/// Field `index` (0-based) of a colon-separated line; empty when absent.
std::string_view field(std::string_view line, size_t index) {
  for (size_t i = 0; i < index; ++i) {
    auto colon = line.find(':');
    if (colon == std::string_view::npos)
      return {};
    line.remove_prefix(colon + 1);
  }
  return line.substr(0, line.find(':'));
}

/// Whether a line of `text` names `name` (field 0); another name holding `id`
/// in field `id_field` is a conflict.
result<bool> has_entry(std::string_view text, const std::string& name, size_t id_field, uint32_t id,
                       const std::filesystem::path& file) {
  bool found = false;
  while (!text.empty()) {
    auto newline = text.find('\n');
    auto line = text.substr(0, newline);
    text.remove_prefix(newline == std::string_view::npos ? text.size() : newline + 1);
    if (field(line, 0) == name) {
      found = true;
      continue;
    }
    auto id_text = field(line, id_field);
    uint32_t other = 0;
    auto [end, ec] = std::from_chars(id_text.data(), id_text.data() + id_text.size(), other);
    if (id_field != 0 && ec == std::errc{} && end == id_text.data() + id_text.size()
        && !id_text.empty() && other == id)
      return make_status(errc::invalid_argument, file.string() + ": id " + std::to_string(id)
                                                   + " already belongs to "
                                                   + std::string(field(line, 0)));
  }
  return found;
}

/// Appends `line` to `file` unless it lists `name` already; O_APPEND keeps
/// the file's owner and mode (/etc/shadow is root:shadow 0640).
status add_line(const std::filesystem::path& file, const std::string& name, size_t id_field,
                uint32_t id, const std::string& line, bool required) {
  auto text = read_file(file);
  if (!text)
    return !required && text.code() == errc::not_found ? status::ok() : text.error();
  auto present = has_entry(*text, name, id_field, id, file);
  if (!present)
    return present.error();
  if (*present)
    return status::ok();
  auto fd = open_fd(file, O_WRONLY | O_APPEND | O_NOFOLLOW);
  if (!fd)
    return fd.error();
  std::string bytes = (text->empty() || text->back() == '\n' ? "" : "\n") + line + "\n";
  if (::write(fd->get(), bytes.data(), bytes.size()) != static_cast<ssize_t>(bytes.size()))
    return errno_status("cannot append to " + file.string());
  return status::ok();
}

/// The skeleton's regular files (Debian: .bashrc, .profile, .bash_logout),
/// copied with their modes and given to the account.
status copy_skeleton(const std::filesystem::path& skel, const std::filesystem::path& home,
                     const user_account& account) {
  auto names = list_dir(skel);
  if (!names)
    return names.code() == errc::not_found ? status::ok() : names.error();
  for (const auto& name : *names) {
    struct stat st {};
    if (::lstat((skel / name).c_str(), &st) != 0 || !S_ISREG(st.st_mode))
      continue;
    auto contents = read_file(skel / name);
    if (!contents)
      return contents.error();
    if (auto written = write_file(home / name, *contents, st.st_mode & 0777); !written)
      return written;
    if (::lchown((home / name).c_str(), account.uid, account.gid) != 0)
      return errno_status("cannot give " + (home / name).string() + " to " + account.name);
  }
  return status::ok();
}

status make_home(const std::filesystem::path& root, const user_account& account) {
  auto home = root / "home" / account.name;
  if (auto made = make_dirs(home, 0750); !made)
    return made;
  if (::chmod(home.c_str(), 0750) != 0)
    return errno_status("cannot set the mode of " + home.string());
  if (auto copied = copy_skeleton(root / "etc" / "skel", home, account); !copied)
    return copied;
  if (::lchown(home.c_str(), account.uid, account.gid) != 0)
    return errno_status("cannot give " + home.string() + " to " + account.name);
  return status::ok();
}

} // namespace

std::string describe_account(const user_account& account) {
  return "user " + account.name + ":" + std::to_string(account.uid) + ":"
         + std::to_string(account.gid) + (account.sudo ? " sudo" : "");
}

status add_user_account(const std::filesystem::path& root, const user_account& account) {
  const auto etc = root / "etc";
  const std::string home = "/home/" + account.name;
  const std::string uid = std::to_string(account.uid);
  const std::string gid = std::to_string(account.gid);
  struct entry {
    const char* file;
    size_t id_field; ///< 0: no id to check
    uint32_t id;
    std::string line;
    bool required;
  };
  const std::vector<entry> entries = {
    {"passwd", 2, account.uid,
     account.name + ":x:" + uid + ":" + gid + "::" + home + ":" + account.shell, true},
    {"group", 2, account.gid, account.name + ":x:" + gid + ":", true},
    // Locked password: sudo asks none (NOPASSWD), and nobody logs in with one.
    {"shadow", 0, 0, account.name + ":!:19000:0:99999:7:::", false},
    {"gshadow", 0, 0, account.name + ":!::", false},
  };
  for (const auto& e : entries)
    if (auto added = add_line(etc / e.file, account.name, e.id_field, e.id, e.line, e.required);
        !added)
      return added;
  if (auto made = make_home(root, account); !made)
    return made;
  if (!account.sudo)
    return status::ok();
  auto sudoers = etc / "sudoers.d";
  if (auto made = make_dirs(sudoers, 0755); !made)
    return made;
  return write_file(sudoers / account.name, account.name + " ALL=(ALL:ALL) NOPASSWD: ALL\n", 0440);
}

} // namespace airlock::worker
