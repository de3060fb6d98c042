#include "worker/runtime/child.hpp"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "worker/command/command.hpp"
#include "worker/runtime/caps.hpp"
#include "worker/runtime/seccomp_filter.hpp"

namespace airlock::worker {
namespace {

[[noreturn]] void fail(int sync_fd, child_step step, int err, uint64_t detail = 0) noexcept {
  child_failure report{static_cast<uint32_t>(step), err, detail};
  (void)!::write(sync_fd, &report, sizeof report);
  ::_exit(127);
}

/// Blocks until the worker says go; returns the mounts it sent (-1 for each
/// it sent none of). The byte says which: 'G' plus 1 for a rootfs, plus 2 for
/// a boot_id file, in that order. EOF means the worker gave up: exit quietly.
mount_fds receive_go(int sync_fd) noexcept {
  char byte = 0;
  iovec io{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(2 * sizeof(int))] = {};
  msghdr message{};
  message.msg_iov = &io;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof control;
  ssize_t n;
  do {
    n = ::recvmsg(sync_fd, &message, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n == 0)
    ::_exit(0);
  const int which = byte - 'G';
  if (n < 0 || which < 0 || which > 3)
    fail(sync_fd, child_step::receive_go, n < 0 ? errno : EPROTO);
  int fds[2] = {-1, -1};
  size_t count = 0;
  for (cmsghdr* c = CMSG_FIRSTHDR(&message); c != nullptr; c = CMSG_NXTHDR(&message, c))
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      std::memcpy(fds, CMSG_DATA(c), std::min<size_t>(count, 2) * sizeof(int));
    }
  const size_t expected = (which & 1) + ((which >> 1) & 1);
  if (count != expected)
    fail(sync_fd, child_step::receive_go, EPROTO);
  mount_fds out;
  size_t next = 0;
  if ((which & 1) != 0)
    out.rootfs = fds[next++];
  if ((which & 2) != 0)
    out.boot_id = fds[next++];
  return out;
}

/// Moves `fd` to `target`. The sources are first lifted above the targets so
/// that one placement cannot clobber a source still to be placed.
int place_fds(const child_plan& plan) noexcept {
  int null_fd = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null_fd < 0)
    return errno;
  int sources[4] = {null_fd, plan.stdout_fd < 0 ? null_fd : plan.stdout_fd,
                    plan.stderr_fd < 0 ? null_fd : plan.stderr_fd, plan.channel_fd};
  int lifted[4];
  for (int i = 0; i < 4; ++i) {
    lifted[i] = sources[i] < 0 ? -1 : ::fcntl(sources[i], F_DUPFD_CLOEXEC, 10);
    if (sources[i] >= 0 && lifted[i] < 0)
      return errno;
  }
  for (int target = 0; target < 4; ++target)
    if (lifted[target] >= 0 && ::dup2(lifted[target], target) < 0)
      return errno;
  // Everything else the worker had open (other sandboxes' channels, store
  // files) must not reach the sandbox; the sync socket closes at exec.
  unsigned first_other = plan.channel_fd < 0 ? 3U : 4U;
  if (::syscall(SYS_close_range, first_other, ~0U, CLOSE_RANGE_CLOEXEC) != 0)
    return errno;
  return 0;
}

/// The worker's handlers point into its memory: back to the default before
/// signals are unblocked (exec would reset them too, but only after).
void reset_signal_handlers() noexcept {
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  for (int signo = 1; signo < NSIG; ++signo) {
    struct sigaction current {};
    if (::sigaction(signo, nullptr, &current) == 0 && current.sa_handler != SIG_DFL
        && current.sa_handler != SIG_IGN)
      ::sigaction(signo, &default_action, nullptr);
  }
}

} // namespace

void run_child(const child_plan& plan) noexcept {
  // Step 0 (child.hpp): nothing of the worker's outlives the worker here.
  const int own[] = {plan.sync_fd, plan.exec_fd, plan.channel_fd, plan.stdout_fd, plan.stderr_fd};
  if (die_with_parent(SIGKILL) != 0 || close_fds_except(own, std::size(own)) != 0)
    ::_exit(126);
  // Lifted above 0-3 so that placing the init's fds cannot close it.
  const int sync = ::fcntl(plan.sync_fd, F_DUPFD_CLOEXEC, 10);
  if (sync < 0)
    ::_exit(126);
  // Lifted too: the init's fds 0-3 must not land on it.
  const int exec_fd = plan.exec_fd < 0 ? -1 : ::fcntl(plan.exec_fd, F_DUPFD_CLOEXEC, 10);
  if (plan.exec_fd >= 0 && exec_fd < 0)
    ::_exit(126);
  const mount_fds fds = receive_go(sync);
  // Raw system calls: glibc's wrappers would broadcast the change to every
  // thread it believes exists, and after clone3 its list still names all the
  // worker's threads (a cost that grows with the sandboxes running).
  if (::syscall(SYS_setgroups, 0, nullptr) != 0)
    fail(sync, child_step::setgroups, errno);
  if (::unshare(CLONE_NEWCGROUP) != 0)
    fail(sync, child_step::unshare_cgroup, errno);
  if (::sethostname(plan.hostname, plan.hostname_length) != 0)
    fail(sync, child_step::sethostname, errno);
  const auto& mounts = *plan.mounts;
  size_t failed_mount = 0;
  if (int err = apply_mount_plan(mounts, 0, plan.mount_host_steps, fds, failed_mount); err != 0)
    fail(sync, child_step::mount, err, failed_mount);
  if (::syscall(SYS_setresgid, 0, 0, 0) != 0)
    fail(sync, child_step::setresgid, errno);
  if (::syscall(SYS_setresuid, 0, 0, 0) != 0)
    fail(sync, child_step::setresuid, errno);
  if (int err = apply_mount_plan(mounts, plan.mount_host_steps, mounts.size(), fds, failed_mount);
      err != 0)
    fail(sync, child_step::mount, err, failed_mount);
  for (int fd : {fds.rootfs, fds.boot_id})
    if (fd >= 0)
      ::close(fd);
  ::umask(022);
  if (int err = place_fds(plan); err != 0)
    fail(sync, child_step::file_descriptors, err);
  // From here on a dead worker leaves a sandbox to adopt: its record with
  // this pid is on disk before the go.
  if (int err = die_with_parent(0); err != 0)
    fail(sync, child_step::file_descriptors, err);
  if (plan.no_new_privs) {
    if (int err = drop_capabilities(plan.capabilities); err != 0)
      fail(sync, child_step::capabilities, err);
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
      fail(sync, child_step::no_new_privs, errno);
    if (int err = install_seccomp_filter(plan.seccomp); err != 0)
      fail(sync, child_step::seccomp, err);
  } else {
    // Without no_new_privs the kernel takes a filter only from a task with
    // CAP_SYS_ADMIN (in its user namespace): installed before the
    // capabilities go. The filter allows what dropping them takes (prctl,
    // capset) and the exec.
    if (int err = install_seccomp_filter(plan.seccomp); err != 0)
      fail(sync, child_step::seccomp, err);
    if (int err = drop_capabilities(plan.capabilities); err != 0)
      fail(sync, child_step::capabilities, err);
  }
  reset_signal_handlers();
  ::sigprocmask(SIG_SETMASK, &plan.signal_mask, nullptr);
  // A static binary runs from a close-on-exec descriptor; the descriptor
  // is gone once it runs.
  if (exec_fd >= 0)
    ::syscall(SYS_execveat, exec_fd, "", plan.argv, plan.envp, AT_EMPTY_PATH);
  else
    ::execve(plan.argv[0], plan.argv, plan.envp);
  fail(sync, child_step::exec, errno);
}

std::string describe_child_failure(const child_failure& failure, const mount_plan& mounts) {
  static const char* const names[] = {"?",
                                      "receive the start signal",
                                      "drop supplementary groups",
                                      "unshare the cgroup namespace",
                                      "set the hostname",
                                      "mount",
                                      "setresgid(0)",
                                      "setresuid(0)",
                                      "arrange file descriptors",
                                      "drop capabilities",
                                      "set no_new_privs",
                                      "install the seccomp filter",
                                      "execute the init"};
  uint32_t step = failure.step < std::size(names) ? failure.step : 0;
  std::string what = names[step];
  if (failure.step == static_cast<uint32_t>(child_step::mount))
    what = mounts.describe(static_cast<size_t>(failure.detail));
  return what + ": " + std::strerror(failure.error);
}

} // namespace airlock::worker
