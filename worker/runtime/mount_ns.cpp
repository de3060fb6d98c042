#include "worker/runtime/mount_ns.hpp"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "worker/runtime/sys.hpp"

namespace airlock::worker {

const char* mount_plan::keep(const std::string& text) {
  if (text.empty())
    return nullptr;
  return strings_.emplace_back(text).c_str();
}

void mount_plan::add(mount_op::kind what, const std::string& source, const std::string& target,
                     const std::string& fstype, unsigned long flags, const std::string& data,
                     bool optional) {
  ops_.push_back(
    mount_op{what, keep(source), keep(target), keep(fstype), flags, keep(data), optional});
}

size_t mount_plan::host_steps() const noexcept {
  for (size_t i = 0; i < ops_.size(); ++i)
    if (ops_[i].what == mount_op::kind::enter)
      return i + 1;
  return 0;
}

std::string mount_plan::describe(size_t index) const {
  if (index >= ops_.size())
    return "unknown mount step";
  const auto& op = ops_[index];
  auto text = [](const char* s) { return std::string(s ? s : "-"); };
  switch (op.what) {
    case mount_op::kind::make_private: return "make / rprivate";
    case mount_op::kind::attach_rootfs: return "attach the rootfs at " + text(op.target);
    case mount_op::kind::attach_file: return "attach the boot id over /" + text(op.target);
    case mount_op::kind::enter: return "chdir into " + text(op.target);
    case mount_op::kind::mount_fs:
      return "mount " + text(op.fstype) + " on /" + text(op.target) + " (" + text(op.data) + ")";
    case mount_op::kind::bind: return "bind " + text(op.source) + " over /" + text(op.target);
    case mount_op::kind::remount_ro: return "remount /" + text(op.target) + " read-only";
    case mount_op::kind::make_dir: return "mkdir /" + text(op.target);
    case mount_op::kind::make_file: return "create /" + text(op.target);
    case mount_op::kind::symlink: return "symlink /" + text(op.target) + " -> " + text(op.source);
    case mount_op::kind::pivot: return "pivot_root into the rootfs";
  }
  return "unknown mount step";
}

const std::vector<std::string>& masked_proc_paths() {
  static const std::vector<std::string> paths = {
    "proc/kcore",       "proc/keys", "proc/timer_list", "proc/sched_debug", "proc/latency_stats",
    "proc/timer_stats", "proc/acpi", "proc/scsi",       "proc/asound",
  };
  return paths;
}

const std::vector<std::string>& readonly_proc_paths() {
  static const std::vector<std::string> paths = {
    "proc/bus", "proc/fs", "proc/irq", "proc/sys", "proc/sysrq-trigger",
  };
  return paths;
}

namespace {

using k = mount_op::kind;
constexpr unsigned long locked_down = MS_NOSUID | MS_NODEV | MS_NOEXEC;

/// Directories are masked with an empty read-only tmpfs, files with /dev/null;
/// which is which is only known inside the child (the op kind bind works
/// for files, and for directories the child falls back to tmpfs).
void add_proc(mount_plan& plan) {
  plan.add(k::make_dir, "", "proc");
  plan.add(k::mount_fs, "proc", "proc", "proc", locked_down);
  for (const auto& path : masked_proc_paths())
    plan.add(k::bind, "/dev/null", path, "tmpfs", MS_RDONLY | locked_down, "size=4k,mode=0555",
             true);
  for (const auto& path : readonly_proc_paths())
    plan.add(k::remount_ro, "", path, "", locked_down, "", true);
  // Over the read-only /proc/sys: the mount is read-only of its own.
  plan.add(k::attach_file, "", boot_id_target);
}

void add_sys(mount_plan& plan, const mount_options& options) {
  plan.add(k::make_dir, "", "sys");
  if (!options.mount_sysfs)
    return;
  plan.add(k::mount_fs, "sysfs", "sys", "sysfs", MS_RDONLY | locked_down);
  for (const char* path : {"sys/firmware", "sys/devices/virtual/powercap"})
    plan.add(k::bind, "/dev/null", path, "tmpfs", MS_RDONLY | locked_down, "size=4k,mode=0555",
             true);
}

void add_dev(mount_plan& plan, const mount_options& options) {
  plan.add(k::make_dir, "", "dev");
  plan.add(k::mount_fs, "tmpfs", "dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=256k");
  for (const char* name : {"null", "zero", "full", "random", "urandom", "tty"}) {
    std::string target = std::string("dev/") + name;
    plan.add(k::make_file, "", target);
    plan.add(k::bind, std::string("/dev/") + name, target);
  }
  plan.add(k::make_dir, "", "dev/pts");
  plan.add(k::mount_fs, "devpts", "dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
           "newinstance,ptmxmode=0666,mode=0620");
  plan.add(k::symlink, "pts/ptmx", "dev/ptmx");
  plan.add(k::make_dir, "", "dev/shm");
  plan.add(k::mount_fs, "shm", "dev/shm", "tmpfs", locked_down,
           "mode=1777,size=" + std::to_string(options.dev_shm_size_mb) + "m");
  plan.add(k::symlink, "/proc/self/fd", "dev/fd");
  plan.add(k::symlink, "/proc/self/fd/0", "dev/stdin");
  plan.add(k::symlink, "/proc/self/fd/1", "dev/stdout");
  plan.add(k::symlink, "/proc/self/fd/2", "dev/stderr");
}

} // namespace

void build_mount_plan(const mount_options& options, mount_plan& plan) {
  plan.add(k::make_private, "", "/");
  plan.add(k::attach_rootfs, "", options.rootfs_path);
  plan.add(k::enter, "", options.rootfs_path);
  add_proc(plan);
  add_sys(plan, options);
  add_dev(plan, options);
  plan.add(k::pivot, "", ".");
}

result<unique_fd> open_idmapped_rootfs(const std::string& rootfs_path, int userns_fd, bool setuid) {
  unique_fd tree(::open_tree(AT_FDCWD, rootfs_path.c_str(), OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC));
  if (!tree)
    return sys_error(errc_from_errno(errno), "open_tree " + rootfs_path, errno);
  mount_attr attr{};
  attr.attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_NODEV | (setuid ? 0 : MOUNT_ATTR_NOSUID);
  attr.userns_fd = static_cast<uint64_t>(userns_fd);
  if (::mount_setattr(tree.get(), "", AT_EMPTY_PATH, &attr, sizeof attr) != 0)
    return sys_error(errc::invalid_argument,
                     "id-map the rootfs " + rootfs_path
                       + " (its filesystem must support id-mapped mounts: ext4, xfs, btrfs, "
                         "tmpfs on 6.3+, overlayfs on 5.19+)",
                     errno);
  return tree;
}

result<unique_fd> open_readonly_file_mount(const std::string& path) {
  unique_fd tree(::open_tree(AT_FDCWD, path.c_str(), OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC));
  if (!tree)
    return sys_error(errc_from_errno(errno), "open_tree " + path, errno);
  mount_attr attr{};
  attr.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC;
  if (::mount_setattr(tree.get(), "", AT_EMPTY_PATH, &attr, sizeof attr) != 0)
    return sys_error(errc::internal, "make the mount of " + path + " read-only", errno);
  return tree;
}

namespace {

int create_file(const char* path) noexcept {
  int fd = ::open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0666);
  if (fd < 0)
    return errno;
  ::close(fd);
  return 0;
}

/// Masks and device binds. A masked directory cannot take a file bind: it
/// gets the op's empty read-only tmpfs instead.
int bind_over(const mount_op& op) noexcept {
  if (op.fstype != nullptr) {
    struct stat st {};
    if (::stat(op.target, &st) != 0)
      return errno;
    if (S_ISDIR(st.st_mode))
      return ::mount("tmpfs", op.target, "tmpfs", op.flags, op.data) == 0 ? 0 : errno;
  }
  return ::mount(op.source, op.target, nullptr, MS_BIND | MS_REC, nullptr) == 0 ? 0 : errno;
}

int remount_read_only(const mount_op& op) noexcept {
  if (::mount(op.target, op.target, nullptr, MS_BIND | MS_REC, nullptr) != 0)
    return errno;
  unsigned long flags = MS_BIND | MS_REMOUNT | MS_RDONLY | op.flags;
  return ::mount(nullptr, op.target, nullptr, flags, nullptr) == 0 ? 0 : errno;
}

int attach_file(const mount_op& op, int file_fd) noexcept {
  if (file_fd < 0)
    return 0; // no file prepared: the kernel's own stays visible
  return ::move_mount(file_fd, "", AT_FDCWD, op.target, MOVE_MOUNT_F_EMPTY_PATH) == 0 ? 0 : errno;
}

int attach_rootfs(const mount_op& op, int rootfs_fd) noexcept {
  if (rootfs_fd >= 0)
    return ::move_mount(rootfs_fd, "", AT_FDCWD, op.target, MOVE_MOUNT_F_EMPTY_PATH) == 0 ? 0
                                                                                          : errno;
  return ::mount(op.target, op.target, nullptr, MS_BIND | MS_REC, nullptr) == 0 ? 0 : errno;
}

int pivot_into_cwd() noexcept {
  // pivot_root(".", ".") stacks the old root on top of the new one; detaching
  // it leaves only the new root, with no path back to the host's tree.
  if (::syscall(SYS_pivot_root, ".", ".") != 0)
    return errno;
  if (::umount2(".", MNT_DETACH) != 0)
    return errno;
  return ::chdir("/") == 0 ? 0 : errno;
}

int apply_one(const mount_op& op, const mount_fds& fds) noexcept {
  switch (op.what) {
    case k::make_private:
      return ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0 ? 0 : errno;
    case k::attach_rootfs: return attach_rootfs(op, fds.rootfs);
    case k::attach_file: return attach_file(op, fds.boot_id);
    case k::enter: return ::chdir(op.target) == 0 ? 0 : errno;
    case k::mount_fs:
      return ::mount(op.source, op.target, op.fstype, op.flags, op.data) == 0 ? 0 : errno;
    case k::bind: return bind_over(op);
    case k::remount_ro: return remount_read_only(op);
    case k::make_dir: return ::mkdir(op.target, 0755) == 0 || errno == EEXIST ? 0 : errno;
    case k::make_file: return create_file(op.target);
    case k::symlink: return ::symlink(op.source, op.target) == 0 || errno == EEXIST ? 0 : errno;
    case k::pivot: return pivot_into_cwd();
  }
  return EINVAL;
}

} // namespace

int apply_mount_plan(const std::vector<mount_op>& ops, size_t begin, size_t end,
                     const mount_fds& fds, size_t& failed_index) noexcept {
  for (size_t i = begin; i < end && i < ops.size(); ++i) {
    const auto& op = ops[i];
    if (op.optional && ::access(op.target, F_OK) != 0)
      continue;
    if (int err = apply_one(op, fds); err != 0) {
      failed_index = i;
      return err;
    }
  }
  return 0;
}

} // namespace airlock::worker
