#include "worker/command/command.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>

#include "schema/unique_fd.hpp"

extern char** environ; // NOLINT: POSIX declares it nowhere else

namespace airlock::worker {

namespace {

using clock_type = std::chrono::steady_clock;

// A tool that outlives its own exit through a grandchild holding the pipe (a
// daemon) is cut off after this long.
constexpr auto orphan_pipe_grace = std::chrono::seconds(2);
// SIGTERM first so that debootstrap can unmount what it mounted.
constexpr auto term_grace = std::chrono::seconds(3);
// The stack a tool's child runs on until it execs: a few system calls deep.
constexpr size_t child_stack_bytes = 64 << 10;
// A line without a newline is handed over once it is this long.
constexpr size_t line_bytes_max = size_t{64} * 1024;
// How often a running tool is checked for cancel and its deadline.
constexpr int poll_interval_ms = 100;

status errno_failure(errc code, const std::string& what, int err) {
  return make_status(code, what + ": " + std::strerror(err));
}

std::string_view env_key(std::string_view entry) { return entry.substr(0, entry.find('=')); }

std::vector<std::string> build_env(const command_options& options) {
  std::vector<std::string> env;
  for (char** entry = environ; !options.clean_env && entry != nullptr && *entry != nullptr;
       ++entry) {
    std::string_view text(*entry);
    bool replaced = false;
    for (const auto& item : options.env)
      replaced = replaced || env_key(item) == env_key(text);
    if (!replaced)
      env.emplace_back(text);
  }
  env.insert(env.end(), options.env.begin(), options.env.end());
  return env;
}

std::string path_of(const std::vector<std::string>& env) {
  for (const auto& item : env)
    if (env_key(item) == "PATH")
      return item.substr(5);
  return std::string(default_command_path);
}

std::vector<char*> c_strings(std::vector<std::string>& items) {
  std::vector<char*> out;
  out.reserve(items.size() + 1);
  for (auto& item : items)
    out.push_back(item.data());
  out.push_back(nullptr);
  return out;
}

std::string command_line(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& arg : argv)
    out += (out.empty() ? "" : " ") + arg;
  return out;
}

/// Splits what the tool writes into lines and keeps the end of it.
class output_collector {
public:
  explicit output_collector(const command_options& options) : options_(options) {}

  void consume(const char* data, size_t size) {
    kept_.append(data, size);
    if (kept_.size() > options_.output_bytes_max * 2)
      trim();
    if (!options_.on_line)
      return;
    partial_.append(data, size);
    size_t start = 0;
    for (size_t nl = partial_.find('\n'); nl != std::string::npos;
         nl = partial_.find('\n', start)) {
      emit(std::string_view(partial_).substr(start, nl - start));
      start = nl + 1;
    }
    partial_.erase(0, start);
    if (partial_.size() > line_bytes_max) {
      emit(partial_);
      partial_.clear();
    }
  }

  void finish(command_result& out) {
    if (!partial_.empty())
      emit(partial_);
    partial_.clear();
    trim();
    out.output = std::move(kept_);
    out.output_cut = cut_;
  }

private:
  void trim() {
    if (kept_.size() <= options_.output_bytes_max)
      return;
    kept_.erase(0, kept_.size() - options_.output_bytes_max);
    cut_ = true;
  }

  void emit(std::string_view line) {
    if (!line.empty() && line.back() == '\r')
      line.remove_suffix(1);
    options_.on_line(line);
  }

  const command_options& options_;
  std::string partial_;
  std::string kept_;
  bool cut_ = false;
};

/// Everything the child needs, prepared before it starts so that the child
/// makes only async-signal-safe calls (it runs on the worker's memory).
struct spawn_plan {
  pid_t parent = 0; ///< the worker's pid: a child that sees another parent lost it
  std::string program;
  std::vector<char*> argv;
  std::vector<char*> envp;
  int stdin_fd = -1;
  int output_fd = -1;
  int netns_fd = -1;
};

[[noreturn]] void exec_child(const spawn_plan& plan) {
  // A tool whose worker died has no one to report to. SIGTERM, not SIGKILL,
  // so that debootstrap still unmounts what it mounted. Checked again after
  // asking: the worker may have died before.
  if (die_with_parent(SIGTERM) != 0 || ::getppid() != plan.parent)
    ::_exit(126);
  // Its own process group, so that a kill reaches everything it starts.
  ::setpgid(0, 0);
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  for (int signo = 1; signo < NSIG; ++signo)
    ::sigaction(signo, &default_action, nullptr);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  if (plan.netns_fd >= 0 && ::setns(plan.netns_fd, CLONE_NEWNET) != 0)
    ::_exit(126);
  if (::dup2(plan.stdin_fd, 0) < 0 || ::dup2(plan.output_fd, 1) < 0
      || ::dup2(plan.output_fd, 2) < 0)
    ::_exit(126);
  ::syscall(SYS_close_range, 3U, ~0U, 0U);
  ::execve(plan.program.c_str(), plan.argv.data(), plan.envp.data());
  ::_exit(127);
}

/// Kills the process group and reaps the tool; returns its wait status.
int kill_and_reap(pid_t pid) {
  ::kill(-pid, SIGTERM);
  auto deadline = clock_type::now() + term_grace;
  int wait_status = 0;
  while (clock_type::now() < deadline) {
    if (::waitpid(pid, &wait_status, WNOHANG) == pid) {
      ::kill(-pid, SIGKILL); // stragglers in the group
      return wait_status;
    }
    ::usleep(20'000);
  }
  ::kill(-pid, SIGKILL);
  while (::waitpid(pid, &wait_status, 0) < 0 && errno == EINTR) {
  }
  return wait_status;
}

/// The tool's two pipes as the parent holds them.
struct tool_pipes {
  unique_fd stdin_write;
  unique_fd output_read;
  std::string_view stdin_left;
};

struct wait_outcome {
  int wait_status = 0;
  errc stopped = errc::none; // timeout or cancelled when we killed it
};

/// Writes what stdin can take now; closes it when everything is written or
/// the tool stopped reading.
void feed_stdin(tool_pipes& pipes) {
  while (pipes.stdin_write && !pipes.stdin_left.empty()) {
    auto n = ::write(pipes.stdin_write.get(), pipes.stdin_left.data(), pipes.stdin_left.size());
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && errno == EAGAIN)
      return;
    if (n < 0)
      break; // EPIPE: the tool closed its stdin
    pipes.stdin_left.remove_prefix(static_cast<size_t>(n));
  }
  pipes.stdin_write.reset();
}

/// Reads output, feeds stdin and reaps, until the tool has exited and its
/// output ended, the deadline passes or the caller cancels. Waits in poll on
/// the output, stdin and a pidfd of the tool, so an exit is seen at once.
wait_outcome pump(pid_t pid, tool_pipes& pipes, const command_options& options,
                  output_collector& collector) {
  auto deadline = clock_type::now() + std::chrono::milliseconds(options.timeout_ms);
  unique_fd exit_fd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  bool exited = false;
  int wait_status = 0;
  clock_type::time_point exited_at{};
  char buffer[16 * 1024];
  feed_stdin(pipes);
  while (!exited || pipes.output_read) {
    if (options.cancel != nullptr && options.cancel->load())
      return {kill_and_reap(pid), errc::cancelled};
    if (clock_type::now() >= deadline)
      return {kill_and_reap(pid), errc::timeout};
    if (exited && clock_type::now() - exited_at > orphan_pipe_grace) {
      ::kill(-pid, SIGKILL);
      break;
    }
    // Without a pidfd (old kernels) the exit is polled for every millisecond.
    int wait_ms = exited || exit_fd ? poll_interval_ms : 1;
    pollfd fds[3] = {{pipes.output_read.get(), POLLIN, 0},
                     {pipes.stdin_write.get(), POLLOUT, 0},
                     {exited ? -1 : exit_fd.get(), POLLIN, 0}};
    if (::poll(fds, 3, wait_ms) > 0) {
      if (fds[1].revents != 0)
        feed_stdin(pipes);
      if (fds[0].revents != 0) {
        auto n = ::read(pipes.output_read.get(), buffer, sizeof buffer);
        if (n > 0)
          collector.consume(buffer, static_cast<size_t>(n));
        else if (n == 0 || (errno != EINTR && errno != EAGAIN))
          pipes.output_read.reset();
      }
    }
    if (!exited && ::waitpid(pid, &wait_status, WNOHANG) == pid) {
      exited = true;
      exited_at = clock_type::now();
    }
  }
  return {wait_status, errc::none};
}

/// Creates the pipes and starts the tool.
result<pid_t> start_tool(spawn_plan& plan, tool_pipes& pipes) {
  int in_pipe[2];
  int out_pipe[2];
  if (::pipe2(in_pipe, O_CLOEXEC) != 0)
    return errno_failure(errc::io_error, "pipe", errno);
  unique_fd in_read(in_pipe[0]);
  pipes.stdin_write.reset(in_pipe[1]);
  if (::pipe2(out_pipe, O_CLOEXEC) != 0)
    return errno_failure(errc::io_error, "pipe", errno);
  pipes.output_read.reset(out_pipe[0]);
  unique_fd out_write(out_pipe[1]);
  ::fcntl(pipes.stdin_write.get(), F_SETFL, O_NONBLOCK);
  plan.stdin_fd = in_read.get();
  plan.output_fd = out_write.get();
  plan.parent = ::getpid();
  // The child shares the worker's memory until it execs (vfork semantics)
  // instead of copying its page tables: a fork's cost grows with the
  // worker's threads and mappings, which grow with the sandboxes it runs.
  // Signals stay blocked across the clone so that no handler of ours runs
  // on the child's borrowed memory; the child resets them before unblocking.
  std::unique_ptr<char[]> child_stack(new char[child_stack_bytes]);
  sigset_t all;
  sigset_t before;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &before);
  pid_t pid =
    ::clone([](void* arg) -> int { exec_child(*static_cast<const spawn_plan*>(arg)); },
            child_stack.get() + child_stack_bytes, CLONE_VM | CLONE_VFORK | SIGCHLD, &plan);
  int clone_errno = errno;
  ::pthread_sigmask(SIG_SETMASK, &before, nullptr);
  if (pid < 0)
    return errno_failure(errc::resource_exhausted, "clone for " + plan.program, clone_errno);
  ::setpgid(pid, pid); // also here, so that a kill right away reaches the group
  return pid;          // the child's ends close here: EOF once the tool and its children are done
}

} // namespace

int close_fds_except(const int* keep, size_t count) noexcept {
  // Sorted on the stack: no allocation between clone and exec.
  constexpr size_t keep_max = 16;
  if (count > keep_max)
    return EINVAL;
  int sorted[keep_max];
  size_t kept = 0;
  for (size_t i = 0; i < count; ++i) {
    if (keep[i] < 0)
      continue;
    size_t at = kept++;
    for (; at > 0 && sorted[at - 1] > keep[i]; --at)
      sorted[at] = sorted[at - 1];
    sorted[at] = keep[i];
  }
  unsigned first = 0;
  for (size_t i = 0; i < kept; ++i) {
    const auto fd = static_cast<unsigned>(sorted[i]);
    if (fd > first && ::syscall(SYS_close_range, first, fd - 1, 0U) != 0)
      return errno;
    first = fd + 1;
  }
  if (::syscall(SYS_close_range, first, ~0U, 0U) != 0)
    return errno;
  return 0;
}

int die_with_parent(int signal) noexcept {
  return ::prctl(PR_SET_PDEATHSIG, static_cast<unsigned long>(signal), 0, 0, 0) == 0 ? 0 : errno;
}

std::string find_program(std::string_view program, std::string_view path_var) {
  if (program.find('/') != std::string_view::npos)
    return std::string(program);
  auto search = [program](std::string_view dirs) -> std::string {
    while (!dirs.empty()) {
      auto colon = dirs.find(':');
      auto dir = dirs.substr(0, colon);
      dirs = colon == std::string_view::npos ? std::string_view{} : dirs.substr(colon + 1);
      if (dir.empty())
        continue;
      std::string candidate = std::string(dir) + "/" + std::string(program);
      if (::access(candidate.c_str(), X_OK) == 0)
        return candidate;
    }
    return {};
  };
  auto found = search(path_var);
  // A daemon started with a user's PATH still finds mkfs.btrfs in /usr/sbin.
  return found.empty() ? search(default_command_path) : found;
}

result<command_result> run_command(const std::vector<std::string>& argv,
                                   const command_options& options) {
  if (argv.empty() || argv.front().empty())
    return make_status(errc::invalid_argument, "run_command needs a program name");
  auto env = build_env(options);
  spawn_plan plan;
  plan.program = find_program(argv.front(), path_of(env));
  if (plan.program.empty() || ::access(plan.program.c_str(), X_OK) != 0)
    return make_status(errc::not_found, "program '" + argv.front()
                                          + "' is not installed (not found in PATH); install "
                                            "the Debian package that provides it");
  auto args = argv;
  plan.argv = c_strings(args);
  plan.envp = c_strings(env);
  plan.netns_fd = options.netns_fd;
  tool_pipes pipes;
  pipes.stdin_left = options.stdin_text;
  auto pid = start_tool(plan, pipes);
  if (!pid)
    return pid.error();
  output_collector collector(options);
  auto outcome = pump(*pid, pipes, options, collector);
  command_result out;
  collector.finish(out);
  if (outcome.stopped == errc::cancelled)
    return make_status(errc::cancelled, command_line(argv) + " was cancelled");
  if (outcome.stopped == errc::timeout)
    return make_status(errc::timeout, command_line(argv) + " did not finish within "
                                        + std::to_string(options.timeout_ms) + " ms");
  if (WIFEXITED(outcome.wait_status))
    out.exit_code = WEXITSTATUS(outcome.wait_status);
  else if (WIFSIGNALED(outcome.wait_status))
    out.signal = WTERMSIG(outcome.wait_status);
  return out;
}

status run_checked(std::string_view what, const std::vector<std::string>& argv,
                   const command_options& options) {
  auto ran = run_command(argv, options);
  if (!ran)
    return make_status(ran.code(), std::string(what) + ": " + ran.error().message);
  if (ran->succeeded())
    return status::ok();
  std::string how = ran->signal != 0 ? "was killed by signal " + std::to_string(ran->signal)
                                     : "exited with " + std::to_string(ran->exit_code);
  return make_status(errc::io_error, std::string(what) + " failed: `" + command_line(argv) + "` "
                                       + how + "; its output ended with:\n" + ran->output);
}

} // namespace airlock::worker
