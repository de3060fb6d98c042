#pragma once
// microvm_runtime: sandboxes as QEMU microVMs behind sandbox_runtime (first
// slice, docs/microvm.md). Each sandbox is one VM booted from the guest that
// scripts/microvm-guest builds, with its own copy of the root disk, the
// worker's channel as its virtio-serial port, QMP for control, and QEMU in
// a cgroup and the jail of vm_options. With network enabled, the namespace
// runtime's addressing, veth and nftables rules plus a tap into the VM
// (vm_network.hpp). A VM that a crashed run left is ended and removed by
// adopt() (from its `<name>.vm.json`), not taken over. Limits in place:
// CPU only (memory and vCPUs are fixed at boot).
//
// Thread-safe: every call takes one mutex and blocks (QEMU start, QMP, cp).

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "worker/microvm/disk_image.hpp"
#include "worker/microvm/qemu_command.hpp"
#include "worker/microvm/vm.hpp"
#include "worker/microvm/vm_network.hpp"
#include "worker/microvm/vm_snapshot.hpp"
#include "worker/runtime/cgroup_driver.hpp"
#include "worker/runtime/sandbox_runtime.hpp"

namespace airlock::worker::microvm {

struct microvm_runtime_options {
  /// Sandbox disks, QMP sockets and console logs. Must exist. Default: "".
  std::string run_dir;
  /// The guest (scripts/microvm-guest's output directory). Default: "".
  std::string guest_dir;
  /// From choose_accelerator(). Default: tcg.
  accelerator accel = accelerator::tcg;
  /// Under TCG, the guest kernel's TSC rate; 0: measured at construction.
  /// Default: 0.
  uint32_t tsc_khz = 0;
  /// VMs at once. Default: 64.
  uint32_t slots_max = 64;
  /// QMP requests (stop, cont). Default: 5000.
  uint32_t qmp_timeout_ms = 5'000;
  /// Each QEMU in a cgroup of its own (the namespace runtime's driver and
  /// placement) bounding its memory (the guest's plus vmm_overhead_mb), CPU
  /// (cpu_millis) and threads. Default: true.
  bool use_cgroups = true;
  cgroup_options cgroups;
  /// QEMU's own memory above the guest's RAM (its code, device state, the
  /// TCG code cache). Default: 256.
  uint32_t vmm_overhead_mb = 256;
  /// Under TCG, the code cache's size (counted in the overhead). Default: 128.
  uint32_t tcg_tb_mb = 128;
  /// QEMU's threads (vCPUs, I/O workers). Default: 128.
  uint32_t vmm_threads_max = 128;
  /// From SIGKILL to a removed cgroup. Default: 5000.
  uint32_t cgroup_remove_timeout_ms = 5'000;
  vm_options vm;
  disk_image_options disk;
  /// Sandboxes with network enabled: the namespace runtime's tools, nftables
  /// table, interface prefix and egress proxy ports (give it the same
  /// net_options), so the host side and the egress proxy see a VM as they
  /// see a namespace sandbox. Default: see net_options.
  net_options net;
  /// The pool the /30 blocks come from: the namespace runtime's. "": network
  /// is refused. Default: "".
  std::string address_pool;
  /// The taken blocks, shared with the namespace runtime drawing from the
  /// same pool. Null: a table of its own. Default: null.
  std::shared_ptr<slot_table> shared_slots;
  /// Saving or loading a VM's device state. Default: 10000.
  uint32_t migration_timeout_ms = 10'000;
  /// Where save_machine() keeps machine snapshots, one directory each,
  /// named as the worker's checkpoints. "": save_machine is unavailable.
  /// Default: "".
  std::string machine_dir;
  /// restore_machine(shared) maps a machine's RAM file private (restore_mode::
  /// clone): every VM from one base shares the pages none has written. false:
  /// restore_machine always copies: QEMU 7.2 opens a private file mapping
  /// read-write, so a VMM that a guest took over could write the shared
  /// file (docs/microvm.md, "Base machines"). Default: true.
  bool clone_machines = true;
};

/// What snapshot() does with the VM once its state is saved.
enum class snapshot_mode {
  /// The VM is stopped and removed (its RAM file moves into the snapshot):
  /// the sandbox lives on only in the snapshot.
  suspend,
  /// The VM runs on (its RAM file is copied, the VM paused meanwhile).
  checkpoint,
};

/// How restore() maps the snapshot's RAM.
enum class restore_mode {
  /// A copy of the RAM file of the VM's own (shared mapping): the restored
  /// VM can be snapshotted again. For bringing back a suspended sandbox.
  owned,
  /// A private copy-on-write mapping of the snapshot's RAM file, which
  /// stays untouched: every clone of one base shares its unwritten pages
  /// through the page cache. A snapshot of a clone carries its RAM in the
  /// state stream (it is not a file of its own).
  clone,
};

struct vm_snapshot_info {
  std::string dir;
  vm_snapshot_record record;
  /// Bytes allocated on disk (holes not counted).
  uint64_t state_bytes = 0;
  uint64_t memory_bytes = 0;
  uint64_t disk_bytes = 0;
  /// From QMP stop to the device state written.
  int64_t save_ms = 0;
  /// The whole call: files, record and (the first time) hashing the guest's
  /// kernel and initramfs for the record included.
  int64_t total_ms = 0;
};

class microvm_runtime final : public sandbox_runtime {
public:
  explicit microvm_runtime(microvm_runtime_options options);
  ~microvm_runtime() override;

  /// Boots a VM and returns once QEMU's QMP answered (the guest boots on;
  /// its agent says hello on spec.channel_fd, which is required). The root
  /// disk: a regular file (a template's ext4 image, template_disk()) is
  /// copied for the sandbox (a reflink on btrfs); a directory is made into
  /// an image of its own. init_argv, init_fd, init_env and stdout/stderr are
  /// ignored: the agent in the initramfs is the init. With network enabled
  /// (unavailable without an address pool) the VM gets a slot's addresses,
  /// veth and firewall entries, and spec.prepare_root runs before the disk
  /// is made.
  result<sandbox_handle> create(const sandbox_launch_spec& spec) override;
  /// QMP stop / cont.
  status pause(std::string_view id) override;
  status resume(std::string_view id) override;
  /// Stops QEMU and removes the sandbox's disk, socket and console log, then
  /// its veth, network namespace and firewall entries.
  status destroy(std::string_view id) override;
  /// Sets the CPU limit of the VM's cgroup; its memory and vCPUs are fixed
  /// at boot: another memory_mb (or a cpu_millis that makes other vCPUs) is
  /// invalid_argument.
  status set_limits(std::string_view id, uint32_t cpu_millis, uint32_t memory_mb) override;
  std::vector<sandbox_handle> list() const override;
  /// Ends and removes every VM an earlier run left (QEMU if it is still the
  /// recorded process, its cgroup, network, files), reported as cleaned:
  /// none is taken over, as its guest channel's host end is gone.
  result<adopt_report> adopt() override;
  /// The cgroup's counters (QEMU's resident memory and CPU time without
  /// cgroups); frozen while paused.
  result<sandbox_stats> stats(std::string_view id) override;
  uint32_t slots() const override { return options_.slots_max; }

  /// Saves sandbox `id`'s memory and disk into `dir` (created; it must not
  /// exist): the device state, the RAM file, a copy of the disk (a reflink
  /// on btrfs) and snapshot.json. `suspend` then removes the VM (destroy()
  /// without the RAM file, which is now the snapshot's); `checkpoint` lets it
  /// run on. A clone (its RAM a private mapping of its base's file) has its
  /// RAM written into the state and no memory file (record.memory_file "");
  /// a restore of that loads it into a new RAM file of the VM's own.
  result<vm_snapshot_info> snapshot(std::string_view id, const std::string& dir,
                                    snapshot_mode mode);
  /// Starts sandbox spec.id from the snapshot in `dir` and returns once the
  /// guest runs again (memory, vCPUs and the guest are the snapshot's; the
  /// spec's limits bound the cgroup). The record must match this host
  /// (check_restorable) or wrong_state says what differs. spec.channel_fd
  /// becomes the VM's channel: the guest's agent goes on where it was and
  /// does not say hello on it by itself: the caller sends the guest a
  /// refresh (guest_client::refresh: entropy, clock, hostname, and the
  /// returned handle's network), which it answers with a new hello. The
  /// spec's network must be what the snapshot had (wrong_state otherwise):
  /// with one, the VM's NIC is wired to a new slot. A clone with a network
  /// does not come from the pool (pooled QEMUs have no NIC).
  result<sandbox_handle> restore(const sandbox_launch_spec& spec, const std::string& dir,
                                 restore_mode mode);
  /// Starts `count` QEMUs for clones of the snapshot in `dir`, each waiting
  /// for its state with no channel yet (-incoming defer, its own disk copy,
  /// its cgroup bounded by `limits`): a later restore(spec, dir, clone) takes
  /// one and only hands it the channel, loads the state and continues it,
  /// saving QEMU's process start (~75 ms here). Pooled QEMUs count against
  /// slots. Returns how many are pooled for `dir` now.
  result<uint32_t> prepare_clones(const std::string& dir, uint32_t count,
                                  const sandbox_limits& limits = {});
  /// QEMUs waiting in the pool for `dir`.
  uint32_t pooled_clones(const std::string& dir) const;
  /// What a snapshot taken here now would record (QEMU's version is known
  /// once a VM has started; the guest's hashes are computed once).
  vm_snapshot_record host_record(uint32_t memory_mb, uint32_t vcpus);
  result<sandbox_stats> stats_all() override;

  /// snapshot(id, machine_dir/name, checkpoint): state + RAM + disk bytes.
  result<uint64_t> save_machine(std::string_view id, std::string_view name) override;
  /// restore(spec, machine_dir/name, clone) for shared memory (unless
  /// options.clone_machines is off), else owned.
  result<sandbox_handle> restore_machine(const sandbox_launch_spec& spec, std::string_view name,
                                         machine_memory memory = machine_memory::copy) override;
  bool has_machine(std::string_view name) const override;
  status delete_machine(std::string_view name) override;

private:
  struct sandbox {
    sandbox_handle handle;
    std::unique_ptr<vm> machine;
    std::string disk_path;
    std::string console_path;
    /// The guest's RAM file: the sandbox's own in run_dir, or for a clone
    /// its base's (not removed with the sandbox).
    std::string memory_path;
    bool clone = false;
    /// The cgroup's name: the sandbox's id, or for a clone that waited in
    /// the pool the name it was started under.
    std::string cgroup_name;
    /// A pooled clone: the snapshot directory whose state it waits for.
    std::string pool_dir;
    uint32_t memory_mb = 0;
    uint32_t vcpus = 0;
    bool paused = false;
    /// Set with network enabled.
    std::optional<vm_link> link;
  };

  result<sandbox_stats> stats_of(const sandbox& s);
  /// snapshot() with mutex_ held.
  result<vm_snapshot_info> snapshot_locked(std::string_view id, const std::string& dir,
                                           snapshot_mode mode);
  /// Stops the VM and removes its files, cgroup and link, going on past
  /// failures; the first one is returned. A link that could not be removed
  /// stays set (a retry removes it).
  status tear_down(sandbox& s);
  /// The record of snapshot `dir`, when this host can restore it (all but
  /// QEMU's version, which start_vm checks once QEMU answers).
  result<vm_snapshot_record> restorable_record(const std::string& dir);
  /// Sets s's RAM for a restore of sandbox `name` from `saved` in `dir`: the
  /// snapshot's file mapped private (clone), else a file in run_dir: a copy
  /// of the snapshot's (owned), or a new one the load fills when the state
  /// carries the RAM.
  status map_restored_memory(sandbox& s, const std::string& name, const std::string& dir,
                             const vm_snapshot_record& saved, restore_mode mode);
  /// /proc/<pid>/stat's start time (process_start_time); 0 when it is gone.
  static uint64_t start_time_of(pid_t pid);
  /// Writes `<run_dir>/<cgroup_name>.vm.json` for a started VM (adopt() reads it).
  status record_vm(const sandbox& s, const std::string& sandbox_id) const;
  void remove_files(const sandbox& s);
  /// Takes a slot and plans the VM's link (the slot is released on failure).
  result<vm_link> plan_link(const std::string& id);
  /// With spec's network enabled, plans s's link (s.link, the slot) and
  /// removes a namespace or veth of the id an earlier run left.
  status claim_link(const sandbox_launch_spec& spec, sandbox& s);
  /// Wires s's planned link (if any) and adds its NIC to `vs`: the tap,
  /// which QEMU must have inherited before it is closed.
  result<unique_fd> wire_link(const sandbox_launch_spec& spec, const sandbox& s, vm_spec& vs);
  /// A sandbox named `name` (an id, or a pooled QEMU's name) with its disk
  /// and console paths in run_dir.
  sandbox new_sandbox(const std::string& name, uint32_t memory_mb, uint32_t vcpus) const;
  /// Undoes what create or restore made for `s` before its QEMU started
  /// (its files and link); returns `why`.
  status discard(sandbox& s, status why);
  /// wire_link, then start_vm; the link is released if the start fails.
  result<sandbox_handle> start_wired(const sandbox_launch_spec& spec, sandbox s, vm_spec vs,
                                     const std::string& state_path);
  std::string machine_dir(std::string_view name) const;
  /// Removes the link and frees its slot; a failure keeps the slot taken.
  status release_link(const vm_link& link);
  /// Refusals shared by create and restore; ok when spec may start.
  status admit(const sandbox_launch_spec& spec) const;
  /// The cgroup, QEMU, the handle; removes the files on failure.
  /// With `pooled`, the VM waits in pool_ instead (its handle is empty).
  result<sandbox_handle> start_vm(const sandbox_launch_spec& spec, sandbox s, const vm_spec& vs,
                                  const std::string& state_path, bool pooled = false);
  /// Hands a pooled VM spec's channel, loads its state and registers it.
  result<sandbox_handle> claim_pooled(const sandbox_launch_spec& spec, sandbox s);
  vm_spec base_vm_spec(const sandbox_launch_spec& spec, const sandbox& s) const;
  std::string qemu_version_;
  std::string kernel_sha256_;
  std::string initrd_sha256_;

  microvm_runtime_options options_;
  guest_image guest_;
  /// Set when use_cgroups and a driver was found; else cgroups_error_ says why.
  std::unique_ptr<cgroup_driver> cgroups_;
  status cgroups_error_;
  /// Parsed address_pool; unset: network refused, address_pool_error_ says why.
  std::optional<address_pool> address_pool_;
  status address_pool_error_;
  std::shared_ptr<slot_table> slots_in_use_;
  bool firewall_ready_ = false;
  mutable std::mutex mutex_;
  std::map<std::string, sandbox, std::less<>> sandboxes_;
  std::vector<sandbox> pool_;
  uint64_t pool_serial_ = 0;
};

} // namespace airlock::worker::microvm
