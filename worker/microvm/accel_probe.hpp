#pragma once
// Which accelerator the microVMs of this host use, chosen by proof: a probe
// guest is booted under KVM and KVM is used only when its agent answers in
// time. /dev/kvm opening proves nothing: a paravirtual KVM (PVM) opens, creates
// VMs and then hangs a stock kernel (docs/microvm.md). Blocking: the probe
// boots a VM.

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "worker/microvm/qemu_command.hpp"
#include "worker/microvm/vm.hpp"

namespace airlock::worker::microvm {

enum class accel_mode { probe, tcg, kvm };

struct accel_options {
  /// probe, or force one accelerator without a probe. Default: probe.
  accel_mode mode = accel_mode::probe;
  /// Default: /dev/kvm.
  std::string kvm_device = "/dev/kvm";
  /// The probe guest's agent must say hello within this under KVM (a stock
  /// kernel boots to it in well under a second there). Default: 5000.
  uint32_t kvm_probe_timeout_ms = 5'000;
  /// The probe guest's RAM. Default: 128.
  uint32_t probe_memory_mb = 128;
};

struct accel_choice {
  accelerator accel = accelerator::tcg;
  bool probed = false;  ///< a probe guest was booted under KVM
  int64_t probe_ms = 0; ///< how long the probe took
  std::string reason;   ///< the one line that was logged
};

/// Chooses the accelerator and calls `log` once with a line saying which and
/// why. The probe VM's files live in `run_dir` and are gone on return.
accel_choice choose_accelerator(const guest_image& guest, const std::string& run_dir,
                                const accel_options& options, const vm_options& vmm,
                                const std::function<void(std::string_view)>& log);

} // namespace airlock::worker::microvm
