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

result<uint64_t> meminfo_field_mb(std::string_view meminfo, const std::string& field) {
  std::istringstream in{std::string(meminfo)};
  std::string line;
  const std::string key = field + ":";
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) != 0)
      continue;
    std::istringstream fields(line.substr(key.size()));
    uint64_t kib = 0;
    std::string unit;
    if (fields >> kib >> unit && unit == "kB")
      return kib / 1024;
    return make_status(errc::invalid_argument, field + " line is malformed: " + line);
  }
  return make_status(errc::invalid_argument, "no " + field + " line in /proc/meminfo");
}

result<std::string> read_text_file(const char* path) {
  std::ifstream file(path);
  if (!file)
    return make_status(errc::io_error, std::string("cannot read ") + path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

} // namespace

result<uint64_t> parse_meminfo_total_mb(std::string_view meminfo) {
  return meminfo_field_mb(meminfo, "MemTotal");
}

result<uint64_t> parse_meminfo_available_mb(std::string_view meminfo) {
  return meminfo_field_mb(meminfo, "MemAvailable");
}

result<double> parse_memory_pressure_full_avg10(std::string_view psi) {
  std::istringstream in{std::string(psi)};
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("full ", 0) != 0)
      continue;
    auto at = line.find("avg10=");
    if (at == std::string::npos)
      break;
    try {
      return std::stod(line.substr(at + 6));
    } catch (const std::exception&) {
      break;
    }
  }
  return make_status(errc::invalid_argument, "no 'full avg10=' in the memory pressure text");
}

memory_pressure judge_memory_pressure(std::optional<double> full_avg10, uint64_t available_mb,
                                      const pressure_options& options) {
  memory_pressure out;
  out.available_mb = available_mb;
  if (full_avg10 && *full_avg10 >= options.full_avg10_percent_max) {
    out.under = true;
    out.reason = "memory pressure full avg10 is " + std::to_string(*full_avg10) + "% (limit "
                 + std::to_string(options.full_avg10_percent_max) + "%)";
  } else if (available_mb < options.available_mb_min) {
    out.under = true;
    out.reason = "MemAvailable is " + std::to_string(available_mb) + " MiB (minimum "
                 + std::to_string(options.available_mb_min) + " MiB)";
  }
  return out;
}

result<memory_pressure> probe_memory_pressure(const pressure_options& options) {
  auto meminfo = read_text_file("/proc/meminfo");
  if (!meminfo)
    return meminfo.error();
  auto available = parse_meminfo_available_mb(*meminfo);
  if (!available)
    return available.error();
  std::optional<double> full_avg10;
  if (auto psi = read_text_file("/proc/pressure/memory"))
    if (auto parsed = parse_memory_pressure_full_avg10(*psi))
      full_avg10 = *parsed;
  return judge_memory_pressure(full_avg10, *available, options);
}

result<schema::resources> probe_host_capacity(const std::string& data_dir,
                                              const capacity_options& options) {
  auto meminfo = read_text_file("/proc/meminfo");
  if (!meminfo)
    return meminfo.error();
  auto memory_mb = parse_meminfo_total_mb(*meminfo);
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
