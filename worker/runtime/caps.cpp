#include "worker/runtime/caps.hpp"

#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace airlock::worker {

int drop_capabilities(uint64_t keep) noexcept {
  // The bounding set caps what any later execve can grant; drop it first,
  // while CAP_SETPCAP is still effective. EINVAL marks the end of the
  // capabilities this kernel knows.
  for (int cap = 0; cap < 64; ++cap) {
    if ((keep >> cap) & 1U)
      continue;
    if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0) {
      if (errno == EINVAL)
        break;
      return errno;
    }
  }
  if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0)
    return errno;
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  for (int i = 0; i < 2; ++i) {
    auto word = static_cast<uint32_t>(keep >> (32 * i));
    data[i].effective = word;
    data[i].permitted = word;
    // Inheritable stays empty (CVE-2022-24769): a non-root program with
    // inheritable file capabilities must not gain them from us.
    data[i].inheritable = 0;
  }
  if (::syscall(SYS_capset, &header, data) != 0)
    return errno;
  return 0;
}

} // namespace airlock::worker
