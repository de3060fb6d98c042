#include "worker/rootfs/btrfs_ops.hpp"

#include <endian.h>
#include <fcntl.h>
#include <linux/btrfs.h>
#include <linux/btrfs_tree.h>
#include <linux/magic.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "worker/rootfs/fs_util.hpp"

namespace airlock::worker {

namespace {

// A sandbox that nests subvolumes deeper than this is hostile; stop there.
constexpr int nesting_depth_max = 64;

result<unique_fd> open_dir(const std::filesystem::path& path) {
  return open_fd(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
}

status copy_name(char* target, size_t capacity, std::string_view name) {
  if (name.empty() || name.size() >= capacity || name.find('/') != std::string_view::npos)
    return make_status(errc::invalid_argument, "subvolume name '" + std::string(name)
                                                 + "' is empty, too long or has a '/'");
  std::memcpy(target, name.data(), name.size());
  target[name.size()] = '\0';
  return status::ok();
}

// A subvolume nested in another: the directory holding it, relative to the
// outer subvolume's root, and its name there.
struct child_subvolume {
  std::string dir;
  std::string name;
};

// The subvolumes directly nested in the subvolume open at `fd`.
result<std::vector<child_subvolume>> nested_subvolumes(int fd, const std::filesystem::path& shown) {
  std::vector<child_subvolume> children;
  btrfs_ioctl_get_subvol_rootref_args refs{};
  for (;;) {
    int rc = ::ioctl(fd, BTRFS_IOC_GET_SUBVOL_ROOTREF, &refs);
    if (rc != 0 && errno != EOVERFLOW)
      return errno_status("cannot list the subvolumes nested in " + shown.string());
    bool more = rc != 0;
    for (int i = 0; i < refs.num_items; ++i) {
      btrfs_ioctl_ino_lookup_user_args lookup{};
      lookup.dirid = refs.rootref[i].dirid;
      lookup.treeid = refs.rootref[i].treeid;
      if (::ioctl(fd, BTRFS_IOC_INO_LOOKUP_USER, &lookup) != 0)
        return errno_status("cannot find the path of a subvolume nested in " + shown.string());
      children.push_back({lookup.path, lookup.name});
    }
    if (!more)
      return children;
    // min_treeid was advanced by the kernel past the last returned item.
  }
}

// Opens `relative` below `dir_fd` one component at a time without following
// symlinks or "..": the tree belongs to a sandbox, which may have swapped a
// directory for a symlink to another sandbox since the kernel named it.
result<unique_fd> open_beneath(int dir_fd, std::string_view relative,
                               const std::filesystem::path& shown) {
  unique_fd current(::fcntl(dir_fd, F_DUPFD_CLOEXEC, 0));
  if (!current.valid())
    return errno_status("cannot duplicate a directory descriptor for " + shown.string());
  for (const auto& part : std::filesystem::path(relative)) {
    auto name = part.string();
    if (name.empty() || name == "." || name == "/")
      continue;
    if (name == "..")
      return make_status(errc::invalid_argument, "refusing '..' below " + shown.string());
    int next =
      ::openat(current.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (next < 0)
      return errno_status("cannot open " + (shown / relative).string() + " without symlinks");
    current.reset(next);
  }
  return current;
}

status destroy_at(int parent_fd, const std::string& name, const std::filesystem::path& shown) {
  btrfs_ioctl_vol_args_v2 args{};
  if (auto named = copy_name(args.name, sizeof args.name, name); !named)
    return named;
  if (::ioctl(parent_fd, BTRFS_IOC_SNAP_DESTROY_V2, &args) == 0)
    return status::ok();
  if (errno != ENOTTY && errno != EOPNOTSUPP)
    return errno_status("cannot delete subvolume " + shown.string());
  // Kernels before 5.7 only know the first version.
  btrfs_ioctl_vol_args old{};
  if (auto named = copy_name(old.name, sizeof old.name, name); !named)
    return named;
  if (::ioctl(parent_fd, BTRFS_IOC_SNAP_DESTROY, &old) != 0)
    return errno_status("cannot delete subvolume " + shown.string());
  return status::ok();
}

status make_writable(int fd, const std::filesystem::path& shown) {
  uint64_t flags = 0;
  if (::ioctl(fd, BTRFS_IOC_SUBVOL_GETFLAGS, &flags) != 0)
    return errno_status("cannot read the flags of subvolume " + shown.string());
  if ((flags & BTRFS_SUBVOL_RDONLY) == 0)
    return status::ok();
  flags &= ~uint64_t{BTRFS_SUBVOL_RDONLY};
  if (::ioctl(fd, BTRFS_IOC_SUBVOL_SETFLAGS, &flags) != 0)
    return errno_status("cannot make subvolume " + shown.string() + " writable to empty it");
  return status::ok();
}

// Deletes subvolume `name` in the directory open at `parent_fd`, nested ones
// first. `shown` is its path, for messages only (below `top` it is named by the
// sandbox's own tree, so it is never resolved); `top` is the trusted path of
// the outermost subvolume being deleted.
status delete_recursive(int parent_fd, const std::string& name, const std::filesystem::path& shown,
                        const std::filesystem::path& top, int depth) {
  auto first = destroy_at(parent_fd, name, shown);
  if (first || (first.code != errc::io_error && first.code != errc::wrong_state)
      || depth >= nesting_depth_max)
    return first;
  // ENOTEMPTY: subvolumes nested inside. EBUSY: something is mounted inside.
  if (first.code == errc::wrong_state) {
    if (auto unmounted = unmount_below(top); !unmounted)
      return unmounted;
  }
  auto fd = open_beneath(parent_fd, name, shown.parent_path());
  if (!fd)
    return fd.error();
  auto children = nested_subvolumes(fd->get(), shown);
  if (!children)
    return children.error();
  if (!children->empty()) {
    if (auto writable = make_writable(fd->get(), shown); !writable)
      return writable;
  }
  for (const auto& child : *children) {
    auto dir = open_beneath(fd->get(), child.dir, shown);
    if (!dir)
      return dir.error();
    auto child_shown = shown / child.dir / child.name;
    if (auto deleted = delete_recursive(dir->get(), child.name, child_shown, top, depth + 1);
        !deleted)
      return deleted;
  }
  return destroy_at(parent_fd, name, shown);
}

uint64_t le64_at(const char* data, size_t offset) {
  uint64_t value = 0;
  std::memcpy(&value, data + offset, sizeof value);
  return le64toh(value);
}

// One item of the quota tree: key (0, type, qgroupid). Returns its bytes.
result<std::vector<char>> quota_item(int fd, uint32_t type, uint64_t qgroup_id) {
  btrfs_ioctl_search_args args{};
  args.key.tree_id = BTRFS_QUOTA_TREE_OBJECTID;
  args.key.min_objectid = 0;
  args.key.max_objectid = 0;
  args.key.min_type = type;
  args.key.max_type = type;
  args.key.min_offset = qgroup_id;
  args.key.max_offset = qgroup_id;
  args.key.max_transid = UINT64_MAX;
  args.key.nr_items = 1;
  if (::ioctl(fd, BTRFS_IOC_TREE_SEARCH, &args) != 0)
    return errno_status("cannot read the btrfs quota tree");
  if (args.key.nr_items == 0)
    return make_status(errc::not_found, "no qgroup 0/" + std::to_string(qgroup_id));
  btrfs_ioctl_search_header header{};
  std::memcpy(&header, args.buf, sizeof header);
  if (header.type != type || header.offset != qgroup_id
      || sizeof header + header.len > sizeof args.buf)
    return make_status(errc::not_found, "no qgroup 0/" + std::to_string(qgroup_id));
  const char* item = args.buf + sizeof header;
  return std::vector<char>(item, item + header.len);
}

} // namespace

bool is_on_btrfs(const std::filesystem::path& path) noexcept {
  struct statfs fs {};
  return ::statfs(path.c_str(), &fs) == 0 && static_cast<uint64_t>(fs.f_type) == BTRFS_SUPER_MAGIC;
}

bool is_btrfs_subvolume(const std::filesystem::path& path) noexcept {
  struct stat st {};
  return is_on_btrfs(path) && ::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)
         && st.st_ino == BTRFS_FIRST_FREE_OBJECTID;
}

status btrfs_create_subvolume(const std::filesystem::path& parent_dir, std::string_view name) {
  auto parent = open_dir(parent_dir);
  if (!parent)
    return parent.error();
  btrfs_ioctl_vol_args_v2 args{};
  if (auto named = copy_name(args.name, sizeof args.name, name); !named)
    return named;
  if (::ioctl(parent->get(), BTRFS_IOC_SUBVOL_CREATE_V2, &args) != 0)
    return errno_status("cannot create subvolume " + (parent_dir / name).string());
  return status::ok();
}

status btrfs_snapshot(const std::filesystem::path& source, const std::filesystem::path& parent_dir,
                      std::string_view name, bool read_only) {
  auto from = open_dir(source);
  if (!from)
    return from.error();
  auto parent = open_dir(parent_dir);
  if (!parent)
    return parent.error();
  btrfs_ioctl_vol_args_v2 args{};
  args.fd = from->get();
  args.flags = read_only ? BTRFS_SUBVOL_RDONLY : 0;
  if (auto named = copy_name(args.name, sizeof args.name, name); !named)
    return named;
  if (::ioctl(parent->get(), BTRFS_IOC_SNAP_CREATE_V2, &args) != 0)
    return errno_status("cannot snapshot " + source.string() + " as "
                        + (parent_dir / name).string());
  return status::ok();
}

status btrfs_delete_subvolume(const std::filesystem::path& path) {
  if (!path_exists(path))
    return status::ok();
  if (!is_btrfs_subvolume(path))
    return make_status(errc::invalid_argument, path.string() + " is not a btrfs subvolume");
  auto parent = open_dir(path.parent_path());
  if (!parent)
    return parent.error();
  return delete_recursive(parent->get(), path.filename().string(), path, path, 0);
}

namespace {

/// An open subvolume and its flags (BTRFS_SUBVOL_RDONLY).
struct subvolume_flags {
  unique_fd fd;
  uint64_t flags = 0;
};

result<subvolume_flags> read_subvolume_flags(const std::filesystem::path& subvolume) {
  auto fd = open_dir(subvolume);
  if (!fd)
    return fd.error();
  subvolume_flags out{std::move(*fd)};
  if (::ioctl(out.fd.get(), BTRFS_IOC_SUBVOL_GETFLAGS, &out.flags) != 0)
    return errno_status("cannot read the flags of subvolume " + subvolume.string());
  return out;
}

} // namespace

result<bool> btrfs_is_read_only(const std::filesystem::path& subvolume) {
  auto current = read_subvolume_flags(subvolume);
  if (!current)
    return current.error();
  return (current->flags & BTRFS_SUBVOL_RDONLY) != 0;
}

status btrfs_set_read_only(const std::filesystem::path& subvolume, bool read_only) {
  auto current = read_subvolume_flags(subvolume);
  if (!current)
    return current.error();
  uint64_t flags = read_only ? (current->flags | BTRFS_SUBVOL_RDONLY)
                             : (current->flags & ~uint64_t{BTRFS_SUBVOL_RDONLY});
  if (::ioctl(current->fd.get(), BTRFS_IOC_SUBVOL_SETFLAGS, &flags) != 0)
    return errno_status("cannot change the read-only flag of subvolume " + subvolume.string());
  return status::ok();
}

result<uint64_t> btrfs_subvolume_id(const std::filesystem::path& path) {
  auto fd = open_fd(path, O_RDONLY | O_NOFOLLOW);
  if (!fd)
    return fd.error();
  btrfs_ioctl_ino_lookup_args args{};
  args.treeid = 0;
  args.objectid = BTRFS_FIRST_FREE_OBJECTID;
  if (::ioctl(fd->get(), BTRFS_IOC_INO_LOOKUP, &args) != 0)
    return errno_status("cannot find the subvolume id of " + path.string());
  return static_cast<uint64_t>(args.treeid);
}

/// BTRFS_QUOTA_CTL_ENABLE_SIMPLE_QUOTA, newer than the headers Debian 12 ships.
constexpr uint64_t quota_ctl_enable_simple = 4;

status btrfs_enable_quota(const std::filesystem::path& path) {
  auto fd = open_dir(path);
  if (!fd)
    return fd.error();
  // Simple quotas (Linux 6.7) charge an extent to the subvolume that wrote
  // it, so a snapshot costs the same with 10 or 1,000 sandboxes of one
  // template; full qgroups walk every snapshot sharing each extent, and a
  // create then grows with the sandboxes running (measured: 7 ms at 10,
  // 820 ms at 1,000). Older kernels refuse the simple mode with EINVAL.
  // Quotas that are on already stay in the mode they are in.
  btrfs_ioctl_quota_ctl_args args{};
  args.cmd = quota_ctl_enable_simple;
  int enabled = ::ioctl(fd->get(), BTRFS_IOC_QUOTA_CTL, &args);
  if (enabled != 0 && errno == EINVAL) {
    args = btrfs_ioctl_quota_ctl_args{};
    args.cmd = BTRFS_QUOTA_CTL_ENABLE;
    enabled = ::ioctl(fd->get(), BTRFS_IOC_QUOTA_CTL, &args);
  }
  if (enabled != 0 && errno != EEXIST)
    return errno_status("cannot enable btrfs quotas on " + path.string()
                        + " (needed for per-sandbox disk limits; set disk_quota=false to run "
                          "without them)");
  // Accounting is only right once the initial rescan has finished.
  if (::ioctl(fd->get(), BTRFS_IOC_QUOTA_RESCAN_WAIT, nullptr) != 0 && errno != EINVAL)
    return errno_status("waiting for the btrfs quota rescan on " + path.string());
  return status::ok();
}

status btrfs_limit_referenced(const std::filesystem::path& any_path, uint64_t subvolume_id,
                              uint64_t bytes) {
  auto fd = open_fd(any_path, O_RDONLY);
  if (!fd)
    return fd.error();
  btrfs_ioctl_qgroup_limit_args args{};
  args.qgroupid = subvolume_id;
  args.lim.flags = BTRFS_QGROUP_LIMIT_MAX_RFER;
  args.lim.max_rfer = bytes == 0 ? UINT64_MAX : bytes; // all ones means "none"
  if (::ioctl(fd->get(), BTRFS_IOC_QGROUP_LIMIT, &args) != 0)
    return errno_status("cannot set the disk limit of qgroup 0/" + std::to_string(subvolume_id));
  return status::ok();
}

result<btrfs_qgroup_usage> btrfs_qgroup(const std::filesystem::path& any_path,
                                        uint64_t subvolume_id) {
  auto fd = open_fd(any_path, O_RDONLY);
  if (!fd)
    return fd.error();
  auto info = quota_item(fd->get(), BTRFS_QGROUP_INFO_KEY, subvolume_id);
  if (!info)
    return info.error();
  if (info->size() < sizeof(btrfs_qgroup_info_item))
    return make_status(errc::corrupt_record, "qgroup info item is too short");
  btrfs_qgroup_usage usage;
  usage.referenced_bytes = le64_at(info->data(), offsetof(btrfs_qgroup_info_item, rfer));
  usage.exclusive_bytes = le64_at(info->data(), offsetof(btrfs_qgroup_info_item, excl));
  auto limit = quota_item(fd->get(), BTRFS_QGROUP_LIMIT_KEY, subvolume_id);
  if (limit && limit->size() >= sizeof(btrfs_qgroup_limit_item)) {
    auto flags = le64_at(limit->data(), offsetof(btrfs_qgroup_limit_item, flags));
    auto max_rfer = le64_at(limit->data(), offsetof(btrfs_qgroup_limit_item, max_rfer));
    if ((flags & BTRFS_QGROUP_LIMIT_MAX_RFER) != 0 && max_rfer != UINT64_MAX)
      usage.referenced_limit_bytes = max_rfer;
  }
  return usage;
}

} // namespace airlock::worker
