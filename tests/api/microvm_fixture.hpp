#pragma once
// What the API suites that run microVMs share: why a VM cannot run here, the
// guest's cache, and the daemon's configuration (`serve --microvm on`, TCG),
// so that every suite of one executable shares one daemon.

#include <cstdlib>
#include <filesystem>
#include <string>

#include "tests/api/api_fixture.hpp"
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

inline std::string cache_dir() {
  const char* env = std::getenv("AIRLOCK_TEST_CACHE");
  return (std::filesystem::path(env != nullptr && *env != '\0' ? env
                                                               : "/var/tmp/airlock-test-cache")
          / "microvm")
    .string();
}

/// The API suites' instance (and lock), with the microvm runtime on. Under
/// TCG without the KVM probe (microvm_integration_tests covers the probe):
/// it would cost every run 5 s on a host whose KVM cannot boot the guest.
struct microvm_suite_config {
  static constexpr const char* lock_path = "/run/airlock-api-e2e.lock";
  static constexpr const char* what = "the microvm API tests run VMs";
  static serve_process::options options() {
    serve_process::options opts;
    opts.extra_args = {"--microvm",
                       "on",
                       "--microvm-cache",
                       cache_dir(),
                       "--microvm-guest-script",
                       std::string(AIRLOCK_SOURCE_DIR) + "/scripts/microvm-guest",
                       "--microvm-accel",
                       "tcg"};
    return opts;
  }
};

} // namespace airlock::test
