#include "worker/microvm/qemu_command.hpp"

#include <time.h>
#include <x86intrin.h>

#include <cstdio>
#include <fstream>

namespace airlock::worker::microvm {

std::string_view to_string(accelerator accel) noexcept {
  return accel == accelerator::kvm ? "kvm" : "tcg";
}

guest_image guest_image_in(const std::string& dir) {
  guest_image image;
  auto existing = [&dir](const char* name) {
    std::string path = dir + "/" + name;
    return std::ifstream(path).good() ? path : std::string();
  };
  image.kernel_path = existing("vmlinux");
  image.initrd_path = existing("initramfs.cpio");
  std::ifstream(dir + "/release") >> image.release;
  return image;
}

std::string machine_argument(const vm_spec& spec) {
  std::string machine = "microvm,x-option-roms=off";
  if (!spec.memory_path.empty())
    machine += ",memory-backend=" + std::string(memory_backend_id);
  return machine;
}

std::string cpu_argument(const vm_spec& spec) {
  // Under KVM, -arch-capabilities: QEMU aborts on MSR 0x10a otherwise on
  // some hosts (docs/microvm.md).
  return spec.accel == accelerator::kvm ? "host,-arch-capabilities" : "max";
}

std::string memory_backend_argument(const vm_spec& spec) {
  if (spec.memory_path.empty())
    return "";
  return "memory-backend-file,id=" + std::string(memory_backend_id)
         + ",size=" + std::to_string(spec.memory_mb) + "M,mem-path=" + spec.memory_path
         + ",share=" + (spec.memory_shared ? "on" : "off");
}

std::vector<std::string> qemu_argv(const vm_spec& spec, const std::string& qemu_binary,
                                   const std::string& firmware, bool seccomp) {
  // quiet: the console is an emulated UART, slow under TCG. reboot=t and
  // panic=-1 with -no-reboot: a guest that reboots or whose init dies ends
  // QEMU instead of looping. no_timer_check: the IO-APIC timer check is
  // unreliable under TCG on a loaded host.
  std::string append = "console=ttyS0 quiet reboot=t panic=-1 no_timer_check";
  // The guest's /init loads virtio_net only with airlock.net= and hands its
  // value to the agent, which configures eth0 and the default route.
  const bool nic = spec.network.tap_fd >= 0;
  if (nic)
    append += " airlock.net=" + spec.network.address + "," + spec.network.gateway;
  if (spec.accel == accelerator::tcg && spec.tsc_khz != 0)
    append += " tsc_early_khz=" + std::to_string(spec.tsc_khz);
  std::vector<std::string> argv = {
    qemu_binary,
    // ACPI stays on (the default): Debian's kernel finds virtio-mmio devices
    // only through it. No option ROMs: the kernel is loaded directly.
    "-M",
    machine_argument(spec),
    "-accel",
    spec.accel == accelerator::tcg && spec.tcg_tb_mb != 0
      ? "tcg,tb-size=" + std::to_string(spec.tcg_tb_mb)
      : std::string(to_string(spec.accel)),
    "-cpu",
    cpu_argument(spec),
    "-m",
    std::to_string(spec.memory_mb),
    "-smp",
    std::to_string(spec.vcpus),
    "-nodefaults",
    "-no-user-config",
    "-display",
    "none",
    "-no-reboot",
    "-bios",
    firmware,
    "-kernel",
    spec.guest.kernel_path,
    "-initrd",
    spec.guest.initrd_path,
    "-append",
    append,
    "-chardev",
    spec.log_path.empty() ? "null,id=console" : "file,id=console,path=" + spec.log_path,
    "-serial",
    "chardev:console",
    "-device",
    "virtio-serial-device",
    "-chardev",
    "socket,id=qmp,server=on,wait=off,fd=" + std::to_string(qmp_fd_in_vmm),
    "-mon",
    "chardev=qmp,mode=control",
  };
  if (!spec.channel_hotplug) {
    argv.insert(argv.end(),
                {"-chardev", "socket,id=channel,fd=" + std::to_string(channel_fd_in_vmm), "-device",
                 "virtserialport,chardev=channel,name=" + std::string(channel_port_name)});
  }
  if (auto backend = memory_backend_argument(spec); !backend.empty())
    argv.insert(argv.end(), {"-object", std::move(backend)});
  if (spec.incoming)
    argv.insert(argv.end(), {"-incoming", "defer"});
  if (seccomp) {
    // QEMU's seccomp filter: a guest that takes over QEMU cannot exec,
    // fork helpers, change ids or use obsolete calls.
    argv.insert(argv.end(), {"-sandbox", "on,obsolete=deny,elevateprivileges=deny,spawn=deny,"
                                         "resourcecontrol=deny"});
  }
  if (!spec.disk_path.empty()) {
    for (std::string arg : {"-drive", "id=root,format=raw,if=none,file="})
      argv.push_back(std::move(arg));
    argv.back() += spec.disk_path;
    argv.insert(argv.end(), {"-device", "virtio-blk-device,drive=root"});
  }
  if (nic) {
    // vhost=off: the virtio ring is served by QEMU itself (no vhost-net here,
    // and it would need /dev/vhost-net inside QEMU's jail).
    argv.insert(argv.end(), {"-netdev", "tap,id=net0,vhost=off,fd=" + std::to_string(tap_fd_in_vmm),
                             "-device", "virtio-net-device,netdev=net0,mac=" + spec.network.mac});
  }
  return argv;
}

vmm_files files_of(const vm_spec& spec, const std::string& firmware) {
  vmm_files files;
  for (const auto* path : {&spec.guest.kernel_path, &spec.guest.initrd_path, &firmware})
    if (!path->empty())
      files.read_only.push_back(*path);
  // A clone's private mapping of its base's RAM file still opens it read-write.
  for (const auto* path : {&spec.disk_path, &spec.log_path, &spec.memory_path})
    if (!path->empty())
      files.writable.push_back(*path);
  return files;
}

std::string vm_mac_address(std::string_view id) {
  uint64_t hash = 14695981039346656037ULL;
  for (char c : id) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 1099511628211ULL;
  }
  char text[18];
  // 0x02: locally administered, unicast.
  std::snprintf(
    text, sizeof text, "02:%02x:%02x:%02x:%02x:%02x", static_cast<unsigned>((hash >> 32) & 0xff),
    static_cast<unsigned>((hash >> 24) & 0xff), static_cast<unsigned>((hash >> 16) & 0xff),
    static_cast<unsigned>((hash >> 8) & 0xff), static_cast<unsigned>(hash & 0xff));
  return text;
}

uint32_t measure_tsc_khz() {
  auto now_ns = [] {
    timespec ts{};
    ::clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
  };
  const int64_t start_ns = now_ns();
  const uint64_t start_tsc = __rdtsc();
  int64_t elapsed_ns = 0;
  while ((elapsed_ns = now_ns() - start_ns) < 20'000'000) {
  }
  const uint64_t ticks = __rdtsc() - start_tsc;
  if (elapsed_ns <= 0 || ticks == 0)
    return 0;
  return static_cast<uint32_t>(ticks * 1'000'000 / static_cast<uint64_t>(elapsed_ns));
}

} // namespace airlock::worker::microvm
