#pragma once
// A token bucket for one credential's rate limit: holds at most the
// per-minute rate, refills rate/60 tokens a second. Time is passed in so that
// tests drive it.

#include <algorithm>
#include <chrono>
#include <cstdint>

namespace airlock::worker::egress {

class token_bucket {
public:
  using clock = std::chrono::steady_clock;

  /// `per_minute` 0 means unlimited. The bucket starts full at `now`.
  explicit token_bucket(uint32_t per_minute, clock::time_point now = clock::now())
      : per_minute_(per_minute), tokens_(per_minute), last_(now) {}

  /// Takes one token if there is one. Not thread-safe: callers lock.
  bool try_take(clock::time_point now) {
    if (per_minute_ == 0)
      return true;
    if (now > last_) {
      double seconds = std::chrono::duration<double>(now - last_).count();
      tokens_ = std::min<double>(per_minute_, tokens_ + seconds * per_minute_ / 60.0);
      last_ = now;
    }
    if (tokens_ < 1.0)
      return false;
    tokens_ -= 1.0;
    return true;
  }

  /// True when the bucket would be full at `now` (nothing to remember).
  bool is_full(clock::time_point now) const {
    if (per_minute_ == 0)
      return true;
    double seconds = now > last_ ? std::chrono::duration<double>(now - last_).count() : 0.0;
    return tokens_ + seconds * per_minute_ / 60.0 >= per_minute_;
  }

  uint32_t per_minute() const { return per_minute_; }

private:
  uint32_t per_minute_;
  double tokens_;
  clock::time_point last_;
};

} // namespace airlock::worker::egress
