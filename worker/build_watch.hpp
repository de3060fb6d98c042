#pragma once
// Where one template build on this worker stands: the build (a helper thread
// or the node's own steps) sets its step and percentage and appends to its
// log; the control plane reads both through nd_twatch for the operation's
// progress events and the version's log, and may ask the build to stop.
// Thread-safe.

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <string>
#include <string_view>

#include "schema/cluster.hpp"
#include "schema/errc.hpp"

namespace airlock::worker {

class build_watch {
public:
  /// The log keeps its last this many bytes (offsets keep counting).
  static constexpr size_t log_bytes_max = 1 << 20;
  /// The most one read answers.
  static constexpr size_t chunk_bytes_max = 64 << 10;

  /// A new step; percent is of the whole build (-1: unknown).
  void set_step(std::string step, int32_t percent, uint64_t bytes_done = 0,
                uint64_t bytes_total = 0);

  void append(std::string_view text);

  /// A builder's phase report (rootfs progress_fn): the step, and the output
  /// line that caused it, if any, as a line of the log.
  void report_phase(std::string step, int32_t percent, std::string_view line);

  /// The last `bytes` of the log.
  std::string tail(size_t bytes) const;

  /// The progress and the log from `offset` (clamped to what is kept).
  schema::template_progress read(uint64_t offset) const;

  void cancel() noexcept { cancel_.store(true); }
  bool cancelled() const noexcept { return cancel_.load(); }
  /// For build_control, which polls it.
  const std::atomic<bool>* cancel_flag() const noexcept { return &cancel_; }

  /// Writes what the log keeps to `path` (atomically), for reads after the
  /// build ended.
  status save_log(const std::filesystem::path& path) const;

private:
  mutable std::mutex lock_;
  std::string step_;
  int32_t percent_ = -1;
  uint64_t bytes_done_ = 0;
  uint64_t bytes_total_ = 0;
  std::string log_;
  uint64_t log_start_ = 0; ///< offset of log_[0] in the whole log
  std::atomic<bool> cancel_{false};
};

/// Where an ended build's log is kept: beside its template's manifest.
std::filesystem::path build_log_path(const std::filesystem::path& templates_dir,
                                     std::string_view name);

/// An ended build's log from `offset`, as a progress that is not building.
/// Errors: not_found when no log was kept.
result<schema::template_progress> read_saved_log(const std::filesystem::path& path,
                                                 uint64_t offset);

} // namespace airlock::worker
