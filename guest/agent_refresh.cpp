// The refresh after a restore from a memory snapshot: every VM restored from
// one snapshot resumes with the same kernel random state and the clock of the
// moment it was saved. The host's fresh entropy is credited to the input pool
// and the CRNG reseeded from it, so /dev/urandom and getrandom() diverge
// between clones at once; the wall clock is stepped to the host's.

#include <fcntl.h>
#include <linux/random.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "guest/agent_state.hpp"
#include "guest/guest_network.hpp"

namespace airlock::guest {
namespace {

int64_t realtime_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

/// RNDADDENTROPY (credits the bytes as entropy, unlike a plain write to
/// /dev/urandom), then RNDRESEEDCRNG: the CRNG otherwise reseeds from the pool
/// only on its own schedule (up to a minute later). Both need CAP_SYS_ADMIN:
/// the agent has it as a VM's PID 1, not inside a namespace sandbox.
status add_entropy(const std::string& bytes) {
  if (bytes.empty())
    return status::ok();
  unique_fd random(::open("/dev/urandom", O_WRONLY | O_CLOEXEC));
  if (!random)
    return errno_status(errno, "open /dev/urandom");
  // rand_pool_info's layout with room for the largest refresh (its buf is a
  // flexible array member).
  struct {
    int entropy_count;
    int buf_size;
    uint32_t buf[refresh_entropy_bytes_max / sizeof(uint32_t)];
  } request{};
  static_assert(offsetof(decltype(request), buf) == sizeof(rand_pool_info));
  request.entropy_count = static_cast<int>(bytes.size() * 8);
  request.buf_size = static_cast<int>(bytes.size());
  std::memcpy(request.buf, bytes.data(), std::min(bytes.size(), sizeof request.buf));
  void* info = &request;
  if (::ioctl(random.get(), RNDADDENTROPY, info) != 0)
    return errno_status(errno, "credit entropy (RNDADDENTROPY)");
  if (::ioctl(random.get(), RNDRESEEDCRNG) != 0)
    return errno_status(errno, "reseed the CRNG (RNDRESEEDCRNG)");
  return status::ok();
}

} // namespace

void guest_agent::state::on(const refresh_request& m) {
  auto fail = [&](const status& why) { send_error(0, m.request_id, why, true); };
  if (m.entropy.size() > refresh_entropy_bytes_max) {
    fail(make_status(errc::too_large, "more than " + std::to_string(refresh_entropy_bytes_max)
                                        + " bytes of entropy"));
    return;
  }
  if (auto added = add_entropy(m.entropy); !added.is_ok()) {
    fail(added);
    return;
  }
  int64_t step_ns = 0;
  if (m.realtime_ns > 0) {
    const int64_t before = realtime_ns();
    timespec to{static_cast<time_t>(m.realtime_ns / 1'000'000'000),
                static_cast<long>(m.realtime_ns % 1'000'000'000)};
    if (::clock_settime(CLOCK_REALTIME, &to) != 0) {
      fail(errno_status(errno, "set the clock"));
      return;
    }
    step_ns = m.realtime_ns - before;
  }
  if (!m.hostname.empty() && ::sethostname(m.hostname.data(), m.hostname.size()) != 0) {
    fail(errno_status(errno, "set the hostname"));
    return;
  }
  if (!m.network.empty()) {
    auto network = parse_guest_network(m.network);
    if (!network) {
      fail(make_status(errc::invalid_argument,
                       "bad network \"" + m.network + "\": ADDRESS/PREFIX,GATEWAY"));
      return;
    }
    if (auto wired = configure_guest_network(*network); !wired.is_ok()) {
      fail(wired);
      return;
    }
  }
  // Output the old session was sent but never acknowledged went to a host
  // that is gone: the new session starts every stream with a whole window,
  // or a process that filled it would block on its output for good.
  for (auto& [id, stream] : processes) {
    if (stream.reaped && stream.credit == 0)
      stream.drain_deadline_ms = now_ms() + options.exit_drain_ms;
    stream.credit = stream.window;
  }
  const uint32_t stream_id_max = processes.empty() ? 0 : processes.rbegin()->first;
  send(refreshed{m.request_id, step_ns, stream_id_max});
  // The host's session after a restore is new (the first hello went to the
  // socket of the VM that was saved): it learns the limits again from this.
  send(make_hello());
}

} // namespace airlock::guest
