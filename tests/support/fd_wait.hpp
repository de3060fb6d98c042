#pragma once
// Internal to tests/support: waiting on a file descriptor until a deadline.

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>

namespace airlock::test::detail {

using std::chrono::milliseconds;
using steady = std::chrono::steady_clock;

inline int remaining_ms(steady::time_point deadline) {
  auto left = std::chrono::duration_cast<milliseconds>(deadline - steady::now()).count();
  return static_cast<int>(std::max<int64_t>(0, left));
}

/// Waits for `events` on `fd` until `deadline`; false on timeout.
inline bool wait_fd(int fd, short events, steady::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int n = ::poll(&p, 1, remaining_ms(deadline));
    if (n > 0)
      return true;
    if (n == 0 || errno != EINTR)
      return false;
  }
}

} // namespace airlock::test::detail
