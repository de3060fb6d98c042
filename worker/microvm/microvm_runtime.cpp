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

status microvm_runtime::record_vm(const sandbox& s, const std::string& sandbox_id) const {
  nlohmann::json record = {{"name", s.cgroup_name},
                           {"sandbox_id", sandbox_id},
                           {"pid", s.machine->pid()},
                           {"start_time", stat_field(s.machine->pid(), 22)}};
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
  for (auto& [id, s] : sandboxes_) {
    (void)s.machine->stop();
    remove_files(s);
    if (cgroups_)
      (void)cgroups_->remove(s.cgroup_name, options_.cgroup_remove_timeout_ms);
    if (s.link)
      (void)release_link(*s.link);
  }
  for (auto& s : pool_) {
    (void)s.machine->stop();
    remove_files(s);
    if (cgroups_)
      (void)cgroups_->remove(s.cgroup_name, options_.cgroup_remove_timeout_ms);
  }
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
  sandbox s;
  s.disk_path = options_.run_dir + "/" + spec.id + ".ext4";
  s.console_path = options_.run_dir + "/" + spec.id + ".console.log";
  s.memory_path = options_.run_dir + "/" + spec.id + ".ram";
  s.memory_mb = spec.limits.memory_mb;
  s.vcpus = std::max<uint32_t>(1, (spec.limits.cpu_millis + 999) / 1000);
  unique_fd tap;
  if (spec.network.enabled) {
    auto link = plan_link(spec.id);
    if (!link)
      return link.error();
    s.link = std::move(*link);
    s.handle.slot = s.link->slot;
  }
  // Everything made from here on is undone by this on failure.
  auto fail = [this, &s](status why) {
    remove_files(s);
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
  if (s.link) {
    auto wired = wire_vm_network(options_.net, *s.link);
    if (!wired)
      return fail(wired.error());
    tap = std::move(*wired);
  }
  auto vs = base_vm_spec(spec, s);
  if (s.link) {
    const auto& a = s.link->addresses;
    vs.network = {a.sandbox + "/" + std::to_string(a.prefix_length), a.host,
                  vm_mac_address(spec.id), tap.get()};
  }
  // start_vm takes the sandbox; its link is released here if it fails.
  const auto link = s.link;
  auto started = start_vm(spec, std::move(s), vs, "");
  // QEMU holds its own copy of the tap: the device lives as long as QEMU.
  tap.reset();
  if (!started && link)
    (void)release_link(*link);
  return started;
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
    if (auto loaded = s.machine->load_state(state_path, options_.migration_timeout_ms);
        !loaded.is_ok())
      return fail(loaded);
    if (auto running = s.machine->qmp().execute("cont", "", options_.qmp_timeout_ms); !running)
      return fail(running.error());
  }
  s.handle.id = spec.id;
  s.handle.init_pid = s.machine->pid();
  s.handle.init_start_time = stat_field(s.handle.init_pid, 22);
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
  }
  auto handle = s.handle;
  sandboxes_.emplace(spec.id, std::move(s));
  return handle;
}

vm_snapshot_record microvm_runtime::host_record(uint32_t memory_mb, uint32_t vcpus) {
  if (kernel_sha256_.empty())
    kernel_sha256_ = file_sha256(guest_.kernel_path);
  if (initrd_sha256_.empty())
    initrd_sha256_ = file_sha256(guest_.initrd_path);
  vm_spec vs;
  vs.accel = options_.accel;
  vs.memory_mb = memory_mb;
  vs.memory_path = "file";
  vm_snapshot_record r;
  r.qemu_version = qemu_version_;
  r.machine = machine_argument(vs);
  r.accel = std::string(to_string(options_.accel));
  r.cpu = cpu_argument(vs);
  r.memory_mb = memory_mb;
  r.vcpus = vcpus;
  r.kernel_sha256 = kernel_sha256_;
  r.initrd_sha256 = initrd_sha256_;
  r.guest_release = guest_.release;
  return r;
}

namespace {

int64_t monotonic_ms() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

uint64_t allocated_bytes(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_blocks) * 512 : 0;
}

/// Moves `from` to `to`: a rename, or a sparse copy and removal across
/// filesystems.
status move_file(const std::string& from, const std::string& to,
                 const disk_image_options& options) {
  if (::rename(from.c_str(), to.c_str()) == 0)
    return status::ok();
  if (errno != EXDEV)
    return make_status(errc::io_error, "microvm: move " + from + ": " + std::strerror(errno));
  if (auto copied = sandbox_disk(from, to, options); !copied.is_ok())
    return copied;
  ::unlink(from.c_str());
  return status::ok();
}

} // namespace

result<vm_snapshot_info> microvm_runtime::snapshot(std::string_view id, const std::string& dir,
                                                   snapshot_mode mode) {
  std::lock_guard lock(mutex_);
  const int64_t began = monotonic_ms();
  auto it = sandboxes_.find(id);
  if (it == sandboxes_.end())
    return make_status(errc::not_found, "microvm: no sandbox " + std::string(id));
  sandbox& s = it->second;
  if (s.clone)
    return make_status(errc::unimplemented,
                       "microvm: a clone's RAM is a private mapping of its base's file; "
                       "snapshots of clones are not built");
  std::error_code ec;
  if (fs::exists(dir, ec))
    return make_status(errc::already_exists, "microvm: " + dir + " exists");
  if (!fs::create_directories(dir, ec))
    return make_status(errc::io_error, "microvm: create " + dir + ": " + ec.message());
  auto abandon = [&](status why) -> status {
    fs::remove_all(dir, ec);
    // The VM goes back to the state it was in (save_state paused it).
    if (!s.paused)
      (void)s.machine->qmp().execute("cont", "", options_.qmp_timeout_ms);
    return why;
  };
  vm_snapshot_info info;
  info.dir = dir;
  info.record = host_record(s.memory_mb, s.vcpus);
  info.record.source_id = std::string(id);
  info.record.created_unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count();
  const std::string state_path = dir + "/" + info.record.state_file;
  const std::string memory_path = dir + "/" + info.record.memory_file;
  const std::string disk_path = dir + "/" + info.record.disk_file;
  const int64_t save_began = monotonic_ms();
  if (auto saved = s.machine->save_state(state_path, options_.migration_timeout_ms); !saved.is_ok())
    return abandon(saved);
  info.save_ms = monotonic_ms() - save_began;
  // QEMU flushed the disk when the migration completed; the VM is paused.
  if (auto copied = sandbox_disk(s.disk_path, disk_path, options_.disk); !copied.is_ok())
    return abandon(copied);
  if (mode == snapshot_mode::suspend) {
    // QEMU must be gone before the RAM file moves: its mapping would go on
    // writing whatever the file is.
    (void)s.machine->stop();
    if (auto moved = move_file(s.memory_path, memory_path, options_.disk); !moved.is_ok()) {
      fs::remove_all(dir, ec);
      return moved;
    }
  } else {
    if (auto copied = sandbox_disk(s.memory_path, memory_path, options_.disk); !copied.is_ok())
      return abandon(copied);
    if (!s.paused) {
      if (auto running = s.machine->qmp().execute("cont", "", options_.qmp_timeout_ms); !running) {
        fs::remove_all(dir, ec);
        return running.error();
      }
    }
  }
  if (auto written = write_vm_snapshot_record(dir, info.record); !written.is_ok()) {
    fs::remove_all(dir, ec);
    return written;
  }
  info.state_bytes = allocated_bytes(state_path);
  info.memory_bytes = allocated_bytes(memory_path);
  info.disk_bytes = allocated_bytes(disk_path);
  if (mode == snapshot_mode::suspend) {
    remove_files(s);
    if (cgroups_)
      (void)cgroups_->remove(s.cgroup_name, options_.cgroup_remove_timeout_ms);
    if (s.link)
      (void)release_link(*s.link);
    sandboxes_.erase(it);
  }
  info.total_ms = monotonic_ms() - began;
  return info;
}

result<uint32_t> microvm_runtime::prepare_clones(const std::string& dir, uint32_t count,
                                                 const sandbox_limits& limits) {
  std::lock_guard lock(mutex_);
  std::error_code ec;
  const std::string key = fs::absolute(dir, ec).lexically_normal().string();
  auto saved = read_vm_snapshot_record(key);
  if (!saved)
    return saved.error();
  auto here = host_record(saved->memory_mb, saved->vcpus);
  if (here.qemu_version.empty())
    here.qemu_version = saved->qemu_version;
  if (auto same = check_restorable(*saved, here); !same.is_ok())
    return same;
  for (uint32_t i = 0; i < count; ++i) {
    sandbox_launch_spec spec;
    // A dot: no sandbox id has one, so the names never collide.
    spec.id = "pool." + std::to_string(++pool_serial_);
    spec.limits = limits;
    if (spec.limits.memory_mb == 0 || spec.limits.cpu_millis == 0)
      return make_status(errc::invalid_argument, "microvm: a zero limit");
    if (sandboxes_.size() + pool_.size() >= options_.slots_max)
      return make_status(errc::resource_exhausted, "microvm: every slot is taken");
    if (guest_.kernel_path.empty() || guest_.initrd_path.empty())
      return make_status(errc::not_found, "microvm: no guest in '" + options_.guest_dir + "'");
    sandbox s;
    s.disk_path = options_.run_dir + "/" + spec.id + ".ext4";
    s.console_path = options_.run_dir + "/" + spec.id + ".console.log";
    s.memory_mb = saved->memory_mb;
    s.vcpus = saved->vcpus;
    s.clone = true;
    s.pool_dir = key;
    s.memory_path = key + "/" + saved->memory_file;
    fs::remove(s.disk_path, ec);
    if (auto copied = sandbox_disk(key + "/" + saved->disk_file, s.disk_path, options_.disk);
        !copied.is_ok())
      return copied;
    auto vs = base_vm_spec(spec, s);
    vs.incoming = true;
    vs.channel_hotplug = true;
    vs.channel_fd = -1;
    if (auto started = start_vm(spec, std::move(s), vs, key + "/" + saved->state_file, true);
        !started)
      return started.error();
  }
  return pooled_clones(dir);
}

uint32_t microvm_runtime::pooled_clones(const std::string& dir) const {
  std::error_code ec;
  const std::string key = fs::absolute(dir, ec).lexically_normal().string();
  return static_cast<uint32_t>(std::count_if(
    pool_.begin(), pool_.end(), [&key](const sandbox& s) { return s.pool_dir == key; }));
}

result<sandbox_handle> microvm_runtime::claim_pooled(const sandbox_launch_spec& spec, sandbox s) {
  auto fail = [&](status why) -> status {
    (void)s.machine->stop();
    remove_files(s);
    if (cgroups_)
      (void)cgroups_->remove(s.cgroup_name, options_.cgroup_remove_timeout_ms);
    return why;
  };
  auto saved = read_vm_snapshot_record(s.pool_dir);
  if (!saved)
    return fail(saved.error());
  if (auto attached = s.machine->attach_channel(spec.channel_fd, options_.qmp_timeout_ms);
      !attached.is_ok())
    return fail(attached);
  if (auto loaded =
        s.machine->load_state(s.pool_dir + "/" + saved->state_file, options_.migration_timeout_ms);
      !loaded.is_ok())
    return fail(loaded);
  if (auto running = s.machine->qmp().execute("cont", "", options_.qmp_timeout_ms); !running)
    return fail(running.error());
  s.pool_dir.clear();
  if (auto recorded = record_vm(s, spec.id); !recorded.is_ok())
    return fail(recorded);
  s.handle.id = spec.id;
  s.handle.init_pid = s.machine->pid();
  s.handle.init_start_time = stat_field(s.handle.init_pid, 22);
  s.handle.pidfd = s.machine->pidfd();
  s.handle.slot = static_cast<uint32_t>(sandboxes_.size());
  if (cgroups_)
    s.handle.cgroup_paths = cgroups_->paths(s.cgroup_name);
  auto handle = s.handle;
  sandboxes_.emplace(spec.id, std::move(s));
  return handle;
}

result<sandbox_handle> microvm_runtime::restore(const sandbox_launch_spec& spec,
                                                const std::string& dir, restore_mode mode) {
  std::lock_guard lock(mutex_);
  if (auto admitted = admit(spec); !admitted.is_ok())
    return admitted;
  // The saved device state would need the same NIC, wired to a new slot,
  // and the guest its new address: not built.
  if (spec.network.enabled)
    return make_status(errc::unimplemented,
                       "microvm: restoring a VM with a network is not built; restore it "
                       "with network off");
  auto saved = read_vm_snapshot_record(dir);
  if (!saved)
    return saved.error();
  std::error_code ec;
  // Everything but QEMU's version is known before QEMU starts (start_vm
  // checks that once it answers).
  auto here = host_record(saved->memory_mb, saved->vcpus);
  if (here.qemu_version.empty())
    here.qemu_version = saved->qemu_version;
  if (auto same = check_restorable(*saved, here); !same.is_ok())
    return same;
  if (mode == restore_mode::clone) {
    const std::string key = fs::absolute(dir, ec).lexically_normal().string();
    for (auto it = pool_.begin(); it != pool_.end(); ++it) {
      if (it->pool_dir == key) {
        sandbox pooled = std::move(*it);
        pool_.erase(it);
        return claim_pooled(spec, std::move(pooled));
      }
    }
  }
  sandbox s;
  s.disk_path = options_.run_dir + "/" + spec.id + ".ext4";
  s.console_path = options_.run_dir + "/" + spec.id + ".console.log";
  s.memory_mb = saved->memory_mb;
  s.vcpus = saved->vcpus;
  s.clone = mode == restore_mode::clone;
  fs::remove(s.disk_path, ec);
  if (auto copied = sandbox_disk(dir + "/" + saved->disk_file, s.disk_path, options_.disk);
      !copied.is_ok())
    return copied;
  if (s.clone) {
    s.memory_path = fs::absolute(dir + "/" + saved->memory_file, ec).string();
  } else {
    s.memory_path = options_.run_dir + "/" + spec.id + ".ram";
    fs::remove(s.memory_path, ec);
    if (auto copied = sandbox_disk(dir + "/" + saved->memory_file, s.memory_path, options_.disk);
        !copied.is_ok()) {
      remove_files(s);
      return copied;
    }
  }
  auto vs = base_vm_spec(spec, s);
  vs.incoming = true;
  return start_vm(spec, std::move(s), vs, dir + "/" + saved->state_file);
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
  auto stopped = it->second.machine->stop();
  remove_files(it->second);
  if (cgroups_) {
    if (auto removed = cgroups_->remove(it->second.cgroup_name, options_.cgroup_remove_timeout_ms);
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
    if (pid > 0 && stat_field(pid, 22) == start_time) {
      unique_fd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
      if (pidfd && stat_field(pid, 22) == start_time) {
        ::syscall(SYS_pidfd_send_signal, pidfd.get(), SIGKILL, nullptr, 0);
        pollfd gone{pidfd.get(), POLLIN, 0};
        (void)::poll(&gone, 1, static_cast<int>(options_.vm.stop_timeout_ms));
      }
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
