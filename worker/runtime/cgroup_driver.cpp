#include "worker/runtime/cgroup_driver.hpp"

#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <sstream>

#include "schema/unique_fd.hpp"
#include "worker/runtime/cgroup_common.hpp"
#include "worker/runtime/sys.hpp"

namespace airlock::worker {

uint64_t cpu_quota_us(uint32_t cpu_millis, uint32_t period_us) noexcept {
  return std::max<uint64_t>(cpu_quota_min_us, uint64_t{cpu_millis} * period_us / 1000);
}

uint64_t cpu_shares_for(uint32_t request_millis) noexcept {
  return std::max<uint64_t>(2, uint64_t{request_millis} * 1024 / 1000);
}

uint64_t cpu_weight_for(uint32_t request_millis) noexcept {
  constexpr uint64_t shares_max = 262'144;
  auto shares = std::min(cpu_shares_for(request_millis), shares_max);
  return 1 + (shares - 2) * 9999 / (shares_max - 2);
}

bool valid_sandbox_id(std::string_view id) noexcept {
  if (id.empty() || id.size() > 63)
    return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
  });
}

namespace {

/// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string unescape(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 3 < text.size()) {
      int value = (text[i + 1] - '0') * 64 + (text[i + 2] - '0') * 8 + (text[i + 3] - '0');
      out.push_back(static_cast<char>(value));
      i += 3;
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

std::vector<std::string> split(std::string_view text, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(sep, start);
    if (end == std::string_view::npos)
      end = text.size();
    parts.emplace_back(text.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

} // namespace

cgroup_mounts parse_cgroup_mounts(std::string_view mountinfo) {
  cgroup_mounts mounts;
  std::istringstream lines{std::string(mountinfo)};
  std::string line;
  while (std::getline(lines, line)) {
    auto fields = split(line, ' ');
    auto dash = std::find(fields.begin(), fields.end(), "-");
    if (fields.size() < 5 || dash == fields.end() || fields.end() - dash < 4)
      continue;
    const std::string& fstype = *(dash + 1);
    std::string mount_point = unescape(fields[4]);
    if (fstype == "cgroup2" && mounts.v2_path.empty())
      mounts.v2_path = mount_point;
    if (fstype != "cgroup")
      continue;
    // Super options are controller names plus a few flags; named
    // hierarchies (name=systemd) carry no controller.
    static const char* const flags[] = {
      "rw", "ro", "xattr", "noprefix", "clone_children", "cpuset_v2_mode", "favordynmods"};
    for (const auto& option : split(*(dash + 3), ','))
      if (option.find('=') == std::string::npos
          && std::find(std::begin(flags), std::end(flags), option) == std::end(flags))
        mounts.v1_paths.emplace(option, mount_point);
  }
  return mounts;
}

result<std::unique_ptr<cgroup_driver>> detect_cgroup_driver(const cgroup_options& options) {
  if (options.parent.empty() || options.parent.find("..") != std::string::npos)
    return make_status(errc::invalid_argument, "cgroup parent must be a plain relative path");
  auto text = read_file("/proc/self/mountinfo", 4 << 20);
  if (!text)
    return text.error();
  auto mounts = parse_cgroup_mounts(*text);
  bool v2_usable = false;
  if (options.mode != cgroup_mode::v1) {
    auto controllers = read_file(options.v2_root + "/cgroup.controllers");
    v2_usable = controllers && controllers->find("memory") != std::string::npos
                && controllers->find("pids") != std::string::npos
                && controllers->find("cpu") != std::string::npos;
  }
  if (options.mode == cgroup_mode::v2 || (options.mode == cgroup_mode::automatic && v2_usable))
    return make_cgroup_v2_driver(options.v2_root, options.parent);
  return make_cgroup_v1_driver(mounts, options.parent);
}

namespace cgroup_detail {

status wait_until(std::string_view what, uint32_t timeout_ms,
                  const std::function<result<bool>()>& done) {
  uint64_t deadline = monotonic_ms() + timeout_ms;
  for (;;) {
    auto reached = done();
    if (!reached)
      return reached.error();
    if (*reached)
      return status::ok();
    if (monotonic_ms() >= deadline)
      return make_status(errc::timeout, std::string(what) + " did not happen within "
                                          + std::to_string(timeout_ms) + " ms");
    timespec pause{0, 1000000};
    ::nanosleep(&pause, nullptr);
  }
}

result<std::vector<pid_t>> read_pids(const std::string& procs_file) {
  auto text = read_file(procs_file, 4 << 20);
  if (!text)
    return text.error();
  std::vector<pid_t> pids;
  std::istringstream in(*text);
  long pid = 0;
  while (in >> pid)
    pids.push_back(static_cast<pid_t>(pid));
  return pids;
}

result<uint64_t> read_number(const std::string& path) {
  auto text = read_file(path, 4096);
  if (!text)
    return text.error();
  if (text->rfind("max", 0) == 0)
    return UINT64_MAX;
  return std::strtoull(text->c_str(), nullptr, 10);
}

result<uint64_t> read_keyed(const std::string& path, std::string_view key) {
  auto text = read_file(path, 1 << 20);
  if (!text)
    return text.error();
  std::istringstream in(*text);
  std::string name;
  uint64_t value = 0;
  while (in >> name >> value)
    if (name == key)
      return value;
  return uint64_t{0};
}

status kill_members(const std::string& procs_file) {
  auto pids = read_pids(procs_file);
  if (!pids)
    return pids.code() == errc::not_found ? status::ok() : pids.error();
  std::vector<std::pair<pid_t, unique_fd>> opened;
  for (pid_t pid : *pids) {
    unique_fd fd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
    if (fd)
      opened.emplace_back(pid, std::move(fd));
  }
  auto still = read_pids(procs_file);
  if (!still)
    return still.code() == errc::not_found ? status::ok() : still.error();
  for (auto& [pid, fd] : opened)
    if (std::find(still->begin(), still->end(), pid) != still->end())
      ::syscall(SYS_pidfd_send_signal, fd.get(), SIGKILL, nullptr, 0);
  return status::ok();
}

status make_dir(const std::string& path) {
  if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST)
    return sys_error(errc_from_errno(errno), "mkdir " + path, errno);
  return status::ok();
}

status remove_dir(const std::string& path, uint32_t timeout_ms) {
  return wait_until("rmdir " + path, timeout_ms, [&path]() -> result<bool> {
    if (::rmdir(path.c_str()) == 0 || errno == ENOENT)
      return true;
    if (errno == EBUSY)
      return false;
    return sys_error(errc::io_error, "rmdir " + path, errno);
  });
}

} // namespace cgroup_detail
} // namespace airlock::worker
