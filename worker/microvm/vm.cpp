#include "worker/microvm/vm.hpp"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "worker/command/command.hpp"
#include "worker/microvm/vmm_jail.hpp"
#include "worker/runtime/sys.hpp"

namespace airlock::worker::microvm {
namespace {

/// Descriptors the child moves to 3 and 4 are first put above this, so that
/// dup2 never copies one over the other.
constexpr int spare_fd_floor = 16;

status errno_status(errc code, const std::string& what) {
  return make_status(code, what + ": " + std::strerror(errno));
}

result<unique_fd> listen_unix(const std::string& path) {
  sockaddr_un address{};
  if (path.size() >= sizeof address.sun_path)
    return make_status(errc::invalid_argument, "socket path too long: " + path);
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  ::unlink(path.c_str());
  unique_fd listener(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!listener
      || ::bind(listener.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) != 0
      || ::listen(listener.get(), 4) != 0)
    return errno_status(errc::io_error, "listen on " + path);
  return listener;
}

std::string tail_of(const std::string& path, size_t bytes) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::string all = text.str();
  return all.size() > bytes ? all.substr(all.size() - bytes) : all;
}

/// In the child: says which jail step failed on the log (fd 2) and exits.
[[noreturn]] void child_fail(const char* step) {
  const char prefix[] = "airlock: starting QEMU failed: ";
  (void)!::write(2, prefix, sizeof prefix - 1);
  (void)!::write(2, step, std::strlen(step));
  (void)!::write(2, "\n", 1);
  ::_exit(126);
}

/// In the child (already in its own namespaces when `jail` is set), after the
/// descriptors are in place: the jail's layers.
void enter_jail(const vm_options& options, gid_t kvm_group, const mount_plan* jail) {
  if (jail != nullptr) {
    size_t failed = 0;
    if (apply_mount_plan(jail->ops(), 0, jail->ops().size(), {}, failed) != 0)
      child_fail("build the VMM's mount namespace");
  }
  if (options.vmm_uid != 0) {
    if (::setgroups(kvm_group != 0 ? 1 : 0, &kvm_group) != 0
        || ::setresgid(options.vmm_gid, options.vmm_gid, options.vmm_gid) != 0
        || ::setresuid(options.vmm_uid, options.vmm_uid, options.vmm_uid) != 0)
      child_fail("drop to the VMM's uid and gid");
  }
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
    child_fail("set no_new_privs");
}

/// Forks and execs `argv` with `channel` as fd 3, `qmp` as fd 4, `tap` (when
/// >= 0) as fd 5, stdin from
/// /dev/null, stdout and stderr to `log`, no other descriptor, an empty
/// environment, a session of its own and the jail of `options`; with `jail`,
/// in new pid, mount, network, IPC and UTS namespaces, the mount namespace
/// built by that plan. Everything the child touches is prepared here: between
/// fork and exec it makes only async-signal-safe calls.
result<pid_t> spawn(const std::vector<std::string>& argv, int channel, int qmp, int tap, int log,
                    const vm_options& options, gid_t kvm_group, const mount_plan* jail,
                    const std::function<status(pid_t)>& before_exec) {
  // The child waits for one byte on `go` before it execs: the parent's
  // before_exec (joining a cgroup) happens before QEMU runs any code.
  int go_pipe[2];
  if (::pipe2(go_pipe, O_CLOEXEC) != 0)
    return errno_status(errc::io_error, "microvm: pipe");
  unique_fd go_read(go_pipe[0]);
  unique_fd go_write(go_pipe[1]);
  unique_fd spare_channel(::fcntl(channel, F_DUPFD_CLOEXEC, spare_fd_floor));
  unique_fd spare_qmp(::fcntl(qmp, F_DUPFD_CLOEXEC, spare_fd_floor));
  unique_fd spare_tap(tap >= 0 ? ::fcntl(tap, F_DUPFD_CLOEXEC, spare_fd_floor) : -1);
  unique_fd null_fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!spare_channel || !spare_qmp || !null_fd || (tap >= 0 && !spare_tap))
    return errno_status(errc::io_error, "prepare QEMU's descriptors");
  std::vector<char*> args;
  for (const auto& arg : argv)
    args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  char* env[] = {nullptr};
  // clone as fork with namespace flags: QEMU is pid 1 of its own pid
  // namespace, which only it and nothing else lives in.
  const unsigned long namespaces =
    jail != nullptr ? CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS : 0;
  pid_t pid = static_cast<pid_t>(
    ::syscall(SYS_clone, SIGCHLD | namespaces, nullptr, nullptr, nullptr, nullptr));
  if (pid < 0)
    return errno_status(errc::resource_exhausted, "clone QEMU");
  if (pid == 0) {
    // Until the go, the child dies with the worker and holds nothing of its
    // but what QEMU gets: a worker killed meanwhile leaves no process that
    // keeps the data directory's lock or its ports (with the worker's copy of
    // `go_write` gone, the read below sees end-of-file).
    const int own[] = {go_read.get(),       null_fd.get(),   log,
                       spare_channel.get(), spare_qmp.get(), spare_tap.get()};
    if (die_with_parent(SIGKILL) != 0 || close_fds_except(own, std::size(own)) != 0)
      ::_exit(125);
    char go = 0;
    if (::read(go_read.get(), &go, 1) != 1)
      ::_exit(125); // the parent gave up
    ::setsid();
    if (::dup2(null_fd.get(), 0) < 0 || ::dup2(log, 1) < 0 || ::dup2(log, 2) < 0
        || ::dup2(spare_channel.get(), channel_fd_in_vmm) < 0
        || ::dup2(spare_qmp.get(), qmp_fd_in_vmm) < 0
        || (spare_tap && ::dup2(spare_tap.get(), tap_fd_in_vmm) < 0))
      ::_exit(127);
    ::syscall(SYS_close_range, (spare_tap ? tap_fd_in_vmm : qmp_fd_in_vmm) + 1, ~0U, 0);
    enter_jail(options, kvm_group, jail);
    // A running VM outlives the thread that started it (a restarted worker
    // finds and ends it: microvm adopt).
    if (die_with_parent(0) != 0)
      child_fail("clear the parent-death signal");
    ::execve(args[0], args.data(), env);
    child_fail("execute QEMU");
  }
  go_read.reset();
  if (before_exec) {
    if (auto done = before_exec(pid); !done.is_ok()) {
      go_write.reset(); // EOF: the child exits without running QEMU
      ::waitpid(pid, nullptr, 0);
      return done;
    }
  }
  const char go = 1;
  if (::write(go_write.get(), &go, 1) != 1) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    return errno_status(errc::io_error, "microvm: start QEMU");
  }
  return pid;
}

} // namespace

result<std::unique_ptr<vm>> vm::start(const vm_spec& spec, const std::string& run_dir,
                                      const vm_options& options,
                                      const std::function<status(pid_t)>& before_exec) {
  if (spec.guest.kernel_path.empty() || spec.guest.initrd_path.empty())
    return make_status(errc::invalid_argument, "microvm: the guest kernel or initramfs is missing");
  std::string binary = find_program(options.qemu_binary, default_command_path);
  if (binary.empty())
    return make_status(errc::not_found, "microvm: " + options.qemu_binary + " not found");
  std::unique_ptr<vm> self(new vm());
  self->options_ = options;
  self->qmp_path_ = run_dir + "/" + spec.id + ".qmp";
  self->vmm_log_path_ = run_dir + "/" + spec.id + ".vmm.log";
  auto qmp_listener = listen_unix(self->qmp_path_);
  if (!qmp_listener)
    return qmp_listener.error();
  unique_fd vm_end;
  if (spec.channel_fd >= 0) {
    vm_end.reset(::fcntl(spec.channel_fd, F_DUPFD_CLOEXEC, 0));
    if (!vm_end)
      return errno_status(errc::invalid_argument, "microvm: the channel descriptor");
  } else {
    int pair[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0)
      return errno_status(errc::io_error, "microvm: channel socketpair");
    self->channel_.reset(pair[0]);
    vm_end.reset(pair[1]);
  }
  unique_fd log(
    ::open(self->vmm_log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (!log)
    return errno_status(errc::io_error, "microvm: open " + self->vmm_log_path_);
  const auto files = files_of(spec, options.firmware);
  // QEMU opens its writable files by path after it has dropped to the VMM's
  // ids; the jail binds them, so they exist first.
  for (const auto& path : files.writable) {
    unique_fd file(::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
    if (!file
        || (options.vmm_uid != 0 && ::fchown(file.get(), options.vmm_uid, options.vmm_gid) != 0))
      return errno_status(errc::io_error, "microvm: give " + path + " to the VMM's uid");
  }
  auto argv = qemu_argv(spec, binary, options.firmware, options.seccomp);
  // Under KVM a dropped uid keeps /dev/kvm's group (Debian: kvm, mode 0660)
  // as its only supplementary group.
  gid_t kvm_group = 0;
  struct stat kvm_stat {};
  if (spec.accel == accelerator::kvm && options.vmm_uid != 0 && ::stat("/dev/kvm", &kvm_stat) == 0)
    kvm_group = kvm_stat.st_gid;
  mount_plan jail;
  if (options.unshare) {
    self->jail_root_ = run_dir + "/" + spec.id + ".jail";
    if (::mkdir(self->jail_root_.c_str(), 0700) != 0 && errno != EEXIST)
      return errno_status(errc::io_error, "microvm: make " + self->jail_root_);
    vmm_jail_spec where{self->jail_root_, files.read_only, files.writable, {}};
    if (spec.accel == accelerator::kvm)
      where.devices.push_back("/dev/kvm");
    if (auto planned = build_vmm_jail_plan(where, jail); !planned.is_ok())
      return planned;
  }
  auto pid = spawn(argv, vm_end.get(), qmp_listener->get(), spec.network.tap_fd, log.get(), options,
                   kvm_group, options.unshare ? &jail : nullptr, before_exec);
  // QEMU holds the listener now. Ours is closed, so that a QEMU that exits
  // early resets the QMP connection at once instead of leaving it queued.
  qmp_listener->reset();
  if (!pid) {
    ::unlink(self->qmp_path_.c_str());
    ::unlink(self->vmm_log_path_.c_str());
    if (!self->jail_root_.empty())
      ::rmdir(self->jail_root_.c_str());
    return pid.error();
  }
  self->pid_ = *pid;
  self->pidfd_.reset(static_cast<int>(::syscall(SYS_pidfd_open, *pid, 0)));
  // The listener is QEMU's now: connecting queues on it at once, and QMP
  // greets once QEMU's main loop runs.
  auto qmp = qmp_client::connect(self->qmp_path_, static_cast<int>(options.qmp_timeout_ms));
  if (!qmp) {
    std::string why = qmp.error().message + "; QEMU said: " + tail_of(self->vmm_log_path_, 600);
    (void)self->stop();
    return make_status(errc::unavailable, "microvm: QEMU did not start: " + why);
  }
  self->qmp_.emplace(std::move(*qmp));
  return self;
}

vm::~vm() { (void)stop(); }

namespace {

int64_t monotonic_ms() {
  return static_cast<int64_t>(worker::monotonic_ms()); // signed: deadlines are subtracted
}

int left_ms(int64_t deadline) {
  return static_cast<int>(std::max<int64_t>(1, deadline - monotonic_ms()));
}

constexpr const char* state_fd_name = "airlock-state";
/// x-ignore-shared on: RAM mapped shared from a file stays out of the
/// stream. Off for a VM whose RAM is not such a file (a clone's private
/// mapping), whose stream carries its RAM; QEMU refuses to load a stream
/// saved with another setting, so a load sets what the save did.
std::string ignore_shared_capability(bool ram_in_file) {
  return std::string(R"({"capabilities": [{"capability": "x-ignore-shared", "state": )")
         + (ram_in_file ? "true" : "false") + "}]}";
}
/// QEMU throttles a migration to 128 MiB/s by default, which is meant for a
/// network link; a save into a local file of a VM whose RAM is in the stream
/// (a clone's) would take ~1 s per 128 MiB written. 64 GiB/s: no throttle.
constexpr const char* unthrottled_parameters = R"({"max-bandwidth": 68719476736})";

/// Polls query-migrate until it reports completed (ok) or failed, or the
/// deadline passes. Migration of device state alone takes milliseconds, so
/// the poll backs off from 1 ms.
status await_migration(qmp_client& qmp, int64_t deadline, const char* what) {
  int pause_us = 1000;
  for (;;) {
    auto reply = qmp.execute("query-migrate", "", left_ms(deadline));
    if (!reply)
      return reply.error();
    auto parsed = nlohmann::json::parse(*reply, nullptr, false);
    std::string state = parsed.is_object() ? parsed.value("status", std::string()) : "";
    if (state == "completed")
      return status::ok();
    if (state == "failed" || state == "cancelled")
      return make_status(errc::io_error,
                         std::string("microvm: ") + what + " failed: "
                           + (parsed.is_object() ? parsed.value("error-desc", state) : state));
    if (monotonic_ms() >= deadline)
      return make_status(errc::timeout, std::string("microvm: ") + what + " did not complete in "
                                          + "time (state '" + state + "')");
    ::usleep(static_cast<useconds_t>(pause_us));
    pause_us = std::min(pause_us * 2, 20'000);
  }
}

} // namespace

status vm::save_state(const std::string& state_path, int timeout_ms, bool ram_in_file) {
  if (!qmp_)
    return make_status(errc::wrong_state, "microvm: the VM is stopped");
  const int64_t deadline = monotonic_ms() + timeout_ms;
  if (auto stopped = qmp_->execute("stop", "", left_ms(deadline)); !stopped)
    return stopped.error();
  if (auto set = qmp_->execute("migrate-set-capabilities", ignore_shared_capability(ram_in_file),
                               left_ms(deadline));
      !set)
    return set.error();
  if (auto unthrottled =
        qmp_->execute("migrate-set-parameters", unthrottled_parameters, left_ms(deadline));
      !unthrottled)
    return unthrottled.error();
  unique_fd state(::open(state_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (!state)
    return errno_status(errc::io_error, "microvm: create " + state_path);
  if (auto passed =
        qmp_->execute_with_fd("getfd", std::string(R"({"fdname": ")") + state_fd_name + "\"}",
                              state.get(), left_ms(deadline));
      !passed)
    return passed.error();
  state.reset(); // QEMU has its own copy now
  if (auto started = qmp_->execute(
        "migrate", std::string(R"({"uri": "fd:)") + state_fd_name + "\"}", left_ms(deadline));
      !started)
    return started.error();
  return await_migration(*qmp_, deadline, "saving the VM's state");
}

status vm::attach_channel(int fd, int timeout_ms) {
  if (!qmp_)
    return make_status(errc::wrong_state, "microvm: the VM is stopped");
  const int64_t deadline = monotonic_ms() + timeout_ms;
  if (auto passed =
        qmp_->execute_with_fd("getfd", R"({"fdname": "channel"})", fd, left_ms(deadline));
      !passed)
    return passed.error();
  if (auto added =
        qmp_->execute("chardev-add",
                      R"({"id": "channel", "backend": {"type": "socket", "data": )"
                      R"({"addr": {"type": "fd", "data": {"str": "channel"}}, "server": false}}})",
                      left_ms(deadline));
      !added)
    return added.error();
  if (auto port = qmp_->execute("device_add",
                                R"({"driver": "virtserialport", "chardev": "channel", "name": ")"
                                  + std::string(channel_port_name) + "\"}",
                                left_ms(deadline));
      !port)
    return port.error();
  return status::ok();
}

status vm::load_state(const std::string& state_path, int timeout_ms, bool ram_in_file) {
  if (!qmp_)
    return make_status(errc::wrong_state, "microvm: the VM is stopped");
  const int64_t deadline = monotonic_ms() + timeout_ms;
  if (auto set = qmp_->execute("migrate-set-capabilities", ignore_shared_capability(ram_in_file),
                               left_ms(deadline));
      !set)
    return set.error();
  unique_fd state(::open(state_path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!state)
    return errno_status(errc::not_found, "microvm: open " + state_path);
  if (auto passed =
        qmp_->execute_with_fd("getfd", std::string(R"({"fdname": ")") + state_fd_name + "\"}",
                              state.get(), left_ms(deadline));
      !passed)
    return passed.error();
  state.reset();
  if (auto started =
        qmp_->execute("migrate-incoming", std::string(R"({"uri": "fd:)") + state_fd_name + "\"}",
                      left_ms(deadline));
      !started)
    return started.error();
  return await_migration(*qmp_, deadline, "loading the VM's state");
}

bool vm::wait_exit(int timeout_ms) {
  if (reaped_)
    return true;
  if (pidfd_) {
    pollfd p{pidfd_.get(), POLLIN, 0};
    if (::poll(&p, 1, timeout_ms) <= 0)
      return false;
  }
  int wstatus = 0;
  pid_t got = ::waitpid(pid_, &wstatus, pidfd_ ? 0 : WNOHANG);
  if (got == pid_ || (got < 0 && errno == ECHILD))
    reaped_ = true;
  return reaped_;
}

status vm::stop() {
  status outcome = status::ok();
  if (pid_ > 0 && !reaped_) {
    if (qmp_)
      (void)qmp_->execute("quit", "", static_cast<int>(options_.stop_timeout_ms));
    if (!wait_exit(static_cast<int>(options_.stop_timeout_ms))) {
      if (pidfd_)
        ::syscall(SYS_pidfd_send_signal, pidfd_.get(), SIGKILL, nullptr, 0);
      else
        ::kill(pid_, SIGKILL);
      wait_exit(-1);
      outcome = make_status(errc::io_error, "microvm: QEMU ignored quit and was killed");
    }
  }
  qmp_.reset();
  channel_.reset();
  pidfd_.reset();
  if (!qmp_path_.empty())
    ::unlink(qmp_path_.c_str());
  if (!vmm_log_path_.empty())
    ::unlink(vmm_log_path_.c_str());
  // Only QEMU's mount namespace had the tmpfs on it: the host's is empty.
  if (!jail_root_.empty())
    ::rmdir(jail_root_.c_str());
  return outcome;
}

} // namespace airlock::worker::microvm
