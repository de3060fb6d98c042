#include "worker/host_capacity.hpp"

#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace airlock::worker {

namespace {

uint32_t minus_reserve(uint64_t total, uint32_t reserve) {
  auto left = total > reserve ? total - reserve : 0;
  return static_cast<uint32_t>(std::min<uint64_t>(left, UINT32_MAX));
}

} // namespace

result<uint64_t> parse_meminfo_total_mb(std::string_view meminfo) {
  std::istringstream in{std::string(meminfo)};
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("MemTotal:", 0) != 0)
      continue;
    std::istringstream fields(line.substr(9));
    uint64_t kib = 0;
    std::string unit;
    if (fields >> kib >> unit && unit == "kB")
      return kib / 1024;
    return make_status(errc::invalid_argument, "MemTotal line is malformed: " + line);
  }
  return make_status(errc::invalid_argument, "no MemTotal line in /proc/meminfo");
}

result<schema::resources> probe_host_capacity(const std::string& data_dir,
                                              const capacity_options& options) {
  std::ifstream meminfo("/proc/meminfo");
  if (!meminfo)
    return make_status(errc::io_error, "cannot read /proc/meminfo");
  std::stringstream text;
  text << meminfo.rdbuf();
  auto memory_mb = parse_meminfo_total_mb(text.str());
  if (!memory_mb)
    return memory_mb.error();
  struct statvfs fs {};
  if (::statvfs(data_dir.c_str(), &fs) != 0)
    return make_status(errc::io_error,
                       "cannot stat the data directory " + data_dir + ": " + std::strerror(errno));
  auto disk_mb = static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize / (1024 * 1024);
  auto cpus = std::max<long>(1, ::sysconf(_SC_NPROCESSORS_ONLN));
  schema::resources capacity;
  capacity.cpu_millis =
    minus_reserve(static_cast<uint64_t>(cpus) * 1000, options.reserved_cpu_millis);
  capacity.memory_mb = minus_reserve(*memory_mb, options.reserved_memory_mb);
  capacity.disk_mb = minus_reserve(disk_mb, options.reserved_disk_mb);
  capacity.sandboxes = options.sandboxes_max;
  return capacity;
}

} // namespace airlock::worker
