#pragma once
// What the end-to-end suites that start `airlockd serve` with the microvm
// runtime share (microvm_api_e2e_test, egress_e2e_test's microvm instances):
// whether this host can boot the guest, and the flags that start airlockd
// with it under TCG and the test cache's guest.

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "worker/command/command.hpp"

namespace airlock::test {

/// Why a VM cannot run here ("" when it can).
inline std::string microvm_missing() {
  for (const char* tool : {"qemu-system-x86_64", "mkfs.ext4", "busybox", "objcopy", "xz"})
    if (worker::find_program(tool, worker::default_command_path).empty())
      return std::string("needs ") + tool;
  if (!std::filesystem::exists("/usr/share/qemu/qboot.rom"))
    return "needs /usr/share/qemu/qboot.rom (qemu-system-data)";
  return "";
}

/// The guest's build cache, shared with microvm_integration_tests.
inline std::string microvm_cache_dir() {
  const char* env = std::getenv("AIRLOCK_TEST_CACHE");
  return (std::filesystem::path(env != nullptr && *env != '\0' ? env
                                                               : "/var/tmp/airlock-test-cache")
          / "microvm")
    .string();
}

/// `airlockd serve` flags for the microvm runtime: on (a start that cannot
/// run VMs fails), the test cache's guest from `source_dir`'s script, TCG
/// without the KVM probe (microvm_integration_tests covers the probe; it
/// would cost every run 5 s on a host whose KVM cannot boot the guest).
inline std::vector<std::string> microvm_serve_args(const std::string& source_dir) {
  return {"--microvm",
          "on",
          "--microvm-cache",
          microvm_cache_dir(),
          "--microvm-guest-script",
          source_dir + "/scripts/microvm-guest",
          "--microvm-accel",
          "tcg"};
}

} // namespace airlock::test
