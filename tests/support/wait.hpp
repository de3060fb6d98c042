#pragma once
// Waiting in tests for something another thread does, with a deadline
// instead of a fixed sleep. Where the code under test (or a test double it
// calls, such as a recording sink) can announce a change, it calls
// change_signal::notify() and the waiter wakes at once; where it cannot, the
// waiter re-checks on a short interval, so a slow host only makes the test
// slower, never wrong.

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace airlock::test {

using std::chrono::milliseconds;

/// How long a test waits for anything before it fails: generous, because CI
/// machines are slow and two test executables may run at once.
inline constexpr milliseconds wait_max{20'000};

/// How long a test waits for a condition unless it says otherwise.
inline constexpr milliseconds default_wait{10'000};

/// Re-check interval when nothing notifies.
inline constexpr std::chrono::milliseconds recheck_interval{5};

/// Announces "something changed" to wait_for callers. Thread-safe.
class change_signal {
public:
  void notify() {
    {
      std::lock_guard lock{mutex_};
      ++changes_;
    }
    changed_.notify_all();
  }

  /// Waits until `done()` holds or `limit` passes; true when it held.
  /// `done` is also re-checked every `interval` without a notification.
  template <class Predicate>
  bool wait_for(Predicate done, std::chrono::milliseconds limit = default_wait,
                std::chrono::milliseconds interval = recheck_interval) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    std::unique_lock lock{mutex_};
    for (;;) {
      auto seen = changes_;
      lock.unlock();
      if (done())
        return true;
      lock.lock();
      auto now = std::chrono::steady_clock::now();
      if (now >= deadline)
        break;
      auto until = std::min(deadline, now + interval);
      changed_.wait_until(lock, until, [&] { return changes_ != seen; });
    }
    lock.unlock();
    return done();
  }

private:
  std::mutex mutex_;
  std::condition_variable changed_;
  uint64_t changes_ = 0;
};

/// Waits until `done()` holds or `limit` passes, checking every `interval`;
/// true when it held. For code that has no change_signal to notify.
template <class Predicate>
bool wait_for(Predicate done, std::chrono::milliseconds limit = default_wait,
              std::chrono::milliseconds interval = recheck_interval) {
  change_signal never_notified;
  return never_notified.wait_for(done, limit, interval);
}

} // namespace airlock::test
