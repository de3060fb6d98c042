#pragma once
// The QEMU command line of one microVM, as data: `-M microvm` with the guest
// kernel and initramfs that scripts/microvm-guest builds, a virtio-serial port
// for the guest channel, QMP, an optional virtio-blk root disk. Pure: a unit
// test reads it; vm.cpp runs it.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace airlock::worker::microvm {

enum class accelerator { tcg, kvm };
std::string_view to_string(accelerator accel) noexcept;

/// The guest a VM boots (scripts/microvm-guest's output directory).
struct guest_image {
  std::string kernel_path; ///< the uncompressed vmlinux (PVH entry)
  std::string initrd_path; ///< initramfs.cpio with busybox, modules and airlock-guest
  std::string release;     ///< the kernel's release (`uname -r` inside)
};

/// Reads `dir`/{vmlinux,initramfs.cpio,release}; empty paths when missing.
guest_image guest_image_in(const std::string& dir);

/// The guest's NIC: a virtio-net device on a tap descriptor QEMU inherits
/// (opened by the runtime in the sandbox's network namespace), and what the
/// guest's agent configures on eth0 (airlock.net= on the kernel command line).
struct vm_network {
  /// The guest's address and prefix length, "10.200.0.2/30".
  std::string address;
  /// Its default route, the host side of the sandbox's veth.
  std::string gateway;
  /// The NIC's MAC, "02:..." (vm_mac_address).
  std::string mac;
  /// Borrowed; the tap device's descriptor, passed to QEMU as tap_fd_in_vmm.
  int tap_fd = -1;
};

/// One VM's shape.
struct vm_spec {
  /// Names the VM's sockets and log; [a-z0-9_-], 1..63 characters.
  std::string id;
  guest_image guest;
  /// A raw ext4 image that the guest mounts as / (virtio-blk, /dev/vda). "":
  /// no disk, the agent runs from the initramfs (the accelerator probe).
  std::string disk_path;
  accelerator accel = accelerator::tcg;
  /// Guest RAM. Default: 256.
  uint32_t memory_mb = 256;
  /// Default: 1.
  uint32_t vcpus = 1;
  /// Under TCG the guest's TSC runs at the host's rate, but the kernel often
  /// fails to calibrate it against an emulated PIT on a loaded host and then
  /// hangs; this tells it the rate (tsc_early_khz). 0: not given. Default: 0.
  uint32_t tsc_khz = 0;
  /// Under TCG, the translated-code cache in MiB (QEMU's default is 1 GiB,
  /// which would count against a cgroup limit as the guest runs). 0: QEMU's
  /// default. Default: 0.
  uint32_t tcg_tb_mb = 0;
  /// The guest's NIC; unset (tap_fd < 0): none, and the guest loads no
  /// network driver.
  vm_network network;
  /// File the guest's serial console is written to. "": discarded.
  std::string log_path;
  /// Borrowed; when >= 0, QEMU gets a copy of this connected stream socket as
  /// the guest channel (the worker's end of its own pair stays the worker's)
  /// and vm::take_channel() returns nothing. -1: vm makes the pair. Default: -1.
  int channel_fd = -1;
  /// The guest's RAM as a file (memory-backend-file): a running VM's memory
  /// can then be saved by naming the file instead of streaming it
  /// (x-ignore-shared). "": anonymous RAM, which cannot be snapshotted.
  std::string memory_path;
  /// How memory_path is mapped. true (share=on): the guest writes the file,
  /// so it holds the guest's memory and can be saved. false (share=off): a
  /// private copy-on-write mapping, the file is only read; clones of one base
  /// share its untouched pages through the page cache. Default: true.
  bool memory_shared = true;
  /// No guest channel on the command line: it is added over QMP later
  /// (vm::attach_channel), so that a QEMU can be started before the channel
  /// it will serve exists (a pool of clones waiting for their state). QEMU
  /// 7.2 cannot swap the chardev of an existing virtio-serial port.
  /// Default: false.
  bool channel_hotplug = false;
  /// Start paused and wait for an incoming migration (-incoming defer): the
  /// state is loaded through QMP (vm::load_state). Default: false.
  bool incoming = false;
};

/// The -M argument: everything about the machine that a saved state must
/// find again on restore (it is recorded in a snapshot).
std::string machine_argument(const vm_spec& spec);
/// The -cpu argument.
std::string cpu_argument(const vm_spec& spec);
/// The -object that backs the guest's RAM with spec.memory_path ("" without one).
std::string memory_backend_argument(const vm_spec& spec);

/// Descriptors of the QEMU process: the guest channel (a connected unix
/// socket) and the QMP listener (bound and listening before QEMU starts, so
/// that the runtime can connect at once).
inline constexpr int channel_fd_in_vmm = 3;
inline constexpr int qmp_fd_in_vmm = 4;
/// The tap device of a VM with a NIC.
inline constexpr int tap_fd_in_vmm = 5;
/// The virtio-serial port the guest's /init hands to the agent.
inline constexpr std::string_view channel_port_name = "airlock.channel";
/// The memory backend's QOM id; a restore must use the same one (the
/// migration stream names RAM blocks by it).
inline constexpr std::string_view memory_backend_id = "mem";

/// A locally administered unicast MAC derived from the sandbox id
/// ("02:" and 5 bytes of a hash): stable for an id, distinct between ids.
std::string vm_mac_address(std::string_view id);

/// argv of QEMU for `spec`; argv[0] is `qemu_binary`, `firmware` the -bios
/// file; `seccomp` adds QEMU's own sandbox.
std::vector<std::string> qemu_argv(const vm_spec& spec, const std::string& qemu_binary,
                                   const std::string& firmware, bool seccomp = true);

/// The host files QEMU opens by path for `spec` (the VMM jail holds exactly
/// these): read-only ones and ones it writes.
struct vmm_files {
  std::vector<std::string> read_only;
  std::vector<std::string> writable;
};
vmm_files files_of(const vm_spec& spec, const std::string& firmware);

/// The host's TSC rate in kHz, measured against CLOCK_MONOTONIC_RAW over
/// about 20 ms (blocks that long). 0 when it cannot be measured.
uint32_t measure_tsc_khz();

} // namespace airlock::worker::microvm
