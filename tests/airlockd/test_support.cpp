#include "tests/airlockd/test_support.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/file.h>
#include <netinet/in.h>
#include <poll.h>
#include <spawn.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <utility>

namespace airlock::test {

namespace {

using steady = std::chrono::steady_clock;

int remaining_ms(steady::time_point deadline) {
  auto left = std::chrono::duration_cast<milliseconds>(deadline - steady::now()).count();
  return static_cast<int>(std::max<int64_t>(0, left));
}

/// Waits for `events` on `fd` until `deadline`; false on timeout.
bool wait_fd(int fd, short events, steady::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int n = ::poll(&p, 1, remaining_ms(deadline));
    if (n > 0)
      return true;
    if (n == 0 || errno != EINTR)
      return false;
  }
}

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

/// Parses the status line and headers at the start of `buffer` and removes
/// them; nullopt if more bytes are needed, status 0 for bytes that are not a
/// response.
std::optional<http_reply> take_head(std::string& buffer) {
  auto head_end = buffer.find("\r\n\r\n");
  if (head_end == std::string::npos)
    return std::nullopt;
  std::istringstream head(buffer.substr(0, head_end));
  http_reply reply;
  std::string line;
  std::getline(head, line);
  if (line.rfind("HTTP/1.", 0) != 0 || line.size() < 12)
    return http_reply{}; // status 0: not a response
  reply.status = std::stoi(line.substr(9, 3));
  while (std::getline(head, line)) {
    if (!line.empty() && line.back() == '\r')
      line.pop_back();
    auto colon = line.find(':');
    if (colon == std::string::npos)
      continue;
    std::string value = line.substr(colon + 1);
    value.erase(0, value.find_first_not_of(' '));
    reply.headers[lower(line.substr(0, colon))] = value;
  }
  buffer.erase(0, head_end + 4);
  return reply;
}

std::optional<size_t> content_length(const http_reply& reply) {
  if (auto found = reply.headers.find("content-length"); found != reply.headers.end())
    return std::stoul(found->second);
  return std::nullopt;
}

/// Parses a complete response at the start of `buffer` and removes it;
/// nullopt if more bytes are needed.
std::optional<http_reply> take_reply(std::string& buffer) {
  auto head_end = buffer.find("\r\n\r\n");
  if (head_end == std::string::npos)
    return std::nullopt;
  std::string rest = buffer;
  auto reply = take_head(rest);
  if (!reply || reply->status == 0)
    return reply;
  size_t length = content_length(*reply).value_or(0);
  if (rest.size() < length)
    return std::nullopt;
  reply->body = rest.substr(0, length);
  buffer = rest.substr(length);
  return reply;
}

/// One event from the start of `buffer` (removed), skipping comment lines;
/// nullopt when no complete event is buffered yet.
std::optional<sse_event> take_event(std::string& buffer) {
  for (;;) {
    size_t end = buffer.find("\n\n");
    if (end == std::string::npos)
      return std::nullopt;
    std::istringstream block(buffer.substr(0, end));
    buffer.erase(0, end + 2);
    sse_event event;
    bool any = false;
    bool first_data = true;
    std::string line;
    while (std::getline(block, line)) {
      if (line.empty() || line[0] == ':')
        continue;
      auto colon = line.find(':');
      std::string name = line.substr(0, colon);
      std::string value = colon == std::string::npos ? "" : line.substr(colon + 1);
      if (!value.empty() && value[0] == ' ')
        value.erase(0, 1);
      any = true;
      if (name == "event") {
        event.event = value;
      } else if (name == "id") {
        event.id = value;
      } else if (name == "data") {
        event.data += (first_data ? "" : "\n") + value;
        first_data = false;
      }
    }
    if (any) {
      if (event.event.empty())
        event.event = "message";
      return event;
    }
  }
}

} // namespace

host_lock::host_lock(const std::string& path) {
  fd_ = ::open(path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600);
  if (fd_ >= 0 && ::flock(fd_, LOCK_EX) != 0) {
    ::close(fd_);
    fd_ = -1;
  }
}

host_lock::~host_lock() {
  if (fd_ >= 0)
    ::close(fd_); // drops the flock
}

temp_dir::temp_dir() {
  const char* base = std::getenv("TMPDIR");
  std::string pattern =
    std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/airlock-test-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr)
    throw std::runtime_error("mkdtemp failed");
  path_ = pattern;
}

temp_dir::~temp_dir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

void write_file(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
}

std::optional<http_connection> http_connection::open(const std::string& host, uint16_t port,
                                                     milliseconds timeout) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  if (::inet_pton(AF_INET, host.c_str(), &address.sin_addr) != 1)
    return std::nullopt;
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0)
    return std::nullopt;
  http_connection conn(fd);
  auto deadline = steady::now() + timeout;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    if (errno != EINPROGRESS || !wait_fd(fd, POLLOUT, deadline))
      return std::nullopt;
    int error = 0;
    socklen_t size = sizeof error;
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size);
    if (error != 0)
      return std::nullopt;
  }
  return conn;
}

http_connection::http_connection(http_connection&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), buffer_(std::move(other.buffer_)) {}

http_connection::~http_connection() {
  if (fd_ >= 0)
    ::close(fd_);
}

bool http_connection::send(const std::string& bytes, milliseconds timeout) {
  size_t sent = 0;
  auto deadline = steady::now() + timeout;
  while (sent < bytes.size()) {
    ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      if (!wait_fd(fd_, POLLOUT, deadline))
        return false;
    } else {
      return false;
    }
  }
  return true;
}

bool http_connection::fill(steady::time_point deadline) {
  if (eof_)
    return false;
  for (;;) {
    char chunk[65536];
    ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
    if (n > 0) {
      buffer_.append(chunk, static_cast<size_t>(n));
      return true;
    }
    if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
      eof_ = true;
      return false;
    }
    if (!wait_fd(fd_, POLLIN, deadline))
      return false;
  }
}

std::optional<http_reply> http_connection::read_reply(milliseconds timeout) {
  auto deadline = steady::now() + timeout;
  for (;;) {
    if (auto reply = take_reply(buffer_))
      return reply->status == 0 ? std::nullopt : reply;
    if (!fill(deadline))
      return std::nullopt;
  }
}

std::optional<http_reply> http_connection::read_head(milliseconds timeout) {
  auto deadline = steady::now() + timeout;
  for (;;) {
    if (auto reply = take_head(buffer_))
      return reply->status == 0 ? std::nullopt : reply;
    if (!fill(deadline))
      return std::nullopt;
  }
}

bool http_connection::read_body(http_reply& head, milliseconds timeout) {
  auto deadline = steady::now() + timeout;
  auto length = content_length(head);
  while (!length || buffer_.size() < *length) {
    if (!fill(deadline)) {
      if (length || !eof_)
        return false;
      break; // no Content-Length: the body ends at EOF
    }
  }
  size_t take = length ? *length : buffer_.size();
  head.body = buffer_.substr(0, take);
  buffer_.erase(0, take);
  return true;
}

std::optional<sse_event> http_connection::next_event(milliseconds timeout) {
  auto deadline = steady::now() + timeout;
  for (;;) {
    if (auto event = take_event(buffer_))
      return event;
    if (!fill(deadline))
      return std::nullopt;
  }
}

bool http_connection::wait_closed(milliseconds timeout) {
  auto deadline = steady::now() + timeout;
  for (;;) {
    char chunk[4096];
    ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
      return true;
    if (n < 0 && !wait_fd(fd_, POLLIN, deadline))
      return false;
  }
}

std::optional<http_reply> http_get(const std::string& host, uint16_t port, const std::string& path,
                                   const std::string& method) {
  auto conn = http_connection::open(host, port);
  if (!conn)
    return std::nullopt;
  if (!conn->send(method + " " + path + " HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n"))
    return std::nullopt;
  return conn->read_reply();
}

namespace {

std::string request_bytes(const http_request& request) {
  std::string bytes = request.method + " " + request.target
                      + " HTTP/1.1\r\nHost: test\r\n"
                        "Connection: close\r\n";
  for (const auto& [name, value] : request.headers)
    bytes += name + ": " + value + "\r\n";
  bool has_body = !request.body.empty() || request.method == "POST" || request.method == "PUT"
                  || request.method == "PATCH";
  if (has_body)
    bytes += "Content-Length: " + std::to_string(request.body.size()) + "\r\n";
  bytes += "\r\n";
  bytes += request.body;
  return bytes;
}

} // namespace

std::optional<std::pair<http_connection, http_reply>> http_open(const std::string& host,
                                                                uint16_t port,
                                                                const http_request& request,
                                                                milliseconds timeout) {
  auto conn = http_connection::open(host, port, timeout);
  if (!conn || !conn->send(request_bytes(request), timeout))
    return std::nullopt;
  auto head = conn->read_head(timeout);
  if (!head)
    return std::nullopt;
  return std::pair<http_connection, http_reply>(std::move(*conn), std::move(*head));
}

std::optional<http_reply> http_call(const std::string& host, uint16_t port,
                                    const http_request& request, milliseconds timeout) {
  auto opened = http_open(host, port, request, timeout);
  if (!opened || !opened->first.read_body(opened->second, timeout))
    return std::nullopt;
  return std::move(opened->second);
}

std::vector<std::string> unmount_below(const std::string& dir, milliseconds timeout) {
  auto mount_points = [&dir] {
    std::vector<std::string> found;
    std::ifstream info("/proc/self/mountinfo");
    std::string line;
    while (std::getline(info, line)) {
      std::istringstream fields(line);
      std::string id, parent, device, root, point;
      fields >> id >> parent >> device >> root >> point;
      if (point == dir || point.rfind(dir + "/", 0) == 0)
        found.push_back(point);
    }
    // Deepest first, so that nested mounts go before their parents.
    std::sort(found.begin(), found.end(),
              [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
    return found;
  };
  auto deadline = steady::now() + timeout;
  for (;;) {
    auto points = mount_points();
    if (points.empty())
      return {};
    bool progress = false;
    for (const auto& point : points)
      progress = ::umount2(point.c_str(), 0) == 0 || progress;
    if (!progress && steady::now() >= deadline) {
      for (const auto& point : points)
        ::umount2(point.c_str(), MNT_DETACH);
      return mount_points();
    }
    if (!progress) // busy: a process may still be exiting; retry shortly
      ::poll(nullptr, 0, std::min(100, remaining_ms(deadline)));
  }
}

std::vector<std::string> remove_instance_leftovers(const std::string& instance) {
  namespace fs = std::filesystem;
  std::vector<std::string> left;
  std::error_code ec;
  std::vector<fs::path> parents{fs::path("/sys/fs/cgroup") / instance};
  for (const auto& hierarchy : fs::directory_iterator("/sys/fs/cgroup", ec))
    parents.push_back(hierarchy.path() / instance);
  for (const auto& parent : parents) {
    if (!fs::is_directory(parent, ec))
      continue;
    // Children first: cgroup directories are removed with rmdir only.
    std::vector<fs::path> dirs;
    for (const auto& entry : fs::recursive_directory_iterator(parent, ec))
      if (entry.is_directory(ec))
        dirs.push_back(entry.path());
    std::sort(dirs.begin(), dirs.end(), [](const fs::path& a, const fs::path& b) {
      return a.string().size() > b.string().size();
    });
    dirs.push_back(parent);
    for (const auto& dir : dirs)
      if (::rmdir(dir.c_str()) != 0 && errno != ENOENT)
        left.push_back(dir.string());
  }
  std::string table = instance;
  std::replace(table.begin(), table.end(), '-', '_');
  std::replace(table.begin(), table.end(), '.', '_');
  auto nft = child_process::spawn({"/usr/sbin/nft", "delete", "table", "inet", table},
                                  {"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}, "/dev/null");
  if (nft)
    nft->wait_exit();
  return left;
}

bool poll_until(const std::function<bool()>& condition, milliseconds timeout,
                milliseconds interval) {
  auto deadline = steady::now() + timeout;
  for (;;) {
    if (condition())
      return true;
    if (steady::now() >= deadline)
      return false;
    ::poll(nullptr, 0,
           static_cast<int>(std::min<int64_t>(interval.count(), remaining_ms(deadline))));
  }
}

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
