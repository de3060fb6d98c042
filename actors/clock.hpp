#pragma once
// Wall-clock time and randomness are injected so that tests and the simulator
// can drive them. Actor timers use the CAF actor clock instead.

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

namespace airlock {

/// Unix epoch milliseconds, for timestamps that are stored or shown.
class wall_clock {
public:
  virtual ~wall_clock() = default;
  virtual int64_t now_ms() const = 0;
};

class system_wall_clock final : public wall_clock {
public:
  int64_t now_ms() const override;
};

/// A clock that only moves when told to. Thread-safe.
class manual_wall_clock final : public wall_clock {
public:
  explicit manual_wall_clock(int64_t start_ms = 1'700'000'000'000) : now_ms_(start_ms) {}
  int64_t now_ms() const override { return now_ms_.load(); }
  void advance_ms(int64_t delta_ms) { now_ms_ += delta_ms; }

private:
  std::atomic<int64_t> now_ms_;
};

/// A source of random 64-bit values for identifiers.
class entropy_source {
public:
  virtual ~entropy_source() = default;
  virtual uint64_t next_u64() = 0;
};

/// Backed by the OS CSPRNG (getrandom). Thread-safe.
class system_entropy final : public entropy_source {
public:
  uint64_t next_u64() override;
};

/// Deterministic (splitmix64) for tests and simulation; a seed reproduces a run.
/// Not thread-safe.
class seeded_entropy final : public entropy_source {
public:
  explicit seeded_entropy(uint64_t seed) : state_(seed) {}
  uint64_t next_u64() override;

private:
  uint64_t state_;
};

/// A new identifier: `prefix` + 12 hex digits of milliseconds + 16 random hex
/// digits. Ids of one prefix sort by creation time, which keeps list
/// pagination stable.
std::string make_id(std::string_view prefix, int64_t now_ms, entropy_source& entropy);

} // namespace airlock
