#include "worker/microvm/qemu_command.hpp"

#include <time.h>
#include <x86intrin.h>

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
  if (spec.network)
    append += " airlock.net=1";
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
  if (!spec.memory_path.empty())
    argv.insert(argv.end(), {"-object", memory_backend_argument(spec)});
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
  return argv;
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
