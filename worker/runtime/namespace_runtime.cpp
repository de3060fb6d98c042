#include "worker/runtime/namespace_runtime.hpp"

#include <fcntl.h>
#include <linux/sched.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "schema/atomic_file.hpp"
#include "worker/runtime/caps.hpp"
#include "worker/runtime/child.hpp"
#include "worker/runtime/mount_ns.hpp"
#include "worker/runtime/sys.hpp"
#include "worker/runtime/user_ns.hpp"

namespace airlock::worker {
namespace {

constexpr uint64_t namespace_flags =
  CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWUTS | CLONE_NEWIPC;

/// argv/envp as the NULL-terminated arrays execve takes, built before clone.
struct exec_arrays {
  std::vector<char*> argv;
  std::vector<char*> envp;

  exec_arrays(const std::vector<std::string>& args, const std::vector<std::string>& env) {
    for (const auto& arg : args)
      argv.push_back(const_cast<char*>(arg.c_str()));
    argv.push_back(nullptr);
    for (const auto& var : env)
      envp.push_back(const_cast<char*>(var.c_str()));
    envp.push_back(nullptr);
  }
};

/// The stack the sandbox's child runs on until it execs.
class child_stack {
public:
  static constexpr size_t bytes = 256 << 10;
  child_stack()
      : base_(::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK | MAP_NORESERVE, -1, 0)) {}
  ~child_stack() {
    if (base_ != MAP_FAILED)
      ::munmap(base_, bytes);
  }
  child_stack(const child_stack&) = delete;
  child_stack& operator=(const child_stack&) = delete;
  bool valid() const { return base_ != MAP_FAILED; }
  void* top() const { return static_cast<char*>(base_) + bytes; }

private:
  void* base_;
};

/// Until released, kills the child and waits for it to be gone, so that the
/// memory it borrows (its stack, the plan) outlives it whichever way start
/// fails.
class child_reaper {
public:
  child_reaper(int pidfd, uint32_t timeout_ms) : pidfd_(pidfd), timeout_ms_(timeout_ms) {}
  ~child_reaper() {
    if (pidfd_ < 0)
      return;
    ::syscall(SYS_pidfd_send_signal, pidfd_, SIGKILL, nullptr, 0);
    (void)wait_pidfd_exit(pidfd_, timeout_ms_);
  }
  child_reaper(const child_reaper&) = delete;
  child_reaper& operator=(const child_reaper&) = delete;
  void release() { pidfd_ = -1; }

private:
  int pidfd_;
  uint32_t timeout_ms_;
};

int child_entry(void* plan) { run_child(*static_cast<const child_plan*>(plan)); }

/// Clones into fresh user, pid, mount, net, uts and ipc namespaces. The
/// cgroup namespace comes later, from the child, once the worker has moved
/// it into its cgroups (a namespace made at clone time would be rooted at
/// the worker's cgroup).
///
/// The child shares the worker's memory (CLONE_VM) until it execs, on its own
/// stack: a copy of the worker's page tables would cost more with every
/// thread the worker has, which is one per sandbox. It makes only system
/// calls on data prepared before the clone (child.hpp), and starts with every
/// signal blocked so that no handler of the worker's runs on its borrowed
/// memory; it resets them and restores `plan.signal_mask` just before exec.
result<pid_t> clone_child(child_plan& plan, const child_stack& stack, int& pidfd) {
  sigset_t all;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &plan.signal_mask);
  int pid =
    ::clone(child_entry, stack.top(),
            static_cast<int>(namespace_flags | CLONE_VM | CLONE_PIDFD) | SIGCHLD, &plan, &pidfd);
  int clone_errno = errno;
  ::pthread_sigmask(SIG_SETMASK, &plan.signal_mask, nullptr);
  if (pid < 0)
    return sys_error(errc_from_errno(clone_errno), "clone with new namespaces", clone_errno);
  return static_cast<pid_t>(pid);
}

/// The go byte says which mounts follow (child.cpp receive_go): 'G', plus 1
/// with a rootfs, plus 2 with a boot id, the fds in that order.
status send_go(int sync_fd, const mount_fds& fds) {
  int sent[2];
  size_t count = 0;
  char byte = 'G';
  if (fds.rootfs >= 0) {
    sent[count++] = fds.rootfs;
    byte = static_cast<char>(byte + 1);
  }
  if (fds.boot_id >= 0) {
    sent[count++] = fds.boot_id;
    byte = static_cast<char>(byte + 2);
  }
  iovec io{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(2 * sizeof(int))] = {};
  msghdr message{};
  message.msg_iov = &io;
  message.msg_iovlen = 1;
  if (count > 0) {
    message.msg_control = control;
    message.msg_controllen = CMSG_SPACE(count * sizeof(int));
    cmsghdr* c = CMSG_FIRSTHDR(&message);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(count * sizeof(int));
    std::memcpy(CMSG_DATA(c), sent, count * sizeof(int));
  }
  if (::sendmsg(sync_fd, &message, MSG_NOSIGNAL) != 1)
    return sys_error(errc::internal, "release the sandbox init", errno);
  return status::ok();
}

status bring_up_loopback(const net_options& net, pid_t pid) {
  std::string ns_path = "/proc/" + std::to_string(pid) + "/ns/net";
  unique_fd netns(::open(ns_path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!netns)
    return sys_error(errc::io_error, "open " + ns_path, errno);
  auto run = tool_options(net);
  run.netns_fd = netns.get();
  return run_checked("bring up lo inside the sandbox", {net.ip_path, "link", "set", "lo", "up"},
                     run);
}

bool is_directory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

} // namespace

status namespace_runtime::with_context(std::string_view id, const status& failure) {
  return make_status(failure.code, "sandbox " + std::string(id) + ": " + failure.message);
}

namespace_runtime::namespace_runtime(namespace_runtime_options options,
                                     std::unique_ptr<cgroup_driver> cgroups, address_pool pool,
                                     seccomp_program seccomp)
    : options_(std::move(options)), cgroups_(std::move(cgroups)), pool_(pool),
      seccomp_(std::move(seccomp)),
      slots_in_use_(options_.shared_slots ? options_.shared_slots
                                          : std::make_shared<slot_table>()) {}

namespace_runtime::~namespace_runtime() = default;

result<std::unique_ptr<namespace_runtime>>
namespace_runtime::open(namespace_runtime_options options) {
  if (::geteuid() != 0)
    return make_status(errc::permission_denied,
                       "the namespace runtime needs root (uid maps, cgroups, veth, nftables)");
  if (auto made = make_private_directories(options.state_dir); !made)
    return made;
  auto cgroups = detect_cgroup_driver(options.cgroups);
  if (!cgroups)
    return cgroups.error();
  if (auto capped = (*cgroups)->limit_all(options.sandboxes_memory_max_mb << 20); !capped)
    return make_status(capped.code, "cannot cap the sandboxes' memory: " + capped.message);
  auto pool = parse_address_pool(options.address_pool);
  if (!pool)
    return pool.error();
  auto seccomp = build_sandbox_seccomp_filter();
  if (!seccomp)
    return seccomp.error();
  if (auto firewall = ensure_firewall(options.net); !firewall)
    return firewall;
  return std::unique_ptr<namespace_runtime>(
    new namespace_runtime(std::move(options), std::move(*cgroups), *pool, std::move(*seccomp)));
}

status namespace_runtime::validate(const sandbox_launch_spec& spec) const {
  auto bad = [&spec](const std::string& why) {
    return make_status(errc::invalid_argument, "sandbox '" + spec.id + "': " + why);
  };
  if (!valid_sandbox_id(spec.id))
    return bad("id must be 1-63 characters of [a-z0-9_-]");
  if (spec.rootfs_path.empty() || spec.rootfs_path[0] != '/' || !is_directory(spec.rootfs_path))
    return bad("rootfs_path must be an existing directory given as an absolute path");
  if (spec.init_argv.empty() || spec.init_argv[0].empty() || spec.init_argv[0][0] != '/')
    return bad("init_argv[0] must be an absolute path inside the rootfs");
  if (spec.limits.memory_mb == 0 || spec.limits.cpu_millis == 0 || spec.limits.pids_max == 0)
    return bad("memory_mb, cpu_millis and pids_max must all be set: an unlimited sandbox can "
               "take the host down");
  return status::ok();
}

uint32_t namespace_runtime::slots() const {
  uint64_t id_ranges =
    options_.ids_per_sandbox == 0
      ? 0
      : ((uint64_t{1} << 32) - options_.id_range_base) / options_.ids_per_sandbox;
  return static_cast<uint32_t>(std::min<uint64_t>({options_.slots_max, pool_.blocks(), id_ranges}));
}

result<sandbox_record> namespace_runtime::plan_record(const sandbox_launch_spec& spec) {
  auto taken = slots_in_use_->take(slots());
  if (!taken)
    return taken.error();
  const uint32_t slot = *taken;
  auto planned = plan_record_in_slot(spec, slot);
  if (!planned)
    slots_in_use_->release(slot);
  return planned;
}

result<sandbox_record> namespace_runtime::plan_record_in_slot(const sandbox_launch_spec& spec,
                                                              uint32_t slot) {
  auto ids = slot_id_range(options_.id_range_base, options_.ids_per_sandbox, slot);
  if (!ids)
    return ids.error();
  sandbox_record record;
  record.id = spec.id;
  record.slot = slot;
  record.uid_base = ids->host_base;
  record.ids_count = ids->count;
  record.cgroup_driver = std::string(cgroups_->name());
  record.network = spec.network.enabled;
  if (record.network) {
    auto addresses = pool_addresses(pool_, slot);
    if (!addresses)
      return addresses.error();
    record.host_interface = host_interface_name(options_.net.interface_prefix, spec.id);
    record.host_address = addresses->host;
    record.sandbox_address = addresses->sandbox;
    record.prefix_length = addresses->prefix_length;
    for (const auto& [other_id, other] : sandboxes_)
      if (other.record.host_interface == record.host_interface)
        return make_status(errc::already_exists, "interface name " + record.host_interface
                                                   + " collides with sandbox " + other_id
                                                   + ": use another id");
  }
  return record;
}

result<sandbox_handle> namespace_runtime::create(const sandbox_launch_spec& spec) {
  if (auto valid = validate(spec); !valid)
    return valid;
  sandbox box;
  {
    std::lock_guard lock(mutex_);
    if (sandboxes_.count(spec.id) != 0)
      return make_status(errc::already_exists, "sandbox " + spec.id + " already exists");
    auto record = plan_record(spec);
    if (!record)
      return with_context(spec.id, record.error());
    box.record = std::move(*record);
    // Holds the id, slot and interface name while the start runs unlocked.
    sandboxes_.emplace(spec.id, sandbox{box.record, unique_fd(), false, phase::starting});
  }
  // The record goes to disk before any resource exists: a crash at any later
  // point leaves something adopt() can find and clean.
  auto started = save_record(options_.state_dir, box.record);
  if (started)
    started = start(spec, box);
  // A teardown that fails part-way may leave the slot's addresses on a veth:
  // the slot then stays taken.
  const bool torn_down = !started && teardown(box).is_ok();
  std::lock_guard lock(mutex_);
  auto it = sandboxes_.find(spec.id);
  if (!started) {
    if (torn_down)
      slots_in_use_->release(box.record.slot);
    sandboxes_.erase(it);
    return with_context(spec.id, started);
  }
  it->second = std::move(box);
  return handle_of(it->second);
}

status namespace_runtime::start(const sandbox_launch_spec& spec, sandbox& box) {
  sandbox_record& rec = box.record;
  cgroup_limits limits;
  limits.memory_bytes = uint64_t{spec.limits.memory_mb} << 20;
  limits.cpu_millis = spec.limits.cpu_millis;
  limits.pids_max = spec.limits.pids_max;
  limits.cpu_request_millis = spec.limits.cpu_request_millis;
  if (auto made = cgroups_->create(rec.id, limits); !made)
    return made;
  reached("cgroup_created");
  if (rec.network && spec.prepare_root)
    if (auto prepared = spec.prepare_root(rec.host_address); !prepared)
      return prepared;
  if (rec.network)
    if (auto added = firewall_add(options_.net, rec.host_interface, rec.sandbox_address); !added)
      return added;
  mount_plan mounts;
  build_mount_plan({spec.rootfs_path, options_.mount_sysfs, options_.dev_shm_size_mb}, mounts);
  exec_arrays exec(spec.init_argv, spec.init_env);
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0)
    return sys_error(errc::resource_exhausted, "socketpair", errno);
  unique_fd sync(pair[0]);
  unique_fd child_end(pair[1]);
  child_plan plan{child_end.get(), rec.id.c_str(),      rec.id.size(),
                  &mounts.ops(),   mounts.host_steps(), spec.channel_fd,
                  spec.stdout_fd,  spec.stderr_fd,      docker_default_capabilities,
                  seccomp_.view(), exec.argv.data(),    exec.envp.data(),
                  sigset_t{},      spec.init_fd,        options_.no_new_privs};
  child_stack stack;
  if (!stack.valid())
    return sys_error(errc::resource_exhausted, "mmap a stack for the sandbox init", errno);
  int pidfd = -1;
  auto pid = clone_child(plan, stack, pidfd);
  if (!pid)
    return pid.error();
  child_end.reset();
  box.pidfd.reset(pidfd);
  child_reaper reaper(pidfd, options_.destroy_timeout_ms);
  reached("cloned");
  rec.init_pid = *pid;
  auto started_at = process_start_time(*pid);
  if (!started_at)
    return started_at.error();
  rec.init_start_time = *started_at;
  if (auto mapped = write_id_maps(*pid, pidfd, {rec.uid_base, rec.ids_count}); !mapped)
    return mapped;
  reached("ids_mapped");
  if (auto joined = cgroups_->attach(rec.id, *pid); !joined)
    return joined;
  reached("cgroup_joined");
  // Lowering a score needs CAP_SYS_RESOURCE, which a host may withhold: the
  // agent then stays at 0 and still outranks its programs (they raise theirs).
  if (auto protected_init = write_control_file("/proc/" + std::to_string(*pid) + "/oom_score_adj",
                                               std::to_string(options_.init_oom_score_adj));
      !protected_init && protected_init.code != errc::permission_denied)
    return protected_init;
  if (auto wired = rec.network
                     ? create_veth(options_.net, rec.host_interface, *pid,
                                   {rec.host_address, rec.sandbox_address, rec.prefix_length})
                     : bring_up_loopback(options_.net, *pid);
      !wired)
    return wired;
  reached("network_wired");
  unique_fd rootfs;
  if (options_.idmap_rootfs) {
    std::string userns_path = "/proc/" + std::to_string(*pid) + "/ns/user";
    unique_fd userns(::open(userns_path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!userns)
      return sys_error(errc::io_error, "open " + userns_path, errno);
    auto tree = open_idmapped_rootfs(spec.rootfs_path, userns.get(), !options_.no_new_privs);
    if (!tree)
      return tree.error();
    rootfs = std::move(*tree);
  }
  // A new boot id for every start: a restore or a fork is a new boot.
  if (auto saved = save_boot_id(options_.state_dir, rec.id); !saved)
    return saved;
  auto boot_id = open_readonly_file_mount(boot_id_path(options_.state_dir, rec.id));
  if (!boot_id)
    return boot_id.error();
  if (auto saved = save_record(options_.state_dir, rec); !saved)
    return saved;
  reached("record_saved");
  if (auto sent = send_go(sync.get(), {rootfs.get(), boot_id->get()}); !sent)
    return sent;
  reached("released");
  auto execed = release_and_wait(box, sync.get(), mounts);
  if (execed)
    reaper.release(); // exec gave the child its own memory
  return execed;
}

void namespace_runtime::reached(std::string_view step) const {
  if (options_.on_start_step)
    options_.on_start_step(step);
}

status namespace_runtime::release_and_wait(sandbox& box, int sync_fd, const mount_plan& mounts) {
  pollfd pfd{sync_fd, POLLIN, 0};
  int ready;
  do {
    ready = ::poll(&pfd, 1, static_cast<int>(options_.start_timeout_ms));
  } while (ready < 0 && errno == EINTR);
  if (ready == 0)
    return make_status(errc::timeout, "init of " + box.record.id + " did not exec within "
                                        + std::to_string(options_.start_timeout_ms) + " ms");
  child_failure failure;
  ssize_t n = ::read(sync_fd, &failure, sizeof failure);
  if (n == 0)
    return status::ok(); // exec closed the child's end
  if (n != static_cast<ssize_t>(sizeof failure))
    return make_status(errc::internal, "garbled report from the sandbox init");
  errc code = failure.step == static_cast<uint32_t>(child_step::exec) ? errc::invalid_argument
                                                                      : errc::internal;
  return make_status(code,
                     "start failed in the sandbox: " + describe_child_failure(failure, mounts));
}

status namespace_runtime::teardown(sandbox& box) {
  const sandbox_record& rec = box.record;
  // Killing pid 1 of the namespace makes the kernel kill every process in
  // it; the cgroup kill catches anything that is in the cgroup without being
  // in the namespace (a half-started child). A frozen process only dies once
  // thawed.
  if (box.pidfd)
    ::syscall(SYS_pidfd_send_signal, box.pidfd.get(), SIGKILL, nullptr, 0);
  (void)cgroups_->kill_all(rec.id);
  (void)cgroups_->thaw(rec.id, options_.freeze_timeout_ms);
  if (box.pidfd)
    if (auto gone = wait_pidfd_exit(box.pidfd.get(), options_.destroy_timeout_ms); !gone)
      return make_status(errc::outcome_unknown, "init of " + rec.id + " survived SIGKILL: "
                                                  + gone.message + "; retry destroy");
  if (auto removed = cgroups_->remove(rec.id, options_.destroy_timeout_ms); !removed)
    return removed;
  if (rec.network) {
    if (auto removed = remove_veth(options_.net, rec.host_interface); !removed)
      return removed;
    if (auto removed = firewall_remove(options_.net, rec.host_interface, rec.sandbox_address);
        !removed)
      return removed;
  }
  // The record goes last: while it exists, adopt() finds what is left.
  if (auto removed = remove_boot_id(options_.state_dir, rec.id); !removed)
    return removed;
  if (auto removed = remove_record(options_.state_dir, rec.id); !removed)
    return removed;
  box.pidfd.reset();
  return status::ok();
}

status namespace_runtime::destroy(std::string_view id) {
  sandbox box;
  {
    std::lock_guard lock(mutex_);
    auto it = sandboxes_.find(id);
    if (it == sandboxes_.end())
      return status::ok();
    if (it->second.state != phase::running)
      return make_status(errc::wrong_state,
                         "sandbox " + std::string(id) + " is being started or destroyed: retry");
    box = std::move(it->second);
    it->second = sandbox{box.record, unique_fd(), box.adopted, phase::stopping};
  }
  auto done = teardown(box);
  std::lock_guard lock(mutex_);
  auto it = sandboxes_.find(id);
  if (!done) {
    it->second = std::move(box); // still there: a retry tears down again
    return with_context(id, done);
  }
  slots_in_use_->release(box.record.slot);
  sandboxes_.erase(it);
  return status::ok();
}

status namespace_runtime::check_running(std::string_view id) const {
  std::lock_guard lock(mutex_);
  auto it = sandboxes_.find(id);
  if (it == sandboxes_.end() || it->second.state != phase::running)
    return make_status(errc::not_found, "no sandbox " + std::string(id));
  return status::ok();
}

status namespace_runtime::pause(std::string_view id) {
  if (auto found = check_running(id); !found)
    return found;
  if (auto frozen = cgroups_->freeze(id, options_.freeze_timeout_ms); !frozen)
    return with_context(id, frozen);
  return status::ok();
}

status namespace_runtime::resume(std::string_view id) {
  if (auto found = check_running(id); !found)
    return found;
  if (auto thawed = cgroups_->thaw(id, options_.freeze_timeout_ms); !thawed)
    return with_context(id, thawed);
  return status::ok();
}

status namespace_runtime::set_limits(std::string_view id, uint32_t cpu_millis, uint32_t memory_mb) {
  if (cpu_millis == 0 || memory_mb == 0)
    return make_status(errc::invalid_argument,
                       "sandbox " + std::string(id) + ": CPU and memory limits must be above 0");
  if (auto found = check_running(id); !found)
    return found;
  // Only the two limits: a driver leaves what is 0 here as it is.
  cgroup_limits limits;
  limits.memory_bytes = uint64_t{memory_mb} << 20;
  limits.cpu_millis = cpu_millis;
  if (auto set = cgroups_->create(id, limits); !set)
    return with_context(id, set);
  return status::ok();
}

result<sandbox_stats> namespace_runtime::stats(std::string_view id) {
  if (auto found = check_running(id); !found)
    return found;
  auto usage = cgroups_->usage(id);
  if (!usage)
    return with_context(id, usage.error());
  return sandbox_stats{usage->memory_bytes, usage->pids_current, usage->cpu_usage_ns,
                       usage->oom_kills, usage->frozen};
}

result<sandbox_stats> namespace_runtime::stats_all() {
  // The parent cgroup's files only: no lock, so a create in progress does not
  // hold up a heartbeat.
  auto usage = cgroups_->usage_all();
  if (!usage)
    return usage.error();
  return sandbox_stats{usage->memory_bytes, usage->pids_current, usage->cpu_usage_ns,
                       usage->oom_kills, usage->frozen};
}

std::vector<sandbox_handle> namespace_runtime::list() const {
  std::lock_guard lock(mutex_);
  std::vector<sandbox_handle> out;
  for (const auto& [id, box] : sandboxes_)
    if (box.state == phase::running)
      out.push_back(handle_of(box));
  return out;
}

sandbox_handle namespace_runtime::handle_of(const sandbox& box) const {
  const sandbox_record& r = box.record;
  sandbox_handle h;
  h.id = r.id;
  h.init_pid = r.init_pid;
  h.init_start_time = r.init_start_time;
  h.pidfd = box.pidfd.get();
  h.slot = r.slot;
  h.uid_base = r.uid_base;
  h.ids_count = r.ids_count;
  h.cgroup_paths = cgroups_->paths(r.id);
  h.netns_path = "/proc/" + std::to_string(r.init_pid) + "/ns/net";
  if (r.network) {
    h.host_interface = r.host_interface;
    h.sandbox_interface = "eth0";
    h.host_address = r.host_address;
    h.sandbox_address = r.sandbox_address;
    h.prefix_length = r.prefix_length;
  }
  h.adopted = box.adopted;
  return h;
}

} // namespace airlock::worker
