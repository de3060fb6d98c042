#pragma once
// The VMM's filesystem view: a mount namespace whose root is an empty tmpfs
// holding only what QEMU opens, each at its host path so that QEMU's command
// line stays as it is: /usr (and the merged-/usr links or directories beside
// it) and the dynamic linker's cache read-only, a few device nodes, a /proc
// of its own pid namespace, and the VM's own files (kernel, initramfs, disk,
// console log, RAM file). Built from the namespace runtime's mount_plan steps
// and applied by the child between clone and exec, before it drops to the
// VMM's uid (as root, so that files below the 0700 data directory can be
// bound; the directories the plan makes are 0755, so the VMM's uid can walk
// to them inside the jail and to nothing else).

#include <string>
#include <vector>

#include "schema/errc.hpp"
#include "worker/runtime/mount_ns.hpp"

namespace airlock::worker::microvm {

/// What goes into one VMM's jail.
struct vmm_jail_spec {
  /// An empty directory on the host that becomes the jail's root (a tmpfs is
  /// mounted on it inside the VMM's mount namespace only).
  std::string root_dir;
  /// Absolute host paths QEMU reads (kernel, initramfs, firmware outside /usr).
  std::vector<std::string> read_only_files;
  /// Absolute host paths QEMU writes (disk, console log, RAM file).
  std::vector<std::string> writable_files;
  /// Device nodes beyond null, zero, random and urandom (/dev/kvm under KVM).
  std::vector<std::string> devices;
};

/// The mount steps that build the jail and pivot into it. invalid_argument
/// for a relative path or one with "..": the plan is data, checked here.
status build_vmm_jail_plan(const vmm_jail_spec& spec, mount_plan& plan);

} // namespace airlock::worker::microvm
