#include "worker/microvm/microvm_runtime.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <system_error>

#include "schema/sandbox.hpp"
#include "worker/runtime/sys.hpp"

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

/// `<run_dir>/<name>.vm.json` (name: the VM's cgroup and file name, its
/// sandbox's id or a pooled VM's): what a later run needs to remove a VM
/// that this one left running. It cannot take the VM over: the guest
/// channel's host end died with this process.
std::string vm_record_path(const std::string& run_dir, const std::string& name) {
  return run_dir + "/" + name + ".vm.json";
}

} // namespace

uint64_t microvm_runtime::start_time_of(pid_t pid) {
  auto started = process_start_time(pid);
  return started ? *started : 0;
}

status microvm_runtime::record_vm(const sandbox& s, const std::string& sandbox_id) const {
  nlohmann::json record = {{"name", s.cgroup_name},
                           {"sandbox_id", sandbox_id},
                           {"pid", s.machine->pid()},
                           {"start_time", start_time_of(s.machine->pid())}};
  if (s.link)
    record["link"] = {{"netns", s.link->netns_name},
                      {"host_interface", s.link->host_interface},
                      {"host", s.link->addresses.host},
                      {"sandbox", s.link->addresses.sandbox},
                      {"prefix_length", s.link->addresses.prefix_length},
                      {"slot", s.link->slot}};
  const std::string path = vm_record_path(options_.run_dir, s.cgroup_name);
  const std::string partial = path + ".partial";
  {
    std::ofstream out(partial, std::ios::trunc);
    out << record.dump();
    out.flush();
    if (!out)
      return make_status(errc::io_error, "microvm: write " + partial);
  }
  std::error_code ec;
  fs::rename(partial, path, ec);
  if (ec)
    return make_status(errc::io_error, "microvm: rename " + partial + ": " + ec.message());
  return status::ok();
}

microvm_runtime::microvm_runtime(microvm_runtime_options options)
    : options_(std::move(options)), guest_(guest_image_in(options_.guest_dir)),
      slots_in_use_(options_.shared_slots ? options_.shared_slots
                                          : std::make_shared<slot_table>()) {
  if (options_.address_pool.empty()) {
    address_pool_error_ = make_status(errc::unavailable, "microvm: no address pool is configured");
  } else if (auto pool = parse_address_pool(options_.address_pool); pool) {
    address_pool_ = *pool;
  } else {
    address_pool_error_ = pool.error();
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
  for (auto& [id, s] : sandboxes_)
    (void)tear_down(s);
  for (auto& s : pool_)
    (void)tear_down(s);
}

status microvm_runtime::tear_down(sandbox& s) {
  auto outcome = s.machine ? s.machine->stop() : status::ok();
  remove_files(s);
  if (cgroups_) {
    if (auto removed = cgroups_->remove(s.cgroup_name, options_.cgroup_remove_timeout_ms);
        !removed.is_ok() && outcome.is_ok())
      outcome = removed;
  }
  if (s.link) {
    // QEMU is gone, and the tap with it: the veth, namespace and entries go
    // now. A failure keeps the link, so that a retry removes them.
    if (auto removed = release_link(*s.link); !removed)
      return removed;
    s.link.reset();
  }
  return outcome;
}

result<vm_link> microvm_runtime::plan_link(const std::string& id) {
  if (!address_pool_)
    return make_status(address_pool_error_.code,
                       "microvm: network is unavailable: " + address_pool_error_.message);
  if (!firewall_ready_) {
    // The namespace runtime made the table already when it shares it; this
    // is idempotent and keeps the elements.
    if (auto made = ensure_firewall(options_.net); !made)
      return made;
    firewall_ready_ = true;
  }
  auto slot = slots_in_use_->take(address_pool_->blocks());
  if (!slot)
    return slot.error();
  auto addresses = pool_addresses(*address_pool_, *slot);
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

status microvm_runtime::admit(const sandbox_launch_spec& spec) const {
  if (!valid_id(spec.id))
    return make_status(errc::invalid_argument, "microvm: bad sandbox id '" + spec.id + "'");
  if (sandboxes_.count(spec.id) != 0)
    return make_status(errc::already_exists, "microvm: sandbox " + spec.id + " exists");
  if (spec.channel_fd < 0)
    return make_status(errc::invalid_argument, "microvm: a channel descriptor is required");
  if (spec.limits.memory_mb == 0 || spec.limits.cpu_millis == 0)
    return make_status(errc::invalid_argument, "microvm: a zero limit");
  if (sandboxes_.size() + pool_.size() >= options_.slots_max)
    return make_status(errc::resource_exhausted, "microvm: every slot is taken");
  if (guest_.kernel_path.empty() || guest_.initrd_path.empty())
    return make_status(errc::not_found, "microvm: no guest in '" + options_.guest_dir
                                          + "' (scripts/microvm-guest builds it)");
  if (options_.use_cgroups && !cgroups_)
    return make_status(errc::unavailable, "microvm: no cgroups: " + cgroups_error_.message);
  return status::ok();
}

vm_spec microvm_runtime::base_vm_spec(const sandbox_launch_spec& spec, const sandbox& s) const {
  vm_spec vs;
  vs.id = spec.id;
  vs.guest = guest_;
  vs.disk_path = s.disk_path;
  vs.accel = options_.accel;
  vs.memory_mb = s.memory_mb;
  vs.vcpus = s.vcpus;
  vs.tsc_khz = options_.tsc_khz;
  vs.log_path = s.console_path;
  vs.channel_fd = spec.channel_fd;
  vs.tcg_tb_mb = options_.tcg_tb_mb;
  vs.memory_path = s.memory_path;
  vs.memory_shared = !s.clone;
  return vs;
}

result<sandbox_handle> microvm_runtime::create(const sandbox_launch_spec& spec) {
  std::lock_guard lock(mutex_);
  if (auto admitted = admit(spec); !admitted.is_ok())
    return admitted;
  sandbox s = new_sandbox(spec.id, spec.limits.memory_mb,
                          ::airlock::schema::whole_cpus(spec.limits.cpu_millis));
  s.memory_path = options_.run_dir + "/" + spec.id + ".ram";
  if (auto planned = claim_link(spec, s); !planned.is_ok())
    return planned;
  // Everything made from here on is undone by this on failure.
  auto fail = [this, &s](status why) { return discard(s, std::move(why)); };
  if (s.link && spec.prepare_root)
    if (auto prepared = spec.prepare_root(s.link->addresses.host); !prepared)
      return fail(prepared);
  std::error_code ec;
  // An unknown id's files are leftovers of an earlier run (VMs are not adopted yet).
  fs::remove(s.disk_path, ec);
  fs::remove(s.memory_path, ec);
  if (fs::is_directory(spec.rootfs_path, ec)) {
    auto made = template_disk(spec.rootfs_path, options_.run_dir, spec.id, options_.disk);
    if (!made)
      return fail(made.error());
  } else if (auto copied = sandbox_disk(spec.rootfs_path, s.disk_path, options_.disk);
             !copied.is_ok()) {
    return fail(copied);
  }
  auto vs = base_vm_spec(spec, s);
  return start_wired(spec, std::move(s), vs, "");
}

microvm_runtime::sandbox microvm_runtime::new_sandbox(const std::string& name, uint32_t memory_mb,
                                                      uint32_t vcpus) const {
  sandbox s;
  s.disk_path = options_.run_dir + "/" + name + ".ext4";
  s.console_path = options_.run_dir + "/" + name + ".console.log";
  s.memory_mb = memory_mb;
  s.vcpus = vcpus;
  return s;
}

status microvm_runtime::discard(sandbox& s, status why) {
  remove_files(s);
  if (s.link)
    (void)release_link(*s.link);
  return why;
}

result<sandbox_handle> microvm_runtime::start_wired(const sandbox_launch_spec& spec, sandbox s,
                                                    vm_spec vs, const std::string& state_path) {
  auto tap = wire_link(spec, s, vs);
  if (!tap)
    return discard(s, tap.error());
  // start_vm takes the sandbox; its link is released here if it fails.
  const auto link = s.link;
  auto started = start_vm(spec, std::move(s), vs, state_path);
  // QEMU holds its own copy of the tap: the device lives as long as QEMU.
  tap->reset();
  if (!started && link)
    (void)release_link(*link);
  return started;
}

status microvm_runtime::claim_link(const sandbox_launch_spec& spec, sandbox& s) {
  if (!spec.network.enabled)
    return status::ok();
  auto link = plan_link(spec.id);
  if (!link)
    return link.error();
  s.link = std::move(*link);
  s.handle.slot = s.link->slot;
  // A namespace or veth of this id left by an earlier run would make the
  // wiring fail: removed first.
  if (vm_netns_exists(s.link->netns_name) || interface_exists(s.link->host_interface)) {
    if (auto stale = unwire_vm_network(options_.net, *s.link); !stale) {
      (void)release_link(*s.link);
      s.link.reset();
      return stale;
    }
  }
  return status::ok();
}

result<unique_fd> microvm_runtime::wire_link(const sandbox_launch_spec& spec, const sandbox& s,
                                             vm_spec& vs) {
  if (!s.link)
    return unique_fd();
  auto tap = wire_vm_network(options_.net, *s.link);
  if (!tap)
    return tap.error();
  const auto& a = s.link->addresses;
  vs.network = {a.sandbox + "/" + std::to_string(a.prefix_length), a.host, vm_mac_address(spec.id),
                tap->get()};
  return tap;
}

result<sandbox_handle> microvm_runtime::start_vm(const sandbox_launch_spec& spec, sandbox s,
                                                 const vm_spec& vs, const std::string& state_path,
                                                 bool pooled) {
  if (s.cgroup_name.empty())
    s.cgroup_name = spec.id;
  const std::string cgroup = s.cgroup_name;
  std::function<status(pid_t)> join_cgroup;
  if (cgroups_) {
    cgroup_limits limits;
    limits.memory_bytes = (uint64_t{s.memory_mb} + options_.vmm_overhead_mb) * 1024 * 1024;
    limits.cpu_millis = spec.limits.cpu_millis;
    limits.cpu_request_millis = spec.limits.cpu_request_millis;
    limits.pids_max = options_.vmm_threads_max;
    if (auto made = cgroups_->create(cgroup, limits); !made.is_ok()) {
      remove_files(s);
      return made;
    }
    join_cgroup = [this, cgroup](pid_t pid) { return cgroups_->attach(cgroup, pid); };
  }
  auto fail = [&](status why) -> status {
    if (s.machine)
      (void)s.machine->stop();
    remove_files(s);
    if (cgroups_)
      (void)cgroups_->remove(cgroup, options_.cgroup_remove_timeout_ms);
    return why;
  };
  auto machine = vm::start(vs, options_.run_dir, options_.vm, join_cgroup);
  if (!machine)
    return fail(machine.error());
  s.machine = std::move(*machine);
  if (auto recorded = record_vm(s, pooled ? "" : spec.id); !recorded.is_ok())
    return fail(recorded);
  if (qemu_version_.empty() || !state_path.empty()) {
    auto version = s.machine->qmp().execute("query-version", "", options_.qmp_timeout_ms);
    if (!version)
      return fail(version.error());
    auto parsed = nlohmann::json::parse(*version, nullptr, false);
    if (parsed.is_object() && parsed.contains("qemu")) {
      const auto& q = parsed["qemu"];
      qemu_version_ = std::to_string(q.value("major", 0)) + "."
                      + std::to_string(q.value("minor", 0)) + "."
                      + std::to_string(q.value("micro", 0));
      if (auto package = parsed.value("package", std::string()); !package.empty())
        qemu_version_ += " (" + package + ")";
    }
  }
  if (!state_path.empty()) {
    // The record was checked against everything but QEMU's version before
    // QEMU started; a migration stream from another QEMU version may not load.
    auto saved = read_vm_snapshot_record(fs::path(state_path).parent_path().string());
    if (!saved)
      return fail(saved.error());
    if (auto same = check_restorable(*saved, host_record(saved->memory_mb, saved->vcpus));
        !same.is_ok())
      return fail(same);
    if (pooled) {
      pool_.push_back(std::move(s));
      return sandbox_handle{};
    }
    if (auto loaded = s.machine->load_state(state_path, options_.migration_timeout_ms,
                                            !saved->memory_file.empty());
        !loaded.is_ok())
      return fail(loaded);
    if (auto running = s.machine->qmp().execute("cont", "", options_.qmp_timeout_ms); !running)
      return fail(running.error());
  }
  s.handle.id = spec.id;
  s.handle.init_pid = s.machine->pid();
  s.handle.init_start_time = start_time_of(s.handle.init_pid);
  s.handle.pidfd = s.machine->pidfd();
  if (cgroups_)
    s.handle.cgroup_paths = cgroups_->paths(cgroup);
  if (s.link) {
    const vm_link& link = *s.link;
    s.handle.netns_path = vm_netns_path(link.netns_name);
    s.handle.host_interface = link.host_interface;
    s.handle.sandbox_interface = "eth0";
    s.handle.host_address = link.addresses.host;
    s.handle.sandbox_address = link.addresses.sandbox;
    s.handle.prefix_length = link.addresses.prefix_length;
    s.handle.mac = vm_mac_address(spec.id);
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
  if (!s.cgroup_name.empty())
    fs::remove(vm_record_path(options_.run_dir, s.cgroup_name), ec);
  fs::remove(s.disk_path, ec);
  fs::remove(s.console_path, ec);
  if (!s.clone && !s.memory_path.empty())
    fs::remove(s.memory_path, ec);
}

status microvm_runtime::destroy(std::string_view id) {
  std::lock_guard lock(mutex_);
  auto it = sandboxes_.find(id);
  if (it == sandboxes_.end())
    return status::ok();
  auto done = tear_down(it->second);
  if (it->second.link)
    return done; // kept, so that a retry removes the link
  sandboxes_.erase(it);
  return done;
}

status microvm_runtime::set_limits(std::string_view id, uint32_t cpu_millis, uint32_t memory_mb) {
  if (cpu_millis == 0 || memory_mb == 0)
    return make_status(errc::invalid_argument, "microvm: a zero limit");
  std::lock_guard lock(mutex_);
  auto it = sandboxes_.find(id);
  if (it == sandboxes_.end())
    return make_status(errc::not_found, "microvm: no sandbox " + std::string(id));
  const sandbox& s = it->second;
  // The guest's RAM and vCPUs are fixed at boot; the CPU time its QEMU may
  // take is its cgroup's.
  const uint32_t vcpus = ::airlock::schema::whole_cpus(cpu_millis);
  if (memory_mb != s.memory_mb || vcpus != s.vcpus)
    return make_status(errc::invalid_argument, "microvm: a VM's memory ("
                                                 + std::to_string(s.memory_mb) + " MiB) and vCPUs ("
                                                 + std::to_string(s.vcpus) + ") are fixed at boot");
  if (!cgroups_)
    return status::ok();
  // Only the CPU limit: a driver leaves what is 0 here as it is.
  cgroup_limits limits;
  limits.cpu_millis = cpu_millis;
  return cgroups_->create(s.cgroup_name, limits);
}

std::vector<sandbox_handle> microvm_runtime::list() const {
  std::lock_guard lock(mutex_);
  std::vector<sandbox_handle> out;
  for (const auto& [id, s] : sandboxes_)
    out.push_back(s.handle);
  return out;
}

result<adopt_report> microvm_runtime::adopt() {
  std::lock_guard lock(mutex_);
  adopt_report report;
  std::error_code ec;
  std::vector<fs::path> records;
  for (const auto& entry : fs::directory_iterator(options_.run_dir, ec))
    if (entry.path().string().ends_with(".vm.json"))
      records.push_back(entry.path());
  for (const auto& path : records) {
    std::ifstream in(path);
    auto record = nlohmann::json::parse(in, nullptr, false);
    const std::string name = record.is_object() ? record.value("name", "") : "";
    if (name.empty() || name.find('/') != std::string::npos || name.starts_with(".")) {
      report.failures.push_back(
        make_status(errc::corrupt_record, "microvm: unreadable VM record " + path.string()));
      continue;
    }
    // Its QEMU is ended, only if it is still the process the record names.
    const auto pid = static_cast<pid_t>(record.value("pid", 0));
    const auto start_time = record.value("start_time", uint64_t{0});
    if (unique_fd pidfd = open_recorded_process(pid, start_time)) {
      ::syscall(SYS_pidfd_send_signal, pidfd.get(), SIGKILL, nullptr, 0);
      pollfd gone{pidfd.get(), POLLIN, 0};
      (void)::poll(&gone, 1, static_cast<int>(options_.vm.stop_timeout_ms));
    }
    if (cgroups_)
      (void)cgroups_->remove(name, options_.cgroup_remove_timeout_ms);
    if (auto link = record.find("link"); link != record.end() && link->is_object()) {
      vm_link wired;
      wired.netns_name = link->value("netns", "");
      wired.host_interface = link->value("host_interface", "");
      wired.addresses.host = link->value("host", "");
      wired.addresses.sandbox = link->value("sandbox", "");
      wired.addresses.prefix_length = link->value("prefix_length", 0u);
      wired.slot = link->value("slot", 0u);
      if (auto removed = unwire_vm_network(options_.net, wired); !removed) {
        report.failures.push_back(removed);
        continue; // the record stays: a later run tries again
      }
    }
    for (const char* suffix : {".ext4", ".console.log", ".ram", ".qmp", ".vmm.log", ".jail"})
      fs::remove(options_.run_dir + "/" + name + suffix, ec);
    fs::remove(path, ec);
    if (auto id = record.value("sandbox_id", ""); !id.empty())
      report.cleaned.push_back(id);
  }
  return report;
}

result<sandbox_stats> microvm_runtime::stats_of(const sandbox& s) {
  sandbox_stats out;
  if (cgroups_) {
    auto usage = cgroups_->usage(s.cgroup_name);
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
