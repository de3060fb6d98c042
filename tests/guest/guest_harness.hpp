#pragma once
// Runs the real airlock-guest binary as a child connected by a socketpair and
// hands out a guest_client to drive it. Every wait is bounded.

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "guest/client.hpp"

namespace airlock::guest::testing {

/// A running airlock-guest; the destructor closes the channel and waits
/// (bounded) for the agent to exit, killing it if it does not.
class guest_process {
public:
  /// With `pid_namespace` the agent is PID 1 of a new pid namespace, as in a
  /// sandbox; that needs CAP_SYS_ADMIN, so it may return nullptr.
  static std::unique_ptr<guest_process> spawn(std::vector<std::string> extra_args = {},
                                              client_options options = {},
                                              bool pid_namespace = false) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
      return nullptr;
    std::vector<std::string> args = {AIRLOCK_GUEST_BINARY, "--fd", "3"};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    std::vector<char*> argv;
    for (auto& arg : args)
      argv.push_back(arg.data());
    argv.push_back(nullptr);
    // clone without a stack behaves as fork, and can open a pid namespace.
    unsigned long flags = SIGCHLD | (pid_namespace ? CLONE_NEWPID : 0);
    auto pid = static_cast<pid_t>(::syscall(SYS_clone, flags, nullptr, nullptr, nullptr, nullptr));
    if (pid < 0) {
      ::close(sv[0]);
      ::close(sv[1]);
      return nullptr;
    }
    if (pid == 0) {
      // dup2 clears close-on-exec; fd 3 is the agent's channel.
      if (sv[1] == 3)
        ::fcntl(3, F_SETFD, 0);
      else
        ::dup2(sv[1], 3);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    ::close(sv[1]);
    auto process = std::unique_ptr<guest_process>(new guest_process(pid, sv[0], options));
    return process;
  }

  ~guest_process() {
    client_.reset();
    if (!exit_status_)
      wait_exit(5000);
    if (!exit_status_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }

  guest_client& client() { return *client_; }
  pid_t pid() const { return pid_; }

  /// Closes the host's end of the channel.
  void disconnect() { client_.reset(); }

  /// The agent's wait status once it exited within the timeout.
  std::optional<int> wait_exit(int timeout_ms) {
    if (exit_status_)
      return exit_status_;
    int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0));
    if (pidfd >= 0) {
      pollfd p{pidfd, POLLIN, 0};
      ::poll(&p, 1, timeout_ms);
      ::close(pidfd);
    }
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_)
      exit_status_ = status;
    return exit_status_;
  }

private:
  guest_process(pid_t pid, int fd, client_options options)
      : pid_(pid), client_(std::make_unique<guest_client>(unique_fd(fd), options)) {}

  pid_t pid_;
  std::unique_ptr<guest_client> client_;
  std::optional<int> exit_status_;
};

} // namespace airlock::guest::testing
