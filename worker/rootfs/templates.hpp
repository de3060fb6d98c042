#pragma once
// The starting templates and how they are built:
//   minimal  busybox (static) with its applet links, /etc basics and the guest
//            agent at /sbin/airlock-guest. Builds in well under a second; most
//            tests use it.
//   base     Debian 12 (debootstrap minbase from the host's own mirror) with
//            bash, coreutils, python3, git, curl, ca-certificates and sudo,
//            and E2B's unprivileged `user` account (base_user.hpp). Takes
//            about 40 s and 400 MB once, then is cached.
// A build populates the driver's staging tree, writes a manifest next to the
// template and seals it; a failed or cancelled build deletes the staging tree,
// so a half template never becomes visible.
//
// Blocking (minutes for `base`): run it on a helper thread, never in an actor.

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "schema/errc.hpp"
#include "worker/rootfs/base_user.hpp"
#include "worker/rootfs/rootfs_driver.hpp"

namespace airlock::worker {

/// Called with a phase ("busybox", "download", "configure", ...), an overall
/// percentage that never decreases, and the output line that caused it (may
/// be empty). Called on the building thread.
using progress_fn = std::function<void(std::string_view phase, int percent, std::string_view line)>;

struct template_options {
  /// A statically linked busybox (package busybox-static). Default: /bin/busybox.
  std::filesystem::path busybox = "/bin/busybox";
  /// The debootstrap program. Default: "debootstrap".
  std::string debootstrap = "debootstrap";
  /// Debian release of `base`. Default: "bookworm".
  std::string suite = "bookworm";
  /// Mirror for `base`. Default: empty (the first Debian `suite` main source
  /// in the host's apt configuration under apt_dir).
  std::string mirror;
  /// Where the host's apt sources are read from. Default: /etc/apt.
  std::filesystem::path apt_dir = "/etc/apt";
  /// Packages `base` adds to minbase: what an agent's first commands reach
  /// for (`python3 -m venv` needs python3-venv for ensurepip). A `base`
  /// built with another list is built again on its next use.
  /// Default: bash, coreutils, python3, python3-venv, python3-pip, git, curl,
  /// ca-certificates, sudo.
  std::vector<std::string> base_packages = {"bash",         "coreutils",       "python3",
                                            "python3-venv", "python3-pip",     "git",
                                            "curl",         "ca-certificates", "sudo"};
  /// The unprivileged account `base` has (E2B's `user`). A `base` built
  /// with another account (or none: an older airlock's) is built again on
  /// its next use. Default: user, uid and gid 1000, /bin/bash, passwordless
  /// sudo.
  user_account base_user;
  /// Bound on the whole debootstrap run. Default: 1800000 (30 min).
  uint32_t debootstrap_timeout_ms = 1'800'000;
  /// Bound on the quick reachability check of the mirror before debootstrap.
  /// Default: 5000.
  uint32_t mirror_probe_timeout_ms = 5'000;
};

/// Progress and cancellation of one build. Both optional.
struct build_control {
  /// Default: empty (no reports).
  progress_fn progress;
  /// When it becomes true the build stops (killing debootstrap) and fails with
  /// errc::cancelled. Default: nullptr.
  const std::atomic<bool>* cancel = nullptr;
};

/// What a sealed template is; stored as JSON in
/// `<templates_dir>/<name>.manifest.json`.
struct template_manifest {
  uint32_t format_version = 1;
  std::string name;
  int64_t created_unix_s = 0;
  uint64_t size_bytes = 0; ///< apparent size of its regular files
  uint64_t files = 0;      ///< entries of any type
  std::string source;      ///< e.g. "busybox /bin/busybox" or "debootstrap bookworm <mirror>"
  /// A shell line started (as root, in the background) each time a sandbox
  /// of this template starts: create, restore, fork and a restart's bring-
  /// back. Empty: none. An imported image's Entrypoint and Cmd give it.
  std::string start_cmd;
  /// A shell line a recipe's build ran until it succeeded (after start_cmd).
  /// A microVM base of this template runs it again after starting start_cmd,
  /// before its memory is saved. Empty: none.
  std::string ready_cmd;
  // An imported image's defaults (empty for the built-in templates).
  std::vector<std::string> env; ///< "KEY=VALUE"
  std::string workdir;
  std::string user;
  std::string digest; ///< "sha256:..." of what it was made from
};

/// Manifest as JSON text.
std::string manifest_to_json(const template_manifest& manifest);

/// Parses manifest JSON; corrupt_record when fields are missing or of the
/// wrong type, unsupported_version when written by a newer format.
result<template_manifest> parse_manifest(std::string_view json);

/// The manifest file of template `name` under a driver's templates_dir.
std::filesystem::path manifest_path(const std::filesystem::path& templates_dir,
                                    std::string_view name);

/// Turns debootstrap's "I: ..." lines into phases and an overall percentage.
/// debootstrap announces no package count up front, so the download phase
/// advances against `expected_packages` until the count is known; the later
/// phases advance against the number actually downloaded.
class debootstrap_progress {
public:
  explicit debootstrap_progress(uint32_t expected_packages = 150)
      : expected_packages_(expected_packages) {}

  struct report {
    std::string_view phase;
    int percent = 0;
  };

  /// Feeds one output line; returns the phase and percentage after it.
  report feed(std::string_view line);

private:
  void enter(std::string_view phase, int low);
  void advance(int low, int high, uint32_t done, uint32_t total);

  uint32_t expected_packages_;
  std::string_view phase_ = "start";
  int percent_ = 0;
  uint32_t retrieved_ = 0;
  uint32_t extracted_ = 0;
  uint32_t unpacked_ = 0;
  uint32_t configured_ = 0;
};

/// Fills `dir` with the minimal template's files.
status populate_minimal(const std::filesystem::path& dir, const template_options& options,
                        const build_control& control);

/// Fills `dir` with the base template's files (runs debootstrap).
status populate_base(const std::filesystem::path& dir, const template_options& options,
                     const build_control& control);

/// Whether `mirror` answers for `suite` within `timeout_ms` (wget --spider of
/// its InRelease file). unavailable with the reason otherwise.
status probe_mirror(std::string_view mirror, std::string_view suite, uint32_t timeout_ms);

/// Builds templates into a driver. Not thread-safe for the same template name.
class template_builder {
public:
  /// `driver` must outlive the builder.
  template_builder(rootfs_driver& driver, template_options options)
      : driver_(driver), options_(std::move(options)) {}

  /// The names this builder knows: "minimal" and "base".
  static bool is_known(std::string_view name) noexcept;

  /// Returns the manifest of the sealed template `name`, building it first
  /// when it is missing or its manifest is unreadable (a template without a
  /// valid manifest is treated as incomplete and rebuilt).
  result<template_manifest> ensure(std::string_view name, const build_control& control = {});

  /// Deletes template `name` if present and builds it again.
  result<template_manifest> rebuild(std::string_view name, const build_control& control = {});

  /// The manifest of a sealed template, if it has a valid one.
  result<template_manifest> manifest(std::string_view name) const;

private:
  result<template_manifest> build(std::string_view name, const build_control& control);

  rootfs_driver& driver_;
  template_options options_;
};

} // namespace airlock::worker
