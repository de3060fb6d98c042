#include "airlockd/lock_holders.hpp"

#include <dirent.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace airlock::airlockd {
namespace {

bool is_pid_name(const char* name) {
  if (*name == '\0')
    return false;
  for (const char* c = name; *c != '\0'; ++c)
    if (*c < '0' || *c > '9')
      return false;
  return true;
}

std::string command_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/comm");
  std::string command;
  std::getline(in, command);
  return command;
}

bool has_open(pid_t pid, dev_t dev, ino_t ino) {
  std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  DIR* fds = ::opendir(dir.c_str());
  if (fds == nullptr)
    return false;
  bool found = false;
  while (dirent* entry = ::readdir(fds)) {
    if (!is_pid_name(entry->d_name))
      continue;
    struct stat st {};
    // stat follows the magic link to the open file itself.
    if (::fstatat(::dirfd(fds), entry->d_name, &st, 0) == 0 && st.st_dev == dev
        && st.st_ino == ino) {
      found = true;
      break;
    }
  }
  ::closedir(fds);
  return found;
}

} // namespace

std::optional<pid_t> recorded_lock_owner(const std::string& path) {
  struct stat target {};
  if (::stat(path.c_str(), &target) != 0)
    return std::nullopt;
  // "1: FLOCK  ADVISORY  WRITE 4081 fe:00:10953007 0 EOF"
  std::ifstream locks("/proc/locks");
  std::string line;
  while (std::getline(locks, line)) {
    std::istringstream fields(line);
    std::string ordinal, kind, mode, access, pid_text, file;
    if (!(fields >> ordinal >> kind) || ordinal == "->")
      continue; // a waiter, not a holder
    if (!(fields >> mode >> access >> pid_text >> file) || kind != "FLOCK")
      continue;
    unsigned major = 0;
    unsigned minor = 0;
    unsigned long long ino = 0;
    if (std::sscanf(file.c_str(), "%x:%x:%llu", &major, &minor, &ino) != 3)
      continue;
    if (ino == target.st_ino && ::makedev(major, minor) == target.st_dev)
      return static_cast<pid_t>(std::atol(pid_text.c_str()));
  }
  return std::nullopt;
}

std::vector<lock_holder> open_file_holders(const std::string& path) {
  std::vector<lock_holder> holders;
  struct stat target {};
  if (::stat(path.c_str(), &target) != 0)
    return holders;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr)
    return holders;
  const pid_t self = ::getpid();
  while (dirent* entry = ::readdir(proc)) {
    if (!is_pid_name(entry->d_name))
      continue;
    const auto pid = static_cast<pid_t>(std::atol(entry->d_name));
    if (pid != self && has_open(pid, target.st_dev, target.st_ino))
      holders.push_back({pid, command_of(pid)});
  }
  ::closedir(proc);
  std::sort(holders.begin(), holders.end(),
            [](const lock_holder& a, const lock_holder& b) { return a.pid < b.pid; });
  return holders;
}

std::string describe_lock_holders(const std::string& path) {
  const auto owner = recorded_lock_owner(path);
  const auto holders = open_file_holders(path);
  if (holders.empty()) {
    if (owner)
      return "locked by pid " + std::to_string(*owner)
             + " (no process this user may inspect has it open; run as root to see which)";
    return "locked by another process";
  }
  std::string pids;
  std::string text = "held by ";
  bool owner_holds = false;
  for (size_t i = 0; i < holders.size(); ++i) {
    const auto& holder = holders[i];
    text += (i == 0 ? "" : ", ") + std::string("pid ") + std::to_string(holder.pid)
            + (holder.command.empty() ? "" : " (" + holder.command + ")");
    pids += " " + std::to_string(holder.pid);
    owner_holds = owner_holds || (owner && *owner == holder.pid);
  }
  if (owner && !owner_holds)
    text += "; pid " + std::to_string(*owner)
            + ", which took the lock, has exited and left it to a process it started";
  text += ". If no airlockd should be running on this data directory, stop "
          + std::string(holders.size() == 1 ? "that process" : "those processes") + " (kill" + pids
          + ") and start again";
  return text;
}

} // namespace airlock::airlockd
