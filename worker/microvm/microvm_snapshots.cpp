// microvm_runtime's memory snapshots (docs/microvm.md, "Memory snapshots"):
// snapshot (suspend or checkpoint), restore (an owned copy, or a clone of a
// base), the pool of QEMUs waiting for a base's state, and the record that
// says which host can restore what.

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>

#include "worker/microvm/microvm_runtime.hpp"
#include "worker/runtime/sys.hpp"

namespace airlock::worker::microvm {
namespace fs = std::filesystem;

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

/// A machine snapshot's name is a checkpoint id: one path component.
bool valid_machine_name(std::string_view name) {
  if (name.empty() || name.size() > 128)
    return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'
           || c == '-';
  });
}

int64_t monotonic_ms() {
  return static_cast<int64_t>(worker::monotonic_ms()); // signed: deadlines are subtracted
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

result<vm_snapshot_record> microvm_runtime::restorable_record(const std::string& dir) {
  auto saved = read_vm_snapshot_record(dir);
  if (!saved)
    return saved.error();
  // Everything but QEMU's version is known before QEMU starts (start_vm
  // checks that once it answers).
  auto here = host_record(saved->memory_mb, saved->vcpus);
  if (here.qemu_version.empty())
    here.qemu_version = saved->qemu_version;
  if (auto same = check_restorable(*saved, here); !same.is_ok())
    return same;
  return saved;
}

result<vm_snapshot_info> microvm_runtime::snapshot(std::string_view id, const std::string& dir,
                                                   snapshot_mode mode) {
  std::lock_guard lock(mutex_);
  return snapshot_locked(id, dir, mode);
}

result<vm_snapshot_info>
microvm_runtime::snapshot_locked(std::string_view id, const std::string& dir, snapshot_mode mode) {
  const int64_t began = monotonic_ms();
  auto it = sandboxes_.find(id);
  if (it == sandboxes_.end())
    return make_status(errc::not_found, "microvm: no sandbox " + std::string(id));
  sandbox& s = it->second;
  // A clone's RAM is a private mapping of its base's file, not a file the
  // snapshot can take: the migration writes it into the state.
  const bool ram_in_stream = s.clone;
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
  info.record.network = s.link.has_value();
  if (ram_in_stream)
    info.record.memory_file.clear();
  info.record.created_unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count();
  const std::string state_path = dir + "/" + info.record.state_file;
  const std::string memory_path = dir + "/" + info.record.memory_file;
  const std::string disk_path = dir + "/" + info.record.disk_file;
  const int64_t save_began = monotonic_ms();
  if (auto saved = s.machine->save_state(state_path, options_.migration_timeout_ms, !ram_in_stream);
      !saved.is_ok())
    return abandon(saved);
  info.save_ms = monotonic_ms() - save_began;
  // QEMU flushed the disk when the migration completed; the VM is paused.
  if (auto copied = sandbox_disk(s.disk_path, disk_path, options_.disk); !copied.is_ok())
    return abandon(copied);
  // A suspend's QEMU goes first: with a RAM file, its mapping would go on
  // writing whatever the file is once it moved.
  const bool suspend = mode == snapshot_mode::suspend;
  if (suspend)
    (void)s.machine->stop();
  if (!ram_in_stream) {
    auto kept = suspend ? move_file(s.memory_path, memory_path, options_.disk)
                        : sandbox_disk(s.memory_path, memory_path, options_.disk);
    if (!kept.is_ok() && !suspend)
      return abandon(kept);
    if (!kept.is_ok()) { // its QEMU is gone: nothing to continue
      fs::remove_all(dir, ec);
      return kept;
    }
  }
  // A checkpoint's VM goes on as it was.
  if (!suspend && !s.paused)
    if (auto running = s.machine->qmp().execute("cont", "", options_.qmp_timeout_ms); !running)
      return abandon(running.error());
  if (auto written = write_vm_snapshot_record(dir, info.record); !written.is_ok()) {
    fs::remove_all(dir, ec);
    return written;
  }
  info.state_bytes = allocated_bytes(state_path);
  info.memory_bytes = ram_in_stream ? 0 : allocated_bytes(memory_path);
  info.disk_bytes = allocated_bytes(disk_path);
  if (mode == snapshot_mode::suspend) {
    (void)tear_down(s);
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
  auto saved = restorable_record(key);
  if (!saved)
    return saved.error();
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
    sandbox s = new_sandbox(spec.id, saved->memory_mb, saved->vcpus);
    s.pool_dir = key;
    if (auto mapped = map_restored_memory(s, spec.id, key, *saved, restore_mode::clone);
        !mapped.is_ok())
      return mapped;
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
        s.machine->load_state(s.pool_dir + "/" + saved->state_file, options_.migration_timeout_ms,
                              !saved->memory_file.empty());
      !loaded.is_ok())
    return fail(loaded);
  if (auto running = s.machine->qmp().execute("cont", "", options_.qmp_timeout_ms); !running)
    return fail(running.error());
  s.pool_dir.clear();
  if (auto recorded = record_vm(s, spec.id); !recorded.is_ok())
    return fail(recorded);
  s.handle.id = spec.id;
  s.handle.init_pid = s.machine->pid();
  s.handle.init_start_time = start_time_of(s.handle.init_pid);
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
  auto saved = restorable_record(dir);
  if (!saved)
    return saved.error();
  // The saved device state names a NIC or none: the restored VM has the
  // same, wired to a slot of its own (the guest takes its address from the
  // caller's refresh).
  if (saved->network != spec.network.enabled)
    return make_status(errc::wrong_state,
                       std::string("microvm: the snapshot was taken ")
                         + (saved->network ? "with" : "without")
                         + " a network; restore it with the same network setting");
  std::error_code ec;
  // Pooled QEMUs wait without a NIC.
  if (mode == restore_mode::clone && !spec.network.enabled) {
    const std::string key = fs::absolute(dir, ec).lexically_normal().string();
    for (auto it = pool_.begin(); it != pool_.end(); ++it) {
      if (it->pool_dir == key) {
        sandbox pooled = std::move(*it);
        pool_.erase(it);
        return claim_pooled(spec, std::move(pooled));
      }
    }
  }
  sandbox s = new_sandbox(spec.id, saved->memory_mb, saved->vcpus);
  if (auto planned = claim_link(spec, s); !planned.is_ok())
    return planned;
  auto fail = [this, &s](status why) { return discard(s, std::move(why)); };
  fs::remove(s.disk_path, ec);
  if (auto copied = sandbox_disk(dir + "/" + saved->disk_file, s.disk_path, options_.disk);
      !copied.is_ok())
    return fail(copied);
  if (auto mapped = map_restored_memory(s, spec.id, dir, *saved, mode); !mapped.is_ok())
    return fail(mapped);
  auto vs = base_vm_spec(spec, s);
  vs.incoming = true;
  return start_wired(spec, std::move(s), vs, dir + "/" + saved->state_file);
}

status microvm_runtime::map_restored_memory(sandbox& s, const std::string& name,
                                            const std::string& dir, const vm_snapshot_record& saved,
                                            restore_mode mode) {
  std::error_code ec;
  s.clone = false;
  if (mode == restore_mode::clone && !saved.memory_file.empty()) {
    s.clone = true;
    s.memory_path = fs::absolute(dir + "/" + saved.memory_file, ec).lexically_normal().string();
    return status::ok();
  }
  s.memory_path = options_.run_dir + "/" + name + ".ram";
  fs::remove(s.memory_path, ec);
  // RAM in the state: the load fills a new file of the VM's own, so that its
  // own snapshots are files again.
  if (saved.memory_file.empty())
    return status::ok();
  return sandbox_disk(dir + "/" + saved.memory_file, s.memory_path, options_.disk);
}

std::string microvm_runtime::machine_dir(std::string_view name) const {
  return options_.machine_dir + "/" + std::string(name);
}

result<uint64_t> microvm_runtime::save_machine(std::string_view id, std::string_view name) {
  if (options_.machine_dir.empty())
    return make_status(errc::unavailable, "microvm: no directory for machine snapshots is set");
  if (!valid_machine_name(name))
    return make_status(errc::invalid_argument,
                       "microvm: bad machine name '" + std::string(name) + "'");
  std::lock_guard lock(mutex_);
  // A directory without its record is a save cut short (snapshot.json is
  // written last): it goes, and the save starts again. Under the lock: a
  // save of the same name in flight is not one.
  std::error_code ec;
  if (!has_machine(name) && fs::exists(machine_dir(name), ec))
    fs::remove_all(machine_dir(name), ec);
  auto saved = snapshot_locked(id, machine_dir(name), snapshot_mode::checkpoint);
  if (!saved)
    return saved.error();
  return saved->state_bytes + saved->memory_bytes + saved->disk_bytes;
}

result<sandbox_handle> microvm_runtime::restore_machine(const sandbox_launch_spec& spec,
                                                        std::string_view name,
                                                        machine_memory memory) {
  if (!has_machine(name))
    return make_status(errc::not_found, "microvm: no machine snapshot " + std::string(name));
  return restore(spec, machine_dir(name),
                 memory == machine_memory::shared && options_.clone_machines ? restore_mode::clone
                                                                             : restore_mode::owned);
}

bool microvm_runtime::has_machine(std::string_view name) const {
  if (options_.machine_dir.empty() || !valid_machine_name(name))
    return false;
  std::error_code ec;
  return fs::exists(machine_dir(name) + "/" + vm_snapshot_record_name, ec);
}

status microvm_runtime::delete_machine(std::string_view name) {
  if (options_.machine_dir.empty() || !valid_machine_name(name))
    return status::ok();
  std::error_code ec;
  fs::remove_all(machine_dir(name), ec);
  if (ec)
    return make_status(errc::io_error, "microvm: delete machine snapshot " + std::string(name)
                                         + ": " + ec.message());
  return status::ok();
}

} // namespace airlock::worker::microvm
