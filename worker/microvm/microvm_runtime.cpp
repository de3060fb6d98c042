#include "worker/microvm/microvm_runtime.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

namespace airlock::worker::microvm {
namespace fs = std::filesystem;
namespace {

bool valid_id(std::string_view id) {
  if (id.empty() || id.size() > 63)
    return false;
  for (char c : id)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
      return false;
  return true;
}

/// /proc/<pid>/stat after the command name (which may hold spaces).
std::string stat_fields(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(in, line);
  auto end = line.rfind(')');
  return end == std::string::npos ? std::string() : line.substr(end + 2);
}

/// Field `n` (1-based, as proc(5) numbers them) of /proc/<pid>/stat.
uint64_t stat_field(pid_t pid, int n) {
  std::istringstream fields(stat_fields(pid));
  std::string value;
  for (int i = 3; i <= n && fields >> value; ++i) {
  }
  return value.empty() ? 0 : std::strtoull(value.c_str(), nullptr, 10);
}

uint64_t resident_bytes(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string key;
  uint64_t kib = 0;
  while (in >> key) {
    if (key == "VmRSS:") {
      in >> kib;
      break;
    }
    in.ignore(4096, '\n');
  }
  return kib * 1024;
}

} // namespace

microvm_runtime::microvm_runtime(microvm_runtime_options options)
    : options_(std::move(options)), guest_(guest_image_in(options_.guest_dir)),
      slots_in_use_(options_.shared_slots ? options_.shared_slots
                                          : std::make_shared<slot_table>()) {
  if (options_.address_pool.empty()) {
    pool_error_ = make_status(errc::unavailable, "microvm: no address pool is configured");
  } else if (auto pool = parse_address_pool(options_.address_pool); pool) {
    pool_ = *pool;
  } else {
    pool_error_ = pool.error();
  }
  if (options_.accel == accelerator::tcg && options_.tsc_khz == 0)
    options_.tsc_khz = measure_tsc_khz();
  if (options_.use_cgroups) {
    auto driver = detect_cgroup_driver(options_.cgroups);
    if (driver)
      cgroups_ = std::move(*driver);
    else
      cgroups_error_ = driver.error();
  }
}

microvm_runtime::~microvm_runtime() {
  std::lock_guard lock(mutex_);
  for (auto& [id, s] : sandboxes_) {
    (void)s.machine->stop();
    remove_files(s);
    if (cgroups_)
      (void)cgroups_->remove(id, options_.cgroup_remove_timeout_ms);
    if (s.link)
      (void)release_link(*s.link);
  }
}

result<vm_link> microvm_runtime::plan_link(const std::string& id) {
  if (!pool_)
    return make_status(pool_error_.code, "microvm: network is unavailable: " + pool_error_.message);
  if (!firewall_ready_) {
    // The namespace runtime made the table already when it shares it; this
    // is idempotent and keeps the elements.
    if (auto made = ensure_firewall(options_.net); !made)
      return made;
    firewall_ready_ = true;
  }
  auto slot = slots_in_use_->take(pool_->blocks());
  if (!slot)
    return slot.error();
  auto addresses = pool_addresses(*pool_, *slot);
  if (!addresses) {
    slots_in_use_->release(*slot);
    return addresses.error();
  }
  vm_link link;
  link.netns_name = vm_netns_name(options_.net, id);
  link.host_interface = host_interface_name(options_.net.interface_prefix, id);
  link.addresses = *addresses;
  link.slot = *slot;
  return link;
}

status microvm_runtime::release_link(const vm_link& link) {
  auto removed = unwire_vm_network(options_.net, link);
  // While an address may still sit on a veth, its block stays taken.
  if (removed)
    slots_in_use_->release(link.slot);
  return removed;
}

result<sandbox_handle> microvm_runtime::create(const sandbox_launch_spec& spec) {
  std::lock_guard lock(mutex_);
  if (!valid_id(spec.id))
    return make_status(errc::invalid_argument, "microvm: bad sandbox id '" + spec.id + "'");
  if (sandboxes_.count(spec.id) != 0)
    return make_status(errc::already_exists, "microvm: sandbox " + spec.id + " exists");
  if (spec.channel_fd < 0)
    return make_status(errc::invalid_argument, "microvm: a channel descriptor is required");
  if (spec.limits.memory_mb == 0 || spec.limits.cpu_millis == 0)
    return make_status(errc::invalid_argument, "microvm: a zero limit");
  if (sandboxes_.size() >= options_.slots_max)
    return make_status(errc::resource_exhausted, "microvm: every slot is taken");
  if (guest_.kernel_path.empty() || guest_.initrd_path.empty())
    return make_status(errc::not_found, "microvm: no guest in '" + options_.guest_dir
                                          + "' (scripts/microvm-guest builds it)");
  if (options_.use_cgroups && !cgroups_)
    return make_status(errc::unavailable, "microvm: no cgroups: " + cgroups_error_.message);
  sandbox s;
  s.disk_path = options_.run_dir + "/" + spec.id + ".ext4";
  s.console_path = options_.run_dir + "/" + spec.id + ".console.log";
  unique_fd tap;
  if (spec.network.enabled) {
    auto link = plan_link(spec.id);
    if (!link)
      return link.error();
    s.link = std::move(*link);
    s.handle.slot = s.link->slot;
  }
  // Everything made from here on is undone by this on failure.
  auto fail = [this, &s, &spec](status why) {
    remove_files(s);
    if (cgroups_)
      (void)cgroups_->remove(spec.id, options_.cgroup_remove_timeout_ms);
    if (s.link)
      (void)release_link(*s.link);
    return why;
  };
  if (s.link) {
    // A namespace or veth of this id left by an earlier run (VMs are not
    // adopted yet) would make the wiring fail: removed first.
    if (vm_netns_exists(s.link->netns_name) || interface_exists(s.link->host_interface))
      if (auto stale = unwire_vm_network(options_.net, *s.link); !stale)
        return fail(stale);
    if (spec.prepare_root)
      if (auto prepared = spec.prepare_root(s.link->addresses.host); !prepared)
        return fail(prepared);
  }
  std::error_code ec;
  // An unknown id's disk is a leftover of an earlier run (VMs are not adopted yet).
  fs::remove(s.disk_path, ec);
  if (fs::is_directory(spec.rootfs_path, ec)) {
    auto made = template_disk(spec.rootfs_path, options_.run_dir, spec.id, options_.disk);
    if (!made)
      return fail(made.error());
  } else if (auto copied = sandbox_disk(spec.rootfs_path, s.disk_path, options_.disk);
             !copied.is_ok()) {
    return fail(copied);
  }
  if (s.link) {
    auto wired = wire_vm_network(options_.net, *s.link);
    if (!wired)
      return fail(wired.error());
    tap = std::move(*wired);
  }
  vm_spec vs;
  vs.id = spec.id;
  vs.guest = guest_;
  vs.disk_path = s.disk_path;
  vs.accel = options_.accel;
  vs.memory_mb = spec.limits.memory_mb;
  vs.vcpus = std::max<uint32_t>(1, (spec.limits.cpu_millis + 999) / 1000);
  vs.tsc_khz = options_.tsc_khz;
  vs.log_path = s.console_path;
  vs.channel_fd = spec.channel_fd;
  vs.tcg_tb_mb = options_.tcg_tb_mb;
  if (s.link) {
    const auto& a = s.link->addresses;
    vs.network = {a.sandbox + "/" + std::to_string(a.prefix_length), a.host,
                  vm_mac_address(spec.id), tap.get()};
  }
  std::function<status(pid_t)> join_cgroup;
  if (cgroups_) {
    cgroup_limits limits;
    limits.memory_bytes =
      (uint64_t{spec.limits.memory_mb} + options_.vmm_overhead_mb) * 1024 * 1024;
    limits.cpu_millis = spec.limits.cpu_millis;
    limits.cpu_request_millis = spec.limits.cpu_request_millis;
    limits.pids_max = options_.vmm_threads_max;
    if (auto made = cgroups_->create(spec.id, limits); !made.is_ok())
      return fail(made);
    join_cgroup = [this, id = spec.id](pid_t pid) { return cgroups_->attach(id, pid); };
  }
  auto machine = vm::start(vs, options_.run_dir, options_.vm, join_cgroup);
  // QEMU holds its own copy of the tap: the device lives as long as QEMU.
  tap.reset();
  if (!machine)
    return fail(machine.error());
  s.machine = std::move(*machine);
  s.handle.id = spec.id;
  s.handle.init_pid = s.machine->pid();
  s.handle.init_start_time = stat_field(s.handle.init_pid, 22);
  s.handle.pidfd = s.machine->pidfd();
  if (cgroups_)
    s.handle.cgroup_paths = cgroups_->paths(spec.id);
  if (s.link) {
    const vm_link& link = *s.link;
    s.handle.netns_path = vm_netns_path(link.netns_name);
    s.handle.host_interface = link.host_interface;
    s.handle.sandbox_interface = "eth0";
    s.handle.host_address = link.addresses.host;
    s.handle.sandbox_address = link.addresses.sandbox;
    s.handle.prefix_length = link.addresses.prefix_length;
  }
  auto handle = s.handle;
  sandboxes_.emplace(spec.id, std::move(s));
  return handle;
}

status microvm_runtime::pause(std::string_view id) {
  std::lock_guard lock(mutex_);
  auto it = sandboxes_.find(id);
  if (it == sandboxes_.end())
    return make_status(errc::not_found, "microvm: no sandbox " + std::string(id));
  auto stopped = it->second.machine->qmp().execute("stop", "", options_.qmp_timeout_ms);
  if (!stopped)
    return stopped.error();
  it->second.paused = true;
  return status::ok();
}

status microvm_runtime::resume(std::string_view id) {
  std::lock_guard lock(mutex_);
  auto it = sandboxes_.find(id);
  if (it == sandboxes_.end())
    return make_status(errc::not_found, "microvm: no sandbox " + std::string(id));
  auto continued = it->second.machine->qmp().execute("cont", "", options_.qmp_timeout_ms);
  if (!continued)
    return continued.error();
  it->second.paused = false;
  return status::ok();
}

void microvm_runtime::remove_files(const sandbox& s) {
  std::error_code ec;
  fs::remove(s.disk_path, ec);
  fs::remove(s.console_path, ec);
}

status microvm_runtime::destroy(std::string_view id) {
  std::lock_guard lock(mutex_);
  auto it = sandboxes_.find(id);
  if (it == sandboxes_.end())
    return status::ok();
  auto stopped = it->second.machine->stop();
  remove_files(it->second);
  if (cgroups_) {
    if (auto removed = cgroups_->remove(id, options_.cgroup_remove_timeout_ms);
        !removed.is_ok() && stopped.is_ok())
      stopped = removed;
  }
  if (it->second.link) {
    // QEMU is gone, and the tap with it: the veth, namespace and entries go
    // now. A failure keeps the sandbox, so that a retry removes them.
    if (auto removed = release_link(*it->second.link); !removed)
      return removed;
  }
  sandboxes_.erase(it);
  return stopped;
}

status microvm_runtime::set_limits(std::string_view, uint32_t, uint32_t) {
  return make_status(errc::unimplemented, "microvm: limits are fixed at boot");
}

std::vector<sandbox_handle> microvm_runtime::list() const {
  std::lock_guard lock(mutex_);
  std::vector<sandbox_handle> out;
  for (const auto& [id, s] : sandboxes_)
    out.push_back(s.handle);
  return out;
}

result<adopt_report> microvm_runtime::adopt() { return adopt_report{}; }

result<sandbox_stats> microvm_runtime::stats_of(const sandbox& s) {
  sandbox_stats out;
  if (cgroups_) {
    auto usage = cgroups_->usage(s.handle.id);
    if (!usage)
      return usage.error();
    out.memory_bytes = usage->memory_bytes;
    out.pids_current = usage->pids_current;
    out.cpu_usage_ns = usage->cpu_usage_ns;
    out.oom_kills = usage->oom_kills;
    out.frozen = s.paused;
    return out;
  }
  const pid_t pid = s.machine->pid();
  out.memory_bytes = resident_bytes(pid);
  const uint64_t ticks = stat_field(pid, 14) + stat_field(pid, 15); // utime + stime
  const long hz = ::sysconf(_SC_CLK_TCK);
  out.cpu_usage_ns = hz > 0 ? ticks * (1'000'000'000 / static_cast<uint64_t>(hz)) : 0;
  out.frozen = s.paused;
  return out;
}

result<sandbox_stats> microvm_runtime::stats(std::string_view id) {
  std::lock_guard lock(mutex_);
  auto it = sandboxes_.find(id);
  if (it == sandboxes_.end())
    return make_status(errc::not_found, "microvm: no sandbox " + std::string(id));
  return stats_of(it->second);
}

result<sandbox_stats> microvm_runtime::stats_all() {
  std::lock_guard lock(mutex_);
  sandbox_stats total;
  for (const auto& [id, s] : sandboxes_) {
    auto one = stats_of(s);
    if (!one)
      continue;
    total.memory_bytes += one->memory_bytes;
    total.cpu_usage_ns += one->cpu_usage_ns;
  }
  return total;
}

} // namespace airlock::worker::microvm
