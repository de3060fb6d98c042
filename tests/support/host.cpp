#include "tests/support/host.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
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

namespace {

/// Every process in /proc but this one.
std::vector<pid_t> other_processes() {
  std::vector<pid_t> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos)
      continue;
    const auto pid = static_cast<pid_t>(std::stol(name));
    if (pid != ::getpid())
      out.push_back(pid);
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool is_at_or_below(const std::string& path, const std::string& dir) {
  return path == dir
         || (path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0
             && path[dir.size()] == '/');
}

} // namespace

std::vector<pid_t> processes_holding_files_under(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const std::string root = fs::weakly_canonical(dir, ec).string();
  std::vector<pid_t> out;
  for (pid_t pid : other_processes()) {
    const fs::path proc = fs::path("/proc") / std::to_string(pid);
    bool holds = false;
    for (const char* link : {"cwd", "root"})
      holds = holds || is_at_or_below(fs::read_symlink(proc / link, ec).string(), root);
    for (const auto& fd : fs::directory_iterator(proc / "fd", ec)) {
      if (holds)
        break;
      holds = is_at_or_below(fs::read_symlink(fd.path(), ec).string(), root);
    }
    if (holds)
      out.push_back(pid);
  }
  return out;
}

std::vector<pid_t> processes_running(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const std::string target = fs::weakly_canonical(path, ec).string();
  std::vector<pid_t> out;
  for (pid_t pid : other_processes())
    if (fs::read_symlink(fs::path("/proc") / std::to_string(pid) / "exe", ec).string() == target)
      out.push_back(pid);
  return out;
}

std::vector<uint16_t> listening_tcp_ports(pid_t pid) {
  namespace fs = std::filesystem;
  const fs::path proc = fs::path("/proc") / std::to_string(pid);
  std::vector<std::string> sockets;
  std::error_code ec;
  for (const auto& fd : fs::directory_iterator(proc / "fd", ec)) {
    std::string target = fs::read_symlink(fd.path(), ec).string();
    if (target.rfind("socket:[", 0) == 0)
      sockets.push_back(target.substr(8, target.size() - 9));
  }
  std::vector<uint16_t> ports;
  for (const char* table : {"net/tcp", "net/tcp6"}) {
    std::ifstream in(proc / table);
    std::string line;
    std::getline(in, line); // the header
    while (std::getline(in, line)) {
      // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
      std::istringstream fields(line);
      std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout, inode;
      if (!(fields >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid
            >> timeout >> inode)
          || state != "0A")
        continue;
      if (std::find(sockets.begin(), sockets.end(), inode) == sockets.end())
        continue;
      ports.push_back(
        static_cast<uint16_t>(std::stoul(local.substr(local.find(':') + 1), nullptr, 16)));
    }
  }
  std::sort(ports.begin(), ports.end());
  ports.erase(std::unique(ports.begin(), ports.end()), ports.end());
  return ports;
}

bool loopback_port_accepts(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return false;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool accepted = ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
  ::close(fd);
  return accepted;
}

} // namespace airlock::test
