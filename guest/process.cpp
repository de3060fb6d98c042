#include "guest/process.hpp"

#include <csignal>
#include <fcntl.h>
#include <grp.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <linux/close_range.h>
#include <sys/syscall.h>

#include "guest/files.hpp"

namespace airlock::guest {

namespace {

/// What the child reports through the exec-status pipe when a step fails.
enum class child_step : int32_t { terminal = 1, user = 2, cwd = 3, exec = 4, stdio = 5 };

struct child_failure {
  int32_t step = 0;
  int32_t error = 0;
};

/// Everything the child needs, prepared before fork so that the child only
/// makes system calls.
struct exec_plan {
  std::string program;
  std::vector<std::string> argv;
  std::vector<std::string> env;
  std::vector<char*> argv_ptrs;
  std::vector<char*> env_ptrs;
  std::string cwd;
  /// cwd is the user's home by default: "/" when it cannot be entered.
  bool cwd_or_root = false;
};

std::string env_value(const schema::exec_spec& request, std::string_view name,
                      std::string_view otherwise) {
  for (const auto& [key, value] : request.env)
    if (key == name)
      return value;
  return std::string(otherwise);
}

std::string env_path(const schema::exec_spec& request) {
  return env_value(request, "PATH", default_path);
}

bool is_executable_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

result<std::string> resolve_program(const std::string& name, const std::string& path_list) {
  if (name.find('/') != std::string::npos)
    return name;
  size_t begin = 0;
  while (begin <= path_list.size()) {
    auto end = path_list.find(':', begin);
    if (end == std::string::npos)
      end = path_list.size();
    auto dir = path_list.substr(begin, end - begin);
    auto candidate = (dir.empty() ? std::string(".") : dir) + "/" + name;
    if (is_executable_file(candidate))
      return candidate;
    begin = end + 1;
  }
  return make_status(errc::not_found, "command not found: " + name);
}

result<exec_plan> make_plan(const schema::exec_spec& request) {
  exec_plan plan;
  if (!request.cmd.empty())
    plan.argv = {"/bin/sh", "-c", request.cmd};
  else
    plan.argv = request.argv;
  if (plan.argv.empty())
    return make_status(errc::invalid_argument, "start needs argv or a shell line");
  auto program = resolve_program(plan.argv[0], env_path(request));
  if (!program)
    return program.error();
  plan.program = std::move(*program);
  for (const auto& [key, value] : request.env) {
    plan.env.push_back(key);
    plan.env.back().append("=").append(value);
  }
  for (auto& arg : plan.argv)
    plan.argv_ptrs.push_back(arg.data());
  plan.argv_ptrs.push_back(nullptr);
  for (auto& entry : plan.env)
    plan.env_ptrs.push_back(entry.data());
  plan.env_ptrs.push_back(nullptr);
  plan.cwd = request.cwd.empty() ? "/" : request.cwd;
  // A process of a named user that names no directory starts in its home
  // (HOME, which the worker sets from the sandbox's /etc/passwd), or in /
  // when there is none to enter (nobody's /nonexistent).
  if (request.cwd.empty() && request.run_as.set_user) {
    auto home = env_value(request, "HOME", "");
    if (!home.empty() && home.front() == '/') {
      plan.cwd = std::move(home);
      plan.cwd_or_root = true;
    }
  }
  return plan;
}

[[noreturn]] void child_fail(int status_fd, child_step step) {
  child_failure failure{static_cast<int32_t>(step), errno};
  [[maybe_unused]] auto n = ::write(status_fd, &failure, sizeof failure);
  ::_exit(127);
}

/// The child's stdio ends: either all three on the PTY slave or three pipes.
struct child_stdio {
  int in = -1;
  int out = -1;
  int err = -1;
  bool terminal = false;
};

[[noreturn]] void run_child(const exec_plan& plan, const schema::exec_spec& request,
                            const child_stdio& stdio, int status_fd) {
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  // Ignored dispositions survive execve; the agent ignores SIGPIPE.
  ::signal(SIGPIPE, SIG_DFL);
  if (stdio.terminal) {
    if (::setsid() < 0 || ::ioctl(stdio.in, TIOCSCTTY, 0) < 0)
      child_fail(status_fd, child_step::terminal);
  } else if (::setpgid(0, 0) < 0) {
    child_fail(status_fd, child_step::terminal);
  }
  if (::dup2(stdio.in, 0) < 0 || ::dup2(stdio.out, 1) < 0 || ::dup2(stdio.err, 2) < 0)
    child_fail(status_fd, child_step::stdio);
  // An OOM kill must take what the agent runs before the agent that serves
  // it: programs score higher. Raising one's own score needs no privilege
  // (lowering the agent's does, and hosts may not grant it); without /proc
  // the program keeps the agent's score.
  if (int adj = ::open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC); adj >= 0) {
    [[maybe_unused]] auto n = ::write(adj, "500", 3);
    ::close(adj);
  }
  if (request.run_as.set_user) {
    gid_t gid = request.run_as.gid;
    if (::setgroups(1, &gid) < 0 || ::setgid(request.run_as.gid) < 0
        || ::setuid(request.run_as.uid) < 0)
      child_fail(status_fd, child_step::user);
  }
  if (::chdir(plan.cwd.c_str()) < 0 && !(plan.cwd_or_root && ::chdir("/") == 0))
    child_fail(status_fd, child_step::cwd);
  // Belt and braces: whatever fd the agent inherited must not reach the program.
  ::syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC);
  ::execve(plan.program.c_str(), plan.argv_ptrs.data(), plan.env_ptrs.data());
  child_fail(status_fd, child_step::exec);
}

status failure_status(const child_failure& failure, const exec_plan& plan) {
  auto error = failure.error;
  switch (static_cast<child_step>(failure.step)) {
    case child_step::terminal: return errno_status(error, "set up the process's terminal");
    case child_step::stdio: return errno_status(error, "set up the process's stdio");
    case child_step::user: return errno_status(error, "switch user");
    case child_step::cwd: return errno_status(error, "change directory to " + plan.cwd);
    case child_step::exec: return errno_status(error, "execute " + plan.program);
  }
  return make_status(errc::internal, "the child reported an unknown failure");
}

status make_pipe(unique_fd& read_end, unique_fd& write_end) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    return errno_status(errno, "create a pipe");
  read_end.reset(fds[0]);
  write_end.reset(fds[1]);
  return status::ok();
}

status set_nonblocking(int fd) {
  int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
    return errno_status(errno, "make an fd non-blocking");
  return status::ok();
}

/// The agent's ends and the child's ends of stdio.
struct stdio_pair {
  spawned_process parent;
  unique_fd child_in, child_out, child_err;
};

status open_terminal(const schema::exec_spec& request, stdio_pair& io) {
  io.parent.pty_master.reset(::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!io.parent.pty_master)
    return errno_status(errno, "open a pseudo-terminal");
  int master = io.parent.pty_master.get();
  if (::grantpt(master) != 0 || ::unlockpt(master) != 0)
    return errno_status(errno, "unlock a pseudo-terminal");
  char name[128] = {};
  if (::ptsname_r(master, name, sizeof name) == 0)
    io.parent.pty_path = name;
  // TIOCGPTPEER opens the slave through the master, not through a path that
  // the sandbox's /dev might not match.
  io.child_in.reset(::ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!io.child_in)
    io.child_in.reset(::open(name, O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!io.child_in)
    return errno_status(errno, "open the terminal's slave side");
  if (auto sized = set_window_size(master, request.rows, request.cols); !sized.is_ok())
    return sized;
  return set_nonblocking(master);
}

status open_pipes(const schema::exec_spec& request, const spawn_settings& settings,
                  stdio_pair& io) {
  unique_fd stdin_write;
  if (auto made = make_pipe(io.child_in, stdin_write); !made.is_ok())
    return made;
  if (auto made = make_pipe(io.parent.stdout_fd, io.child_out); !made.is_ok())
    return made;
  if (auto made = make_pipe(io.parent.stderr_fd, io.child_err); !made.is_ok())
    return made;
  if (settings.pipe_bytes > 0) {
    ::fcntl(io.parent.stdout_fd.get(), F_SETPIPE_SZ, settings.pipe_bytes);
    ::fcntl(io.parent.stderr_fd.get(), F_SETPIPE_SZ, settings.pipe_bytes);
  }
  // Without stdin the child reads EOF at once: the write end is dropped here.
  if (request.stdin_open)
    io.parent.stdin_fd = std::move(stdin_write);
  for (int fd : {io.parent.stdin_fd.get(), io.parent.stdout_fd.get(), io.parent.stderr_fd.get()}) {
    if (fd < 0)
      continue;
    if (auto nb = set_nonblocking(fd); !nb.is_ok())
      return nb;
  }
  return status::ok();
}

/// Waits for execve (EOF on the status pipe) or a failure report.
status await_exec(pid_t pid, unique_fd status_read, const exec_plan& plan) {
  child_failure failure;
  size_t got = 0;
  while (got < sizeof failure) {
    auto n =
      ::read(status_read.get(), reinterpret_cast<char*>(&failure) + got, sizeof failure - got);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    got += static_cast<size_t>(n);
  }
  if (got < sizeof failure)
    return status::ok();
  // The child exits at once; reap it here so that no one reports it as an orphan.
  while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
  }
  return failure_status(failure, plan);
}

} // namespace

status set_window_size(int pty_master, uint16_t rows, uint16_t cols) {
  struct winsize size {};
  size.ws_row = rows == 0 ? 24 : rows;
  size.ws_col = cols == 0 ? 80 : cols;
  if (::ioctl(pty_master, TIOCSWINSZ, &size) != 0)
    return errno_status(errno, "set the terminal size");
  return status::ok();
}

result<spawned_process> spawn_process(const schema::exec_spec& request,
                                      const spawn_settings& settings) {
  auto plan = make_plan(request);
  if (!plan)
    return plan.error();
  stdio_pair io;
  auto opened = request.pty ? open_terminal(request, io) : open_pipes(request, settings, io);
  if (!opened.is_ok())
    return opened;
  child_stdio stdio;
  stdio.terminal = request.pty;
  stdio.in = io.child_in.get();
  stdio.out = request.pty ? io.child_in.get() : io.child_out.get();
  stdio.err = request.pty ? io.child_in.get() : io.child_err.get();
  unique_fd status_read, status_write;
  if (auto made = make_pipe(status_read, status_write); !made.is_ok())
    return made;
  pid_t pid = ::fork();
  if (pid < 0)
    return errno_status(errno, "fork");
  if (pid == 0)
    run_child(*plan, request, stdio, status_write.get());
  status_write.reset();
  io.child_in.reset();
  io.child_out.reset();
  io.child_err.reset();
  if (auto execed = await_exec(pid, std::move(status_read), *plan); !execed.is_ok())
    return execed;
  io.parent.pid = pid;
  return std::move(io.parent);
}

} // namespace airlock::guest
