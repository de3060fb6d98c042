#pragma once
// One QEMU microVM process: started from a vm_spec with its guest channel (a
// connected unix socket pair, the VM's end passed in) and QMP (a listener
// bound in the run directory before QEMU starts), stopped through QMP with a
// bounded wait and SIGKILL behind it. Blocking; call it off the actor threads.

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "schema/errc.hpp"
#include "schema/unique_fd.hpp"
#include "worker/microvm/qemu_command.hpp"
#include "worker/microvm/qmp.hpp"

namespace airlock::worker::microvm {

struct vm_options {
  /// Found in PATH unless it has a '/'. Default: qemu-system-x86_64.
  std::string qemu_binary = "qemu-system-x86_64";
  /// -bios: qboot skips SeaBIOS (Debian's qemu-system-data). Default: /usr/share/qemu/qboot.rom.
  std::string firmware = "/usr/share/qemu/qboot.rom";
  /// From spawn to QMP's greeting answered. Generous: on a loaded 2-core
  /// host under TCG, 10 s was seen to pass before QEMU (jailed, sandboxed)
  /// answered. Default: 30000.
  uint32_t qmp_timeout_ms = 30'000;
  /// stop(): how long QEMU has to exit after QMP quit before SIGKILL. Default: 5000.
  uint32_t stop_timeout_ms = 5'000;
  // The jail (docs/microvm.md): QEMU always runs with no_new_privs, in a
  // session of its own, with no descriptor but its own, in the caller's
  // cgroup choice (before_exec).
  /// QEMU's own seccomp filter (-sandbox on, denying obsolete calls,
  /// privilege changes, spawning processes and resource control). Default: true.
  bool seccomp = true;
  /// New pid, mount, network, IPC and UTS namespaces: QEMU is pid 1 of its
  /// own, sees only the files it opens (vmm_jail.hpp) and needs none of the
  /// host's network or IPC (the channel, QMP and a NIC's tap device arrive as
  /// descriptors; the tap stays in the sandbox's network namespace, QEMU's
  /// own stays empty). Needs root. Default: true.
  bool unshare = true;
  /// Host uid and gid QEMU runs as; the disk and the console log are given
  /// to them, and the run directory must be traversable by them. No
  /// supplementary group but /dev/kvm's under KVM. 0: the caller's. Default: 0.
  uint32_t vmm_uid = 0;
  uint32_t vmm_gid = 0;
};

class vm {
public:
  /// Starts QEMU for `spec`; its QMP socket is `run_dir`/<id>.qmp and its own
  /// messages go to `run_dir`/<id>.vmm.log (quoted in a start failure).
  /// Returns once QMP answers; the guest boots on meanwhile. On failure
  /// nothing is left running and both files are removed.
  /// `before_exec`, when set, runs in the caller with QEMU's pid while the
  /// child waits before exec (it joins a cgroup there); a failure ends the
  /// child and start().
  static result<std::unique_ptr<vm>> start(const vm_spec& spec, const std::string& run_dir,
                                           const vm_options& options = {},
                                           const std::function<status(pid_t)>& before_exec = {});
  /// stop() when still running.
  ~vm();
  vm(const vm&) = delete;
  vm& operator=(const vm&) = delete;

  /// The host's end of the guest channel (for guest::guest_client); once.
  unique_fd take_channel() { return std::move(channel_); }
  qmp_client& qmp() { return *qmp_; }
  pid_t pid() const noexcept { return pid_; }
  /// QEMU's pidfd, owned by this object (-1 when the kernel has none).
  int pidfd() const noexcept { return pidfd_.get(); }
  const std::string& qmp_path() const noexcept { return qmp_path_; }

  /// Saves the guest's device state (CPU, devices; 60-odd KB) to
  /// `state_path`: QMP stop, the x-ignore-shared capability, a migration to
  /// the file through a descriptor handed over QMP (getfd; QEMU's seccomp
  /// filter forbids the exec: URI's shell, and 7.2 has no file: URI), and a
  /// bounded wait for it to complete. With `ram_in_file` RAM is not in the
  /// stream: it is the spec's memory_path file, mapped shared. Without it
  /// (a private mapping) the stream carries the RAM. Leaves the VM paused
  /// (postmigrate): quit it, or QMP cont to go on.
  status save_state(const std::string& state_path, int timeout_ms, bool ram_in_file = true);
  /// For a VM started with spec.channel_hotplug, before its state loads:
  /// gives QEMU a copy of `fd` (getfd), makes it the channel's chardev
  /// (chardev-add) and adds the virtio-serial port on it (device_add), so
  /// that the device line matches a VM booted with the channel.
  status attach_channel(int fd, int timeout_ms);
  /// For a VM started with spec.incoming: loads `state_path` (the
  /// capability as the save had it, same descriptor passing) and waits until
  /// it is loaded. The VM stays paused; QMP cont runs it.
  status load_state(const std::string& state_path, int timeout_ms, bool ram_in_file = true);

  /// Waits up to `timeout_ms` for QEMU to exit by itself; true once it has
  /// (and it is reaped).
  bool wait_exit(int timeout_ms);

  /// QMP quit, a bounded wait, then SIGKILL; reaps QEMU, closes the channel
  /// and removes the QMP socket and the log. Idempotent. Fails (io_error)
  /// only when QEMU had to be killed.
  status stop();

private:
  vm() = default;

  pid_t pid_ = -1;
  unique_fd pidfd_;
  bool reaped_ = false;
  unique_fd channel_;
  std::optional<qmp_client> qmp_;
  std::string qmp_path_;
  std::string vmm_log_path_;
  std::string jail_root_; ///< the jail's mount point on the host ("" without one)
  vm_options options_;
};

} // namespace airlock::worker::microvm
