#include "worker/rootfs/process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "worker/rootfs/fs_util.hpp"

extern char** environ; // NOLINT: POSIX declares it nowhere else

namespace airlock::worker {
inline namespace rootfs_process {

namespace {

using clock_type = std::chrono::steady_clock;

// A child that outlives its own exit through a grandchild holding the pipe
// (a daemon) is cut off after this long.
constexpr auto orphan_pipe_grace = std::chrono::seconds(2);
// SIGTERM first so that debootstrap can unmount what it mounted.
constexpr auto term_grace = std::chrono::seconds(3);
constexpr size_t line_bytes_max = 64 * 1024;

std::string_view env_key(std::string_view entry) { return entry.substr(0, entry.find('=')); }

std::vector<std::string> build_env(const std::vector<std::string>& overrides) {
  std::vector<std::string> env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    std::string_view text(*entry);
    bool replaced = false;
    for (const auto& item : overrides)
      replaced = replaced || env_key(item) == env_key(text);
    if (!replaced)
      env.emplace_back(text);
  }
  env.insert(env.end(), overrides.begin(), overrides.end());
  bool has_path = false;
  for (const auto& item : env)
    has_path = has_path || env_key(item) == "PATH";
  if (!has_path)
    env.push_back("PATH=" + std::string(default_command_path));
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

// Owns the output pipe's read end and splits what arrives into lines.
class line_reader {
public:
  line_reader(const command_options& options) : options_(options) {}

  void consume(const char* data, size_t size) {
    tail_.append(data, size);
    if (tail_.size() > options_.output_tail_bytes_max * 2)
      tail_.erase(0, tail_.size() - options_.output_tail_bytes_max);
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

  void finish() {
    if (!partial_.empty())
      emit(partial_);
    partial_.clear();
  }

  std::string take_tail() {
    if (tail_.size() > options_.output_tail_bytes_max)
      tail_.erase(0, tail_.size() - options_.output_tail_bytes_max);
    return std::move(tail_);
  }

private:
  void emit(std::string_view line) {
    if (!line.empty() && line.back() == '\r')
      line.remove_suffix(1);
    if (options_.on_line)
      options_.on_line(line);
  }

  const command_options& options_;
  std::string partial_;
  std::string tail_;
};

result<pid_t> spawn(const std::string& program, std::vector<std::string>& argv,
                    std::vector<std::string>& env, int output_fd) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, output_fd, 1);
  posix_spawn_file_actions_adddup2(&actions, output_fd, 2);
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigset_t all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  // Its own process group, so that a kill reaches everything it started.
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  auto args = c_strings(argv);
  auto envp = c_strings(env);
  pid_t pid = -1;
  int rc = ::posix_spawn(&pid, program.c_str(), &actions, &attr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0)
    return errno_status("cannot start " + program, rc);
  return pid;
}

// Kills the process group and reaps the child; returns its wait status.
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

struct wait_outcome {
  int wait_status = 0;
  errc stopped = errc::none; // timeout or cancelled when we killed it
};

wait_outcome pump(pid_t pid, int read_fd, const command_options& options, line_reader& reader) {
  auto deadline = clock_type::now() + std::chrono::milliseconds(options.timeout_ms);
  bool exited = false;
  bool eof = false;
  int wait_status = 0;
  clock_type::time_point exited_at{};
  char buffer[16 * 1024];
  while (!(exited && eof)) {
    if (options.cancel != nullptr && options.cancel->load())
      return {kill_and_reap(pid), errc::cancelled};
    if (clock_type::now() >= deadline)
      return {kill_and_reap(pid), errc::timeout};
    if (exited && clock_type::now() - exited_at > orphan_pipe_grace) {
      ::kill(-pid, SIGKILL);
      break;
    }
    if (!eof) {
      pollfd pfd{read_fd, POLLIN, 0};
      if (::poll(&pfd, 1, 100) > 0) {
        auto n = ::read(read_fd, buffer, sizeof buffer);
        if (n > 0)
          reader.consume(buffer, static_cast<size_t>(n));
        else if (n == 0 || (errno != EINTR && errno != EAGAIN))
          eof = true;
      }
    } else {
      ::usleep(10'000);
    }
    if (!exited && ::waitpid(pid, &wait_status, WNOHANG) == pid) {
      exited = true;
      exited_at = clock_type::now();
    }
  }
  return {wait_status, errc::none};
}

std::string command_line(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& arg : argv) {
    if (!out.empty())
      out += ' ';
    out += arg;
  }
  return out;
}

} // namespace

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
  if (argv.empty())
    return make_status(errc::invalid_argument, "run_command needs a program name");
  auto env = build_env(options.env);
  auto program = find_program(argv.front(), path_of(env));
  if (program.empty())
    return make_status(errc::not_found, "program '" + argv.front()
                                          + "' is not installed (not found in PATH); install "
                                            "the Debian package that provides it");
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    return errno_status("cannot create a pipe for " + argv.front());
  unique_fd read_end(fds[0]);
  unique_fd write_end(fds[1]);
  auto args = argv;
  auto pid = spawn(program, args, env, write_end.get());
  if (!pid)
    return pid.error();
  write_end.reset(); // EOF arrives when the child and its children are done
  line_reader reader(options);
  auto outcome = pump(*pid, read_end.get(), options, reader);
  reader.finish();
  if (outcome.stopped == errc::cancelled)
    return make_status(errc::cancelled, command_line(argv) + " was cancelled");
  if (outcome.stopped == errc::timeout)
    return make_status(errc::timeout, command_line(argv) + " did not finish within "
                                        + std::to_string(options.timeout_ms) + " ms");
  command_result out;
  if (WIFEXITED(outcome.wait_status))
    out.exit_code = WEXITSTATUS(outcome.wait_status);
  else if (WIFSIGNALED(outcome.wait_status))
    out.signal = WTERMSIG(outcome.wait_status);
  out.output_tail = reader.take_tail();
  return out;
}

status run_checked(std::string_view what, const std::vector<std::string>& argv,
                   const command_options& options) {
  auto ran = run_command(argv, options);
  if (!ran)
    return ran.error();
  if (ran->succeeded())
    return status::ok();
  std::string how = ran->signal != 0 ? "was killed by signal " + std::to_string(ran->signal)
                                     : "exited with " + std::to_string(ran->exit_code);
  return make_status(errc::io_error, std::string(what) + " failed: `" + command_line(argv) + "` "
                                       + how + "; its output ended with:\n" + ran->output_tail);
}

} // namespace rootfs_process
} // namespace airlock::worker
