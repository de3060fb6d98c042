// cgroup v2: one unified hierarchy. The sandbox gets <root>/<parent>/<id>;
// the controllers its limits need are enabled in the subtree_control of
// <root> and <root>/<parent> (which hold no processes of their own).

#include <vector>

#include "worker/runtime/cgroup_common.hpp"
#include "worker/runtime/cgroup_driver.hpp"
#include "worker/runtime/sys.hpp"

namespace airlock::worker {
namespace {

using namespace cgroup_detail;

class cgroup_v2_driver final : public cgroup_driver {
public:
  cgroup_v2_driver(std::string root, std::string parent)
      : root_(std::move(root)), parent_(std::move(parent)) {}

  std::string_view name() const override { return "v2"; }

  status create(std::string_view id, const cgroup_limits& limits) override {
    if (auto made = make_dir(root_ + "/" + parent_); !made)
      return made;
    if (auto enabled = enable_controllers(limits); !enabled)
      return enabled;
    std::string base = dir(id);
    if (auto made = make_dir(base); !made)
      return made;
    if (limits.memory_bytes != 0) {
      if (auto written =
            write_control_file(base + "/memory.max", std::to_string(limits.memory_bytes));
          !written)
        return written;
      if (read_file(base + "/memory.swap.max"))
        if (auto written = write_control_file(base + "/memory.swap.max", "0"); !written)
          return written;
    }
    if (limits.cpu_request_millis != 0)
      if (auto written = write_control_file(
            base + "/cpu.weight", std::to_string(cpu_weight_for(limits.cpu_request_millis)));
          !written)
        return written;
    if (limits.cpu_millis != 0) {
      uint64_t quota = cpu_quota_us(limits.cpu_millis, limits.cpu_period_us);
      if (auto written = write_control_file(
            base + "/cpu.max", std::to_string(quota) + " " + std::to_string(limits.cpu_period_us));
          !written)
        return written;
    }
    if (limits.pids_max != 0)
      return write_control_file(base + "/pids.max", std::to_string(limits.pids_max));
    return status::ok();
  }

  status limit_all(uint64_t memory_bytes) override {
    std::string base = root_ + "/" + parent_;
    if (auto made = make_dir(base); !made)
      return made;
    cgroup_limits memory_only;
    memory_only.memory_bytes = 1;
    if (auto enabled = enable_controllers(memory_only); !enabled)
      return enabled;
    std::string value = memory_bytes == 0 ? "max" : std::to_string(memory_bytes);
    return write_control_file(base + "/memory.max", value);
  }

  result<cgroup_usage> usage_all() override { return usage(""); }

  status attach(std::string_view id, pid_t pid) override {
    return write_control_file(dir(id) + "/cgroup.procs", std::to_string(pid));
  }

  status freeze(std::string_view id, uint32_t timeout_ms) override {
    return set_frozen(id, true, timeout_ms);
  }

  status thaw(std::string_view id, uint32_t timeout_ms) override {
    return set_frozen(id, false, timeout_ms);
  }

  status kill_all(std::string_view id) override {
    // cgroup.kill (5.14+) kills atomically, frozen or not.
    auto killed = write_control_file(dir(id) + "/cgroup.kill", "1");
    if (killed || killed.code != errc::not_found)
      return killed;
    return kill_members(dir(id) + "/cgroup.procs");
  }

  status remove(std::string_view id, uint32_t timeout_ms) override {
    std::string events = dir(id) + "/cgroup.events";
    auto empty = wait_until("cgroup " + std::string(id) + " emptying", timeout_ms,
                            [&events]() -> result<bool> {
                              auto populated = read_keyed(events, "populated");
                              if (!populated && populated.code() == errc::not_found)
                                return true;
                              if (!populated)
                                return populated.error();
                              return *populated == 0;
                            });
    if (!empty)
      return empty;
    return remove_dir(dir(id), timeout_ms);
  }

  result<cgroup_usage> usage(std::string_view id) override {
    std::string base = dir(id);
    cgroup_usage out;
    auto populated = read_keyed(base + "/cgroup.events", "populated");
    if (!populated)
      return populated.error();
    if (auto memory = read_number(base + "/memory.current"))
      out.memory_bytes = *memory;
    if (auto pids = read_number(base + "/pids.current"))
      out.pids_current = *pids;
    if (auto cpu = read_keyed(base + "/cpu.stat", "usage_usec"))
      out.cpu_usage_ns = *cpu * 1000;
    if (auto ooms = read_keyed(base + "/memory.events", "oom_kill"))
      out.oom_kills = *ooms;
    auto frozen = read_keyed(base + "/cgroup.events", "frozen");
    out.frozen = frozen && *frozen == 1;
    return out;
  }

  std::vector<std::string> paths(std::string_view id) const override { return {dir(id)}; }

private:
  std::string dir(std::string_view id) const {
    return root_ + "/" + parent_ + "/" + std::string(id);
  }

  status enable_controllers(const cgroup_limits& limits) {
    std::vector<std::string> needed;
    if (limits.memory_bytes != 0)
      needed.emplace_back("memory");
    if (limits.cpu_millis != 0)
      needed.emplace_back("cpu");
    if (limits.pids_max != 0)
      needed.emplace_back("pids");
    auto available = read_file(root_ + "/cgroup.controllers");
    if (!available)
      return available.error();
    for (const auto& controller : needed) {
      if (available->find(controller) == std::string::npos)
        return make_status(errc::unavailable,
                           "cgroup2 at " + root_ + " lacks the '" + controller
                             + "' controller (is it bound to a v1 hierarchy?): use the v1 driver");
      for (const auto& at : {root_, root_ + "/" + parent_})
        if (auto written = write_control_file(at + "/cgroup.subtree_control", "+" + controller);
            !written)
          return written;
    }
    return status::ok();
  }

  status set_frozen(std::string_view id, bool frozen, uint32_t timeout_ms) {
    std::string base = dir(id);
    if (auto written = write_control_file(base + "/cgroup.freeze", frozen ? "1" : "0"); !written)
      return written;
    std::string events = base + "/cgroup.events";
    return wait_until(frozen ? "cgroup freeze" : "cgroup thaw", timeout_ms,
                      [&events, frozen]() -> result<bool> {
                        auto now = read_keyed(events, "frozen");
                        if (!now)
                          return now.error();
                        return (*now == 1) == frozen;
                      });
  }

  std::string root_;
  std::string parent_;
};

} // namespace

std::unique_ptr<cgroup_driver> make_cgroup_v2_driver(std::string root, std::string parent) {
  return std::make_unique<cgroup_v2_driver>(std::move(root), std::move(parent));
}

} // namespace airlock::worker
