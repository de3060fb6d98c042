#pragma once
// Host-side helpers for tests: temporary directories, files, a host-wide lock
// for suites that share host resources, and clean-up of mounts and of what an
// airlockd that ran sandboxes leaves behind.

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tests/support/wait.hpp"

namespace airlock::test {

/// An exclusive flock on `path` (created 0600) held for this object's life,
/// so that test processes sharing host resources (an nftables table, a veth
/// prefix, an address pool) run one at a time under `ctest -j`.
class host_lock {
public:
  explicit host_lock(const std::string& path);
  ~host_lock();
  host_lock(const host_lock&) = delete;
  host_lock& operator=(const host_lock&) = delete;
  bool held() const noexcept { return fd_ >= 0; }

private:
  int fd_ = -1;
};

/// A fresh directory under $TMPDIR (or /tmp), named `prefix`-XXXXXX and
/// removed with its contents.
class temp_dir {
public:
  explicit temp_dir(const std::string& prefix = "airlock-test");
  ~temp_dir();
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  const std::string& path() const { return path_; }

private:
  std::string path_;
};

std::string read_file(const std::string& path);
void write_file(const std::string& path, const std::string& content);

/// Unmounts every mount point at or below `dir` (deepest first), retrying a
/// busy one for a bounded time and then detaching it lazily. Returns the
/// mount points that could not be unmounted (empty: all gone).
std::vector<std::string> unmount_below(const std::string& dir,
                                       milliseconds timeout = milliseconds(10'000));

/// Removes what an airlockd that ran sandboxes as `instance` leaves on the
/// host after it stopped (by design, so that a restart finds it): its
/// cgroup parents (empty ones; v1 and v2 hierarchies) and its nftables table.
/// Call it only after that airlockd has exited. Returns what could not be
/// removed.
std::vector<std::string> remove_instance_leftovers(const std::string& instance);

/// Processes other than this one with a descriptor, working directory or
/// root on a path at or below `dir`, by pid.
std::vector<pid_t> processes_holding_files_under(const std::string& dir);

/// Processes whose executable is the file at `path`, by pid.
std::vector<pid_t> processes_running(const std::string& path);

/// The TCP ports process `pid` listens on (IPv4 and IPv6, in its network
/// namespace), sorted: what `ss -ltnp` shows for it.
std::vector<uint16_t> listening_tcp_ports(pid_t pid);

/// True when a TCP connect to 127.0.0.1:`port` is accepted (something
/// listens there, even a process that never calls accept).
bool loopback_port_accepts(uint16_t port);

} // namespace airlock::test
