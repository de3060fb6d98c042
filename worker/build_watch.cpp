#include "worker/build_watch.hpp"

#include <algorithm>

#include "schema/atomic_file.hpp"
#include "worker/rootfs/fs_util.hpp"

namespace airlock::worker {

void build_watch::set_step(std::string step, int32_t percent, uint64_t bytes_done,
                           uint64_t bytes_total) {
  std::lock_guard guard(lock_);
  step_ = std::move(step);
  percent_ = std::clamp(percent, -1, 100);
  bytes_done_ = bytes_done;
  bytes_total_ = bytes_total;
}

void build_watch::append(std::string_view text) {
  std::lock_guard guard(lock_);
  log_.append(text);
  if (log_.size() > log_bytes_max) {
    const size_t drop = log_.size() - log_bytes_max;
    log_.erase(0, drop);
    log_start_ += drop;
  }
}

void build_watch::report_phase(std::string step, int32_t percent, std::string_view line) {
  set_step(std::move(step), percent);
  if (!line.empty())
    append(std::string(line) + "\n");
}

std::string build_watch::tail(size_t bytes) const {
  std::lock_guard guard(lock_);
  return log_.size() <= bytes ? log_ : log_.substr(log_.size() - bytes);
}

schema::template_progress build_watch::read(uint64_t offset) const {
  std::lock_guard guard(lock_);
  schema::template_progress out;
  out.building = true;
  out.step = step_;
  out.percent = percent_;
  out.bytes_done = bytes_done_;
  out.bytes_total = bytes_total_;
  out.log_end = log_start_ + log_.size();
  out.log_offset = std::clamp<uint64_t>(offset, log_start_, out.log_end);
  out.log = log_.substr(out.log_offset - log_start_, chunk_bytes_max);
  return out;
}

status build_watch::save_log(const std::filesystem::path& path) const {
  std::string copy;
  {
    std::lock_guard guard(lock_);
    copy = log_;
  }
  return write_file_atomically(path.string(), copy, 0644);
}

std::filesystem::path build_log_path(const std::filesystem::path& templates_dir,
                                     std::string_view name) {
  return templates_dir / (std::string(name) + ".build.log");
}

result<schema::template_progress> read_saved_log(const std::filesystem::path& path,
                                                 uint64_t offset) {
  auto text = read_file(path, build_watch::log_bytes_max);
  if (!text)
    return text.error();
  schema::template_progress out;
  out.building = false;
  out.step = "done";
  out.log_end = text->size();
  out.log_offset = std::min<uint64_t>(offset, out.log_end);
  out.log = text->substr(out.log_offset, build_watch::chunk_bytes_max);
  return out;
}

} // namespace airlock::worker
