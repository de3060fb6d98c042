#pragma once
// Shared pieces of the rootfs tests: a scratch directory that cleans up
// everything below it (mounts, loop devices, files) even when a test fails,
// and the exact reasons a test must be skipped on this host.

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "schema/unique_fd.hpp"

namespace airlock::worker::test {

/// A fresh directory under the system temp dir. The destructor unmounts every
/// mount below it, detaches every loop device whose backing file is below it
/// and deletes it.
class scratch_dir {
public:
  scratch_dir();
  ~scratch_dir();
  scratch_dir(const scratch_dir&) = delete;
  scratch_dir& operator=(const scratch_dir&) = delete;

  const std::filesystem::path& path() const noexcept { return path_; }

private:
  std::filesystem::path path_;
};

/// Detaches loop devices backed by files under `dir`; returns how many.
int detach_loops_below(const std::filesystem::path& dir);

/// Why the btrfs driver cannot be tested here (not root, no btrfs in the
/// kernel, no loop devices, no mkfs.btrfs), or nullopt.
std::optional<std::string> btrfs_unavailable_reason();

/// Why the overlay driver cannot be tested here, or nullopt.
std::optional<std::string> overlay_unavailable_reason();

/// Output of `chroot root argv...` with trailing newlines removed, or the
/// error text prefixed by "error: ".
std::string run_in_chroot(const std::filesystem::path& root, const std::vector<std::string>& argv);

/// Where slow-to-build test artefacts are kept between runs:
/// $AIRLOCK_TEST_CACHE, else /var/tmp/airlock-test-cache.
std::filesystem::path test_cache_dir();

/// The `base` template's cache (an overlay driver's data dir) inside
/// test_cache_dir().
std::filesystem::path base_template_cache_dir();

/// Holds the host-wide lock on the `base` template cache while it lives, so
/// that suites running at once do not build it twice into one directory.
class base_template_lock {
public:
  base_template_lock();

private:
  unique_fd fd_;
};

/// The `base` template for a test that needs it: found in the cache, or built
/// there (debootstrap, about a minute) when it is absent or stale.
struct base_template {
  std::filesystem::path root;             ///< the template's root directory
  std::optional<std::string> skip_reason; ///< this host cannot build it
  std::string error;                      ///< building failed
};
base_template ensure_base_template();

} // namespace airlock::worker::test
