// A restarted worker's side of the namespace runtime: what an earlier run
// left (state files of sandboxes, running or not) is re-attached when its init
// still runs and cleaned when it does not (docs/runtime.md, "Destroy and
// restart").

#include <poll.h>

#include "worker/runtime/namespace_runtime.hpp"
#include "worker/runtime/sys.hpp"

namespace airlock::worker {

result<adopt_report> namespace_runtime::adopt() {
  std::lock_guard lock(mutex_);
  auto loaded = load_records(options_.state_dir);
  if (!loaded)
    return loaded.error();
  adopt_report report;
  report.failures = std::move(loaded->failures);
  for (const auto& record : loaded->records) {
    if (sandboxes_.count(record.id) != 0)
      continue;
    if (auto handled = adopt_one(record, report); !handled)
      report.failures.push_back(with_context(record.id, handled));
  }
  return report;
}

status namespace_runtime::adopt_one(const sandbox_record& record, adopt_report& report) {
  if (record.cgroup_driver != cgroups_->name())
    return make_status(errc::wrong_state, "recorded with cgroup driver " + record.cgroup_driver
                                            + ", this worker uses "
                                            + std::string(cgroups_->name()));
  if (!slots_in_use_->claim(record.slot))
    return make_status(errc::conflict, "slot " + std::to_string(record.slot) + " claimed twice");
  sandbox box{record, unique_fd(), true};
  // A readable pidfd of the recorded init means it has exited (a zombie
  // keeps its start time): kept only to reap it.
  if (unique_fd fd = open_recorded_process(record.init_pid, record.init_start_time)) {
    pollfd exited{fd.get(), POLLIN, 0};
    box.pidfd = std::move(fd);
    if (::poll(&exited, 1, 0) == 0) {
      sandboxes_.emplace(record.id, std::move(box));
      report.adopted.push_back(record.id);
      return status::ok();
    }
  }
  auto cleaned = teardown(box);
  slots_in_use_->release(record.slot);
  if (!cleaned)
    return cleaned;
  report.cleaned.push_back(record.id);
  return status::ok();
}

} // namespace airlock::worker
