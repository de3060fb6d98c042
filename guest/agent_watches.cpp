// Directory watches: inotify, one descriptor per watch. A recursive watch
// adds every subdirectory at its start and each one created or moved in
// later, and drops those moved away. Events are reported as E2B's envd
// (fsnotify) reports them: IN_CREATE and IN_MOVED_TO are create, IN_MODIFY
// write, IN_DELETE remove, IN_MOVED_FROM rename, IN_ATTRIB chmod.

#include "guest/agent_state.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

namespace airlock::guest {

namespace {

constexpr uint32_t watch_mask = IN_CREATE | IN_MODIFY | IN_DELETE | IN_ATTRIB | IN_MOVED_FROM
                                | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR
                                | IN_DONT_FOLLOW | IN_EXCL_UNLINK;

/// Bytes of inotify records read per wake-up.
constexpr size_t watch_read_bytes = size_t{64} * 1024;

std::string join(const std::string& rel, std::string_view name) {
  return rel.empty() ? std::string(name) : rel + "/" + std::string(name);
}

std::string full_path(const dir_watch& w, const std::string& rel) {
  if (rel.empty())
    return w.root;
  return (w.root == "/" ? "" : w.root) + "/" + rel;
}

std::optional<watch_kind> kind_of(uint32_t mask) {
  if (mask & (IN_CREATE | IN_MOVED_TO))
    return watch_kind::create;
  if (mask & IN_MODIFY)
    return watch_kind::write;
  if (mask & IN_DELETE)
    return watch_kind::remove;
  if (mask & IN_MOVED_FROM)
    return watch_kind::rename;
  if (mask & IN_ATTRIB)
    return watch_kind::chmod;
  return std::nullopt;
}

status too_many_dirs(const dir_watch& w, uint32_t limit) {
  return make_status(errc::resource_exhausted,
                     w.root + " holds more than " + std::to_string(limit)
                       + " directories, the limit of one recursive watch: watch a smaller tree");
}

/// The subdirectories of `path` (not following symlinks).
std::vector<std::string> subdirectories(const std::string& path) {
  std::vector<std::string> out;
  DIR* dir = ::opendir(path.c_str());
  if (dir == nullptr)
    return out;
  while (auto* entry = ::readdir(dir)) {
    std::string_view name = entry->d_name;
    if (name == "." || name == "..")
      continue;
    bool is_dir = entry->d_type == DT_DIR;
    if (entry->d_type == DT_UNKNOWN) {
      struct stat st {};
      is_dir = ::fstatat(::dirfd(dir), entry->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0
               && S_ISDIR(st.st_mode);
    }
    if (is_dir)
      out.emplace_back(name);
  }
  ::closedir(dir);
  return out;
}

} // namespace

status guest_agent::state::watch_tree(dir_watch& w, const std::string& rel) {
  std::vector<std::string> pending{rel};
  while (!pending.empty()) {
    auto next = std::move(pending.back());
    pending.pop_back();
    if (w.dirs.size() >= options.watch_dirs_max)
      return too_many_dirs(w, options.watch_dirs_max);
    const auto path = full_path(w, next);
    int wd = ::inotify_add_watch(w.fd.get(), path.c_str(), watch_mask);
    if (wd < 0) {
      // A subdirectory removed while we walk is no failure; the root is.
      if (!next.empty() && (errno == ENOENT || errno == ENOTDIR))
        continue;
      if (errno == ENOTDIR)
        return make_status(errc::invalid_argument, path + " is not a directory");
      if (errno == ENOSPC)
        return make_status(errc::resource_exhausted,
                           "the kernel's inotify watch limit is reached (max_user_watches)");
      return errno_status(errno, "watch " + path);
    }
    w.dirs[wd] = next;
    if (next.empty())
      w.root_wd = wd;
    if (!w.recursive)
      return status::ok();
    for (auto& name : subdirectories(path))
      pending.push_back(join(next, name));
  }
  return status::ok();
}

void guest_agent::state::on(const watch_start& m) {
  auto fail = [this, &m](const status& why) {
    send(error_reply{0, 0, why.code, why.message, true, m.watch_id});
  };
  if (m.watch_id == 0)
    return fail(make_status(errc::invalid_argument, "watch id 0 is reserved"));
  if (watches.count(m.watch_id) != 0)
    return fail(make_status(errc::already_exists, "watch id is already open"));
  if (watches.size() >= options.watches_max)
    return fail(make_status(errc::resource_exhausted, "too many directory watches open (limit "
                                                        + std::to_string(options.watches_max)
                                                        + "): stop one first"));
  if (auto ok = check_path(m.path, options.path_bytes_max); !ok.is_ok())
    return fail(ok);
  struct stat st {};
  if (::stat(m.path.c_str(), &st) != 0)
    return fail(errno_status(errno, "watch " + m.path));
  if (!S_ISDIR(st.st_mode))
    return fail(make_status(errc::invalid_argument, m.path + " is not a directory"));
  dir_watch w;
  w.fd.reset(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
  if (!w.fd)
    return fail(errno == EMFILE ? make_status(errc::resource_exhausted,
                                              "the kernel's inotify instance limit is reached")
                                : errno_status(errno, "create an inotify instance"));
  w.root = m.path.size() > 1 && m.path.back() == '/' ? m.path.substr(0, m.path.size() - 1) : m.path;
  w.recursive = m.recursive;
  if (auto added = watch_tree(w, ""); !added.is_ok())
    return fail(added);
  const auto directories = static_cast<uint32_t>(w.dirs.size());
  watches.emplace(m.watch_id, std::move(w));
  send(watch_started{m.watch_id, directories});
}

void guest_agent::state::on(const watch_stop& m) { watches.erase(m.watch_id); }

void guest_agent::state::end_watch(uint32_t id, const status& why) {
  send(error_reply{0, 0, why.code, why.message, true, id});
  watches.erase(id);
}

void guest_agent::state::read_watch(uint32_t id) {
  auto it = watches.find(id);
  if (it == watches.end())
    return;
  auto& w = it->second;
  alignas(inotify_event) char buffer[watch_read_bytes];
  ssize_t n;
  do {
    n = ::read(w.fd.get(), buffer, sizeof buffer);
  } while (n < 0 && errno == EINTR);
  if (n <= 0)
    return;
  watch_events batch{id, {}};
  size_t batch_bytes = 0;
  auto flush_batch = [this, &batch, &batch_bytes] {
    if (!batch.events.empty())
      send(batch);
    batch.events.clear();
    batch_bytes = 0;
  };
  std::optional<status> ending;
  for (ssize_t at = 0; at < n && !ending;) {
    const auto* e = reinterpret_cast<const inotify_event*>(buffer + at);
    at += static_cast<ssize_t>(sizeof(inotify_event) + e->len);
    if (e->mask & IN_Q_OVERFLOW) {
      ending = make_status(errc::resource_exhausted,
                           "more changes under " + w.root
                             + " than the kernel's queue holds were not read in time; the watch "
                               "ended: watch again (and list the directory to catch up)");
      break;
    }
    auto dir = w.dirs.find(e->wd);
    if (dir == w.dirs.end())
      continue;
    if (e->wd == w.root_wd && (e->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED))) {
      ending = make_status(errc::not_found,
                           "the watched directory " + w.root + " was removed or moved away");
      break;
    }
    if (e->mask & IN_IGNORED) {
      w.dirs.erase(dir);
      continue;
    }
    auto kind = kind_of(e->mask);
    if (!kind || e->len == 0)
      continue;
    const std::string rel = dir->second; // the map may change below
    const auto name = join(rel, std::string_view(e->name));
    batch_bytes += name.size() + 32;
    batch.events.push_back({name, *kind});
    if (w.recursive && (e->mask & IN_ISDIR)) {
      if (e->mask & (IN_CREATE | IN_MOVED_TO)) {
        if (auto added = watch_tree(w, name); !added.is_ok())
          ending = added;
      } else if (e->mask & IN_MOVED_FROM) {
        // Moved away: its watches would report under a name it no longer has.
        const auto prefix = name + "/";
        for (auto d = w.dirs.begin(); d != w.dirs.end();) {
          if (d->second == name || d->second.rfind(prefix, 0) == 0) {
            ::inotify_rm_watch(w.fd.get(), d->first);
            d = w.dirs.erase(d);
          } else {
            ++d;
          }
        }
      }
    }
    if (batch_bytes >= options.frame_bytes_max / 2)
      flush_batch();
  }
  flush_batch();
  if (ending)
    end_watch(id, *ending);
}

} // namespace airlock::guest
