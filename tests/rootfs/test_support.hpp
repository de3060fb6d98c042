#pragma once
// Shared pieces of the rootfs tests: a scratch directory that cleans up
// everything below it (mounts, loop devices, files) even when a test fails,
// and the exact reasons a test must be skipped on this host.

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

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

/// The built airlock-guest when it exists, else a dummy executable file
/// created in `dir` (the templates only copy it).
std::filesystem::path guest_binary_for_tests(const std::filesystem::path& dir);

/// Output of `chroot root argv...` with trailing newlines removed, or the
/// error text prefixed by "error: ".
std::string run_in_chroot(const std::filesystem::path& root, const std::vector<std::string>& argv);

} // namespace airlock::worker::test
