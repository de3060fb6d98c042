#include "worker/runtime/user_ns.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "schema/unique_fd.hpp"
#include "worker/runtime/sys.hpp"

namespace airlock::worker {

result<id_range> slot_id_range(uint32_t base, uint32_t count, uint32_t slot) {
  uint64_t start = uint64_t{base} + uint64_t{slot} * count;
  if (count == 0 || start + count > uint64_t{UINT32_MAX})
    return make_status(errc::invalid_argument,
                       "uid range of slot " + std::to_string(slot)
                         + " exceeds 32 bits: lower id_range_base or slots_max");
  return id_range{static_cast<uint32_t>(start), count};
}

std::string id_map_text(const id_range& range) {
  return "0 " + std::to_string(range.host_base) + " " + std::to_string(range.count) + "\n";
}

namespace {

status write_at(int dir_fd, const char* name, const std::string& text) {
  unique_fd fd(::openat(dir_fd, name, O_WRONLY | O_CLOEXEC));
  if (!fd)
    return sys_error(errc::io_error, std::string("open ") + name + " of the sandbox init", errno);
  if (::write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size()))
    return sys_error(errc::io_error, std::string("write ") + name + " '" + text + "'", errno);
  return status::ok();
}

} // namespace

status write_id_maps(pid_t pid, int pidfd, const id_range& range) {
  std::string dir = "/proc/" + std::to_string(pid);
  unique_fd proc_dir(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!proc_dir)
    return sys_error(errc::io_error, "open " + dir, errno);
  // The directory fd now pins the process it was opened on; the pidfd check
  // proves that process is still the child we cloned (an unreaped child's
  // pid cannot be reused, and signal 0 fails once it has exited).
  if (::syscall(SYS_pidfd_send_signal, pidfd, 0, nullptr, 0) != 0)
    return sys_error(errc::internal, "sandbox init exited before its id maps were written", errno);
  std::string text = id_map_text(range);
  if (auto written = write_at(proc_dir.get(), "uid_map", text); !written)
    return written;
  return write_at(proc_dir.get(), "gid_map", text);
}

} // namespace airlock::worker
