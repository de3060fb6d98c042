// cgroup v1: one hierarchy per controller (memory, cpu, pids, freezer, and
// cpuacct for usage). The sandbox gets <mount>/<parent>/<id> in each.

#include <algorithm>
#include <set>

#include "worker/runtime/cgroup_common.hpp"
#include "worker/runtime/cgroup_driver.hpp"
#include "worker/runtime/sys.hpp"

namespace airlock::worker {
namespace {

using namespace cgroup_detail;

class cgroup_v1_driver final : public cgroup_driver {
public:
  cgroup_v1_driver(std::map<std::string, std::string> roots, std::string parent)
      : roots_(std::move(roots)), parent_(std::move(parent)) {}

  std::string_view name() const override { return "v1"; }

  status create(std::string_view id, const cgroup_limits& limits) override {
    for (const auto& root : unique_roots()) {
      if (auto made = make_dir(root + "/" + parent_); !made)
        return made;
      if (auto made = make_dir(root + "/" + parent_ + "/" + std::string(id)); !made)
        return made;
    }
    if (auto written = write_memory(id, limits.memory_bytes); !written)
      return written;
    if (limits.cpu_request_millis != 0)
      if (auto written = write(id, "cpu", "cpu.shares",
                               std::to_string(cpu_shares_for(limits.cpu_request_millis)));
          !written)
        return written;
    if (limits.cpu_millis != 0) {
      uint64_t quota = cpu_quota_us(limits.cpu_millis, limits.cpu_period_us);
      if (auto written =
            write(id, "cpu", "cpu.cfs_period_us", std::to_string(limits.cpu_period_us));
          !written)
        return written;
      if (auto written = write(id, "cpu", "cpu.cfs_quota_us", std::to_string(quota)); !written)
        return written;
    }
    if (limits.pids_max != 0)
      return write(id, "pids", "pids.max", std::to_string(limits.pids_max));
    return status::ok();
  }

  status limit_all(uint64_t memory_bytes) override {
    auto root = roots_.find("memory");
    if (root == roots_.end())
      return make_status(errc::unavailable, "no v1 memory hierarchy is mounted");
    std::string base = root->second + "/" + parent_;
    if (auto made = make_dir(base); !made)
      return made;
    std::string value = memory_bytes == 0 ? "-1" : std::to_string(memory_bytes);
    return write_control_file(base + "/memory.limit_in_bytes", value);
  }

  result<cgroup_usage> usage_all() override { return usage(""); }

  status attach(std::string_view id, pid_t pid) override {
    for (const auto& root : unique_roots())
      if (auto written = write_control_file(dir(root, id) + "/cgroup.procs", std::to_string(pid));
          !written)
        return written;
    return status::ok();
  }

  status freeze(std::string_view id, uint32_t timeout_ms) override {
    return set_freezer(id, "FROZEN", timeout_ms);
  }

  status thaw(std::string_view id, uint32_t timeout_ms) override {
    return set_freezer(id, "THAWED", timeout_ms);
  }

  status kill_all(std::string_view id) override {
    return kill_members(dir(roots_.at("freezer"), id) + "/cgroup.procs");
  }

  status remove(std::string_view id, uint32_t timeout_ms) override {
    std::string procs = dir(roots_.at("freezer"), id) + "/cgroup.procs";
    auto empty =
      wait_until("cgroup " + std::string(id) + " emptying", timeout_ms, [&procs]() -> result<bool> {
        auto pids = read_pids(procs);
        if (!pids && pids.code() == errc::not_found)
          return true;
        if (!pids)
          return pids.error();
        return pids->empty();
      });
    if (!empty)
      return empty;
    for (const auto& root : unique_roots())
      if (auto removed = remove_dir(dir(root, id), timeout_ms); !removed)
        return removed;
    return status::ok();
  }

  result<cgroup_usage> usage(std::string_view id) override {
    cgroup_usage out;
    auto memory = read_number(dir(roots_.at("memory"), id) + "/memory.usage_in_bytes");
    if (!memory)
      return memory.error();
    out.memory_bytes = *memory;
    auto pids = read_number(dir(roots_.at("pids"), id) + "/pids.current");
    if (!pids)
      return pids.error();
    out.pids_current = *pids;
    if (roots_.count("cpuacct") != 0) {
      auto cpu = read_number(dir(roots_.at("cpuacct"), id) + "/cpuacct.usage");
      if (cpu)
        out.cpu_usage_ns = *cpu;
    }
    auto ooms = read_keyed(dir(roots_.at("memory"), id) + "/memory.oom_control", "oom_kill");
    out.oom_kills = ooms ? *ooms : 0;
    auto state = read_file(dir(roots_.at("freezer"), id) + "/freezer.state");
    out.frozen = state && state->rfind("FROZEN", 0) == 0;
    return out;
  }

  std::vector<std::string> paths(std::string_view id) const override {
    std::vector<std::string> out;
    for (const auto& root : unique_roots())
      out.push_back(dir(root, id));
    return out;
  }

private:
  std::string dir(const std::string& root, std::string_view id) const {
    return root + "/" + parent_ + "/" + std::string(id);
  }

  /// Co-mounted controllers (cpu,cpuacct) share one directory.
  std::vector<std::string> unique_roots() const {
    std::set<std::string> seen;
    std::vector<std::string> out;
    for (const auto& [controller, root] : roots_)
      if (seen.insert(root).second)
        out.push_back(root);
    return out;
  }

  status write(std::string_view id, const char* controller, const char* file,
               const std::string& value) {
    return write_control_file(dir(roots_.at(controller), id) + "/" + file, value);
  }

  /// memsw (memory+swap) must stay >= the memory limit at every step; lift it
  /// first so that lowering or raising either order works on a reused cgroup.
  status write_memory(std::string_view id, uint64_t bytes) {
    if (bytes == 0)
      return status::ok();
    std::string base = dir(roots_.at("memory"), id);
    bool has_memsw = read_file(base + "/memory.memsw.limit_in_bytes").has_value();
    if (has_memsw)
      if (auto lifted = write_control_file(base + "/memory.memsw.limit_in_bytes", "-1"); !lifted)
        return lifted;
    if (auto written = write_control_file(base + "/memory.limit_in_bytes", std::to_string(bytes));
        !written)
      return written;
    if (has_memsw)
      return write_control_file(base + "/memory.memsw.limit_in_bytes", std::to_string(bytes));
    return status::ok();
  }

  status set_freezer(std::string_view id, const char* state, uint32_t timeout_ms) {
    std::string file = dir(roots_.at("freezer"), id) + "/freezer.state";
    if (auto written = write_control_file(file, state); !written)
      return written;
    std::string want(state);
    return wait_until("freezer " + want, timeout_ms, [&file, &want, state]() -> result<bool> {
      auto now = read_file(file);
      if (!now)
        return now.error();
      if (now->rfind(want, 0) == 0)
        return true;
      // A FREEZING cgroup may need the request repeated once its tasks
      // have left the kernel paths that held them.
      (void)write_control_file(file, state);
      return false;
    });
  }

  std::map<std::string, std::string> roots_;
  std::string parent_;
};

} // namespace

result<std::unique_ptr<cgroup_driver>> make_cgroup_v1_driver(const cgroup_mounts& mounts,
                                                             std::string parent) {
  std::map<std::string, std::string> roots;
  for (const char* controller : {"memory", "cpu", "pids", "freezer"}) {
    auto found = mounts.v1_paths.find(controller);
    if (found == mounts.v1_paths.end())
      return make_status(errc::unavailable,
                         std::string("cgroup v1 controller '") + controller
                           + "' is not mounted and no usable cgroup2 hierarchy was found: mount "
                             "it under /sys/fs/cgroup or boot with a unified hierarchy");
    roots.emplace(controller, found->second);
  }
  if (auto cpuacct = mounts.v1_paths.find("cpuacct"); cpuacct != mounts.v1_paths.end())
    roots.emplace("cpuacct", cpuacct->second);
  return std::unique_ptr<cgroup_driver>(
    std::make_unique<cgroup_v1_driver>(std::move(roots), std::move(parent)));
}

} // namespace airlock::worker
