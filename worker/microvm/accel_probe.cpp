#include "worker/microvm/accel_probe.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "guest/client.hpp"
#include "schema/unique_fd.hpp"

namespace airlock::worker::microvm {
namespace {

int64_t elapsed_ms(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now()
                                                               - since)
    .count();
}

/// Boots the probe guest under KVM; ok when its agent said hello in time.
status probe_kvm(const guest_image& guest, const std::string& run_dir, const accel_options& options,
                 const vm_options& vmm) {
  vm_spec spec;
  spec.id = "kvm-probe-" + std::to_string(::getpid());
  spec.guest = guest;
  spec.accel = accelerator::kvm;
  spec.memory_mb = options.probe_memory_mb;
  auto machine = vm::start(spec, run_dir, vmm);
  if (!machine)
    return machine.error();
  guest::guest_client client((*machine)->take_channel());
  auto hello = client.handshake(static_cast<int>(options.kvm_probe_timeout_ms));
  (void)(*machine)->stop();
  if (!hello)
    return make_status(errc::timeout, "the probe guest's agent did not answer within "
                                        + std::to_string(options.kvm_probe_timeout_ms) + " ms");
  return status::ok();
}

} // namespace

accel_choice choose_accelerator(const guest_image& guest, const std::string& run_dir,
                                const accel_options& options, const vm_options& vmm,
                                const std::function<void(std::string_view)>& log) {
  accel_choice choice;
  const auto start = std::chrono::steady_clock::now();
  if (options.mode == accel_mode::tcg) {
    choice.reason = "microvm: using TCG (software emulation), as configured";
  } else if (options.mode == accel_mode::kvm) {
    choice.accel = accelerator::kvm;
    choice.reason = "microvm: using KVM, as configured (not probed)";
  } else if (unique_fd kvm(::open(options.kvm_device.c_str(), O_RDWR | O_CLOEXEC)); !kvm) {
    choice.reason = "microvm: " + options.kvm_device + " is not usable (" + std::strerror(errno)
                    + "); using TCG (software emulation)";
  } else {
    choice.probed = true;
    auto probed = probe_kvm(guest, run_dir, options, vmm);
    choice.probe_ms = elapsed_ms(start);
    if (probed.is_ok()) {
      choice.accel = accelerator::kvm;
      choice.reason = "microvm: KVM booted the probe guest in " + std::to_string(choice.probe_ms)
                      + " ms; using KVM";
    } else {
      choice.reason = "microvm: KVM cannot boot a guest here (" + probed.message
                      + "); using TCG (software emulation)";
    }
  }
  if (log)
    log(choice.reason);
  return choice;
}

} // namespace airlock::worker::microvm
