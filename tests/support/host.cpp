#include "tests/support/host.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "tests/support/child_process.hpp"
#include "tests/support/fd_wait.hpp"

namespace airlock::test {

using detail::remaining_ms;
using detail::steady;

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

temp_dir::temp_dir(const std::string& prefix) {
  const char* base = std::getenv("TMPDIR");
  std::string pattern =
    std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/" + prefix + "-XXXXXX";
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

} // namespace airlock::test
