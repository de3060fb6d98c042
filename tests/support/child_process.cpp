#include "tests/support/child_process.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <csignal>
#include <cstdlib>

#include "tests/support/fd_wait.hpp"

namespace airlock::test {

using detail::remaining_ms;
using detail::steady;
using detail::wait_fd;

bool is_api_key(std::string_view text) {
  auto hex = [](std::string_view part) {
    return std::all_of(part.begin(), part.end(),
                       [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
  };
  return text.size() == 3 + 16 + 1 + 64 && text.substr(0, 3) == "ak_" && text[19] == '_'
         && hex(text.substr(3, 16)) && hex(text.substr(20));
}

std::optional<std::pair<std::string, uint16_t>> parse_listening(std::string_view line) {
  constexpr std::string_view prefix = "listening on ";
  auto colon = line.rfind(':');
  if (!line.starts_with(prefix) || colon == std::string_view::npos || colon <= prefix.size())
    return std::nullopt;
  std::string_view port = line.substr(colon + 1);
  if (port.empty() || port.size() > 5
      || !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  return std::pair{std::string(line.substr(prefix.size(), colon - prefix.size())),
                   static_cast<uint16_t>(std::stoi(std::string(port)))};
}

std::unique_ptr<child_process> child_process::spawn(const std::vector<std::string>& argv,
                                                    const std::vector<std::string>& env,
                                                    const std::string& stderr_path) {
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0)
    return nullptr;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, stderr_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const auto& arg : argv)
    args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  std::vector<char*> vars;
  vars.reserve(env.size() + 1);
  for (const auto& var : env)
    vars.push_back(const_cast<char*>(var.c_str()));
  vars.push_back(nullptr);
  pid_t pid = 0;
  int rc = ::posix_spawn(&pid, args[0], &actions, nullptr, args.data(), vars.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipe_fds[1]);
  if (rc != 0) {
    ::close(pipe_fds[0]);
    return nullptr;
  }
  int pid_fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  return std::unique_ptr<child_process>(new child_process(pid, pipe_fds[0], pid_fd, stderr_path));
}

child_process::~child_process() {
  if (!exit_status_) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  ::close(stdout_fd_);
  if (pid_fd_ >= 0)
    ::close(pid_fd_);
}

std::optional<std::string> child_process::read_line(milliseconds timeout) {
  auto deadline = steady::now() + timeout;
  for (;;) {
    if (auto newline = buffer_.find('\n'); newline != std::string::npos) {
      std::string line = buffer_.substr(0, newline);
      buffer_.erase(0, newline + 1);
      return line;
    }
    if (stdout_eof_ || !wait_fd(stdout_fd_, POLLIN, deadline))
      return std::nullopt;
    char chunk[4096];
    ssize_t n = ::read(stdout_fd_, chunk, sizeof chunk);
    if (n > 0)
      buffer_.append(chunk, static_cast<size_t>(n));
    else if (n == 0 || errno != EINTR)
      stdout_eof_ = true;
  }
}

std::vector<std::string> child_process::read_remaining_lines(milliseconds timeout) {
  auto deadline = steady::now() + timeout;
  std::vector<std::string> lines;
  while (auto line = read_line(milliseconds(remaining_ms(deadline))))
    lines.push_back(std::move(*line));
  return lines;
}

void child_process::send_signal(int signal) {
  if (!exit_status_)
    ::kill(pid_, signal);
}

std::optional<int> child_process::wait_exit(milliseconds timeout) {
  if (exit_status_)
    return exit_status_;
  if (pid_fd_ >= 0 && !wait_fd(pid_fd_, POLLIN, steady::now() + timeout))
    return std::nullopt;
  int status = 0;
  if (::waitpid(pid_, &status, 0) != pid_)
    return std::nullopt;
  exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return exit_status_;
}

} // namespace airlock::test
