#include "worker/microvm/vmm_jail.hpp"

#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <set>

namespace airlock::worker::microvm {
namespace {

using k = mount_op::kind;

constexpr unsigned long jail_flags = MS_NOSUID | MS_NODEV;

/// The host's top-level entries that hold QEMU and its libraries: on a
/// merged-/usr system (Debian 12) all but /usr are symbolic links into it.
constexpr const char* system_entries[] = {"bin", "sbin", "lib", "lib64", "lib32", "libx32"};

bool is_clean_absolute(const std::string& path) {
  if (path.empty() || path[0] != '/' || path.size() == 1)
    return false;
  size_t start = 1;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos)
      end = path.size();
    const auto part = path.substr(start, end - start);
    if (part.empty() || part == "." || part == "..")
      return false;
    start = end + 1;
  }
  return true;
}

/// Adds make_dir steps for each ancestor of the relative `path` not made yet.
void add_parents(const std::string& relative, std::set<std::string>& made, mount_plan& plan) {
  for (size_t slash = relative.find('/'); slash != std::string::npos;
       slash = relative.find('/', slash + 1)) {
    auto dir = relative.substr(0, slash);
    if (made.insert(dir).second)
      plan.add(k::make_dir, {}, dir);
  }
}

/// True for a path under /usr or a top-level system entry: the jail has it
/// already, read-only.
bool in_system_tree(const std::string& path) {
  const auto first = path.substr(1, path.find('/', 1) - 1);
  if (first == "usr")
    return true;
  for (const char* entry : system_entries)
    if (first == entry)
      return true;
  return false;
}

/// Binds the host file `path` at the same path inside the jail.
void add_file(const std::string& path, bool read_only, std::set<std::string>& made,
              mount_plan& plan) {
  if (in_system_tree(path))
    return;
  const auto relative = path.substr(1);
  add_parents(relative, made, plan);
  plan.add(k::make_file, {}, relative);
  plan.add(k::bind, path, relative);
  if (read_only)
    plan.add(k::remount_ro, {}, relative, {}, jail_flags | MS_NOEXEC);
}

} // namespace

status build_vmm_jail_plan(const vmm_jail_spec& spec, mount_plan& plan) {
  if (!is_clean_absolute(spec.root_dir))
    return make_status(errc::invalid_argument, "vmm jail: the root must be an absolute path");
  for (const auto* list : {&spec.read_only_files, &spec.writable_files, &spec.devices})
    for (const auto& path : *list)
      if (!is_clean_absolute(path))
        return make_status(errc::invalid_argument,
                           "vmm jail: \"" + path + "\" is not a clean absolute path");
  plan.add(k::make_private, {}, {});
  plan.add(k::mount_fs, "tmpfs", spec.root_dir, "tmpfs", jail_flags, "mode=0755,size=1m");
  plan.add(k::enter, {}, spec.root_dir);
  std::set<std::string> made;
  // The programs and libraries: /usr read-only, without setuid binaries'
  // powers or device nodes.
  made.insert("usr");
  plan.add(k::make_dir, {}, "usr");
  plan.add(k::bind, "/usr", "usr");
  plan.add(k::remount_ro, {}, "usr", {}, jail_flags);
  for (const char* entry : system_entries) {
    const std::string host = std::string("/") + entry;
    struct stat st {};
    if (::lstat(host.c_str(), &st) != 0)
      continue;
    if (S_ISLNK(st.st_mode)) {
      char target[256];
      auto length = ::readlink(host.c_str(), target, sizeof target - 1);
      if (length <= 0)
        continue;
      plan.add(k::symlink, std::string(target, static_cast<size_t>(length)), entry);
    } else if (S_ISDIR(st.st_mode)) {
      made.insert(entry);
      plan.add(k::make_dir, {}, entry);
      plan.add(k::bind, host, entry);
      plan.add(k::remount_ro, {}, entry, {}, jail_flags);
    }
  }
  // The dynamic linker finds the multiarch library directories through its cache.
  if (::access("/etc/ld.so.cache", R_OK) == 0)
    add_file("/etc/ld.so.cache", true, made, plan);
  made.insert("dev");
  plan.add(k::make_dir, {}, "dev");
  std::vector<std::string> devices = {"/dev/null", "/dev/zero", "/dev/random", "/dev/urandom"};
  devices.insert(devices.end(), spec.devices.begin(), spec.devices.end());
  for (const auto& device : devices) {
    const auto relative = device.substr(1);
    add_parents(relative, made, plan);
    plan.add(k::make_file, {}, relative);
    plan.add(k::bind, device, relative);
  }
  // A /proc of the VMM's own pid namespace: QEMU reads its own entries.
  made.insert("proc");
  plan.add(k::make_dir, {}, "proc");
  plan.add(k::mount_fs, "proc", "proc", "proc", jail_flags | MS_NOEXEC);
  for (const auto& path : spec.read_only_files)
    add_file(path, true, made, plan);
  for (const auto& path : spec.writable_files)
    add_file(path, false, made, plan);
  // The jail's own directories cannot change once QEMU runs (the tmpfs as a
  // whole is remounted read-only; the writable files are mounts of their own).
  plan.add(k::mount_fs, {}, ".", {}, MS_REMOUNT | MS_RDONLY | jail_flags, "mode=0755");
  plan.add(k::pivot, {}, {});
  return status::ok();
}

} // namespace airlock::worker::microvm
