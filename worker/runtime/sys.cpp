#include "worker/runtime/sys.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "schema/unique_fd.hpp"

namespace airlock::worker {

status sys_error(errc code, std::string_view what, int err) {
  std::string message(what);
  message += ": ";
  message += std::strerror(err);
  return make_status(code, std::move(message));
}

errc errc_from_errno(int err) noexcept {
  switch (err) {
    case ENOENT: return errc::not_found;
    case EEXIST: return errc::already_exists;
    case EPERM:
    case EACCES: return errc::permission_denied;
    case EINVAL: return errc::invalid_argument;
    case EBUSY:
    case EAGAIN: return errc::unavailable;
    case ENOSPC:
    case ENOMEM: return errc::resource_exhausted;
    default: return errc::io_error;
  }
}

uint64_t monotonic_ms() noexcept {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1000 + static_cast<uint64_t>(now.tv_nsec) / 1000000;
}

result<std::string> read_file(const std::string& path, size_t max_bytes) {
  unique_fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd)
    return sys_error(errc_from_errno(errno), "open " + path, errno);
  std::string out;
  char buffer[4096];
  while (out.size() < max_bytes) {
    ssize_t n = ::read(fd.get(), buffer, sizeof buffer);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return sys_error(errc_from_errno(errno), "read " + path, errno);
    if (n == 0)
      break;
    out.append(buffer, static_cast<size_t>(n));
  }
  if (out.size() > max_bytes)
    out.resize(max_bytes);
  return out;
}

status write_control_file(const std::string& path, std::string_view content) {
  unique_fd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd)
    return sys_error(errc_from_errno(errno), "open " + path + " for writing", errno);
  ssize_t n = ::write(fd.get(), content.data(), content.size());
  if (n < 0)
    return sys_error(errc_from_errno(errno), "write '" + std::string(content) + "' to " + path,
                     errno);
  if (static_cast<size_t>(n) != content.size())
    return make_status(errc::io_error, "short write to " + path);
  return status::ok();
}

result<uint64_t> process_start_time(pid_t pid) {
  auto text = read_file("/proc/" + std::to_string(pid) + "/stat", 4096);
  if (!text)
    return text.error();
  // The command name (field 2) may contain spaces and parentheses: count
  // fields from the last ')'.
  auto close = text->rfind(')');
  if (close == std::string::npos)
    return make_status(errc::corrupt_record, "unparseable /proc/<pid>/stat");
  size_t field = 2;
  size_t pos = close + 1;
  while (pos < text->size() && field < 22) {
    if ((*text)[pos] == ' ')
      ++field;
    ++pos;
  }
  if (field != 22)
    return make_status(errc::corrupt_record, "short /proc/<pid>/stat");
  return std::strtoull(text->c_str() + pos, nullptr, 10);
}

unique_fd open_recorded_process(pid_t pid, uint64_t start_time) {
  if (pid <= 0)
    return unique_fd();
  unique_fd fd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  if (!fd)
    return unique_fd();
  auto started = process_start_time(pid);
  if (!started || *started != start_time)
    return unique_fd();
  return fd;
}

status wait_pidfd_exit(int pidfd, uint32_t timeout_ms) {
  uint64_t deadline = monotonic_ms() + timeout_ms;
  for (;;) {
    uint64_t now = monotonic_ms();
    pollfd pfd{pidfd, POLLIN, 0};
    int ready = ::poll(&pfd, 1, now >= deadline ? 0 : static_cast<int>(deadline - now));
    if (ready < 0 && errno == EINTR)
      continue;
    if (ready < 0)
      return sys_error(errc::io_error, "poll pidfd", errno);
    if (ready == 0)
      return make_status(errc::timeout,
                         "process did not exit within " + std::to_string(timeout_ms) + " ms");
    break;
  }
  siginfo_t info{};
  // Reap when the process is our child; ECHILD means an earlier worker
  // started it and init (or a subreaper) reaps it.
  ::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd), &info, WEXITED | WNOHANG);
  return status::ok();
}

} // namespace airlock::worker
