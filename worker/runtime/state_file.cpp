#include "worker/runtime/state_file.hpp"

#include <dirent.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <memory>
#include <sstream>

#include "schema/atomic_file.hpp"
#include "worker/runtime/cgroup_driver.hpp"
#include "worker/runtime/sys.hpp"

namespace airlock::worker {

std::string encode_record(const sandbox_record& r) {
  std::ostringstream out;
  out << "version=1\n"
      << "id=" << r.id << "\n"
      << "slot=" << r.slot << "\n"
      << "init_pid=" << r.init_pid << "\n"
      << "init_start_time=" << r.init_start_time << "\n"
      << "uid_base=" << r.uid_base << "\n"
      << "ids_count=" << r.ids_count << "\n"
      << "cgroup_driver=" << r.cgroup_driver << "\n"
      << "network=" << (r.network ? 1 : 0) << "\n"
      << "host_interface=" << r.host_interface << "\n"
      << "host_address=" << r.host_address << "\n"
      << "sandbox_address=" << r.sandbox_address << "\n"
      << "prefix_length=" << r.prefix_length << "\n";
  return out.str();
}

namespace {

result<uint64_t> number(const std::map<std::string, std::string>& fields, const char* key) {
  auto found = fields.find(key);
  if (found == fields.end() || found->second.empty())
    return make_status(errc::corrupt_record, std::string("state record lacks ") + key);
  char* end = nullptr;
  uint64_t value = std::strtoull(found->second.c_str(), &end, 10);
  if (*end != '\0')
    return make_status(errc::corrupt_record, std::string("state record: bad ") + key);
  return value;
}

std::string text(const std::map<std::string, std::string>& fields, const char* key) {
  auto found = fields.find(key);
  return found == fields.end() ? std::string() : found->second;
}

} // namespace

result<sandbox_record> decode_record(std::string_view input) {
  std::map<std::string, std::string> fields;
  std::istringstream lines{std::string(input)};
  std::string line;
  while (std::getline(lines, line)) {
    auto eq = line.find('=');
    if (eq != std::string::npos)
      fields[line.substr(0, eq)] = line.substr(eq + 1);
  }
  if (text(fields, "version") != "1")
    return make_status(fields.count("version") ? errc::unsupported_version : errc::corrupt_record,
                       "state record version '" + text(fields, "version") + "' is not 1");
  sandbox_record r;
  r.id = text(fields, "id");
  if (!valid_sandbox_id(r.id))
    return make_status(errc::corrupt_record, "state record has an invalid id");
  const char* numeric[] = {"slot",      "init_pid", "init_start_time", "uid_base",
                           "ids_count", "network",  "prefix_length"};
  uint64_t values[7] = {};
  for (size_t i = 0; i < 7; ++i) {
    auto value = number(fields, numeric[i]);
    if (!value)
      return value.error();
    values[i] = *value;
  }
  r.slot = static_cast<uint32_t>(values[0]);
  r.init_pid = static_cast<pid_t>(values[1]);
  r.init_start_time = values[2];
  r.uid_base = static_cast<uint32_t>(values[3]);
  r.ids_count = static_cast<uint32_t>(values[4]);
  r.network = values[5] != 0;
  r.prefix_length = static_cast<uint32_t>(values[6]);
  r.cgroup_driver = text(fields, "cgroup_driver");
  r.host_interface = text(fields, "host_interface");
  r.host_address = text(fields, "host_address");
  r.sandbox_address = text(fields, "sandbox_address");
  return r;
}

status save_record(const std::string& dir, const sandbox_record& record) {
  return write_file_atomically(dir + "/" + record.id + ".state", encode_record(record), 0600);
}

status remove_record(const std::string& dir, std::string_view id) {
  std::string path = dir + "/" + std::string(id) + ".state";
  if (::unlink(path.c_str()) != 0 && errno != ENOENT)
    return sys_error(errc::io_error, "remove " + path, errno);
  return status::ok();
}

result<std::string> random_boot_id() {
  uint8_t bytes[16];
  size_t got = 0;
  while (got < sizeof bytes) {
    ssize_t n = ::getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return sys_error(errc::internal, "getrandom for a boot id", errno);
    got += static_cast<size_t>(n);
  }
  bytes[6] = static_cast<uint8_t>((bytes[6] & 0x0f) | 0x40); // version 4
  bytes[8] = static_cast<uint8_t>((bytes[8] & 0x3f) | 0x80); // RFC 4122 variant
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(37);
  for (size_t i = 0; i < sizeof bytes; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10)
      out += '-';
    out += hex[bytes[i] >> 4];
    out += hex[bytes[i] & 0x0f];
  }
  out += '\n';
  return out;
}

std::string boot_id_path(const std::string& dir, std::string_view id) {
  return dir + "/" + std::string(id) + ".boot_id";
}

status save_boot_id(const std::string& dir, std::string_view id) {
  auto boot_id = random_boot_id();
  if (!boot_id)
    return boot_id.error();
  return write_file_atomically(boot_id_path(dir, id), *boot_id, 0444);
}

status remove_boot_id(const std::string& dir, std::string_view id) {
  std::string path = boot_id_path(dir, id);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT)
    return sys_error(errc::io_error, "remove " + path, errno);
  return status::ok();
}

result<loaded_records> load_records(const std::string& dir) {
  std::unique_ptr<DIR, int (*)(DIR*)> handle(::opendir(dir.c_str()), ::closedir);
  if (!handle)
    return sys_error(errc_from_errno(errno), "open state directory " + dir, errno);
  loaded_records out;
  constexpr std::string_view suffix = ".state";
  while (dirent* entry = ::readdir(handle.get())) {
    std::string_view name(entry->d_name);
    if (name.size() <= suffix.size() || name.substr(name.size() - suffix.size()) != suffix)
      continue;
    std::string path = dir + "/" + std::string(name);
    auto content = read_file(path, 64 * 1024);
    auto record = content ? decode_record(*content) : result<sandbox_record>(content.error());
    if (record)
      out.records.push_back(std::move(*record));
    else
      out.failures.push_back(make_status(record.code(), path + ": " + record.error().message));
  }
  return out;
}

} // namespace airlock::worker
