#include "actors/clock.hpp"

#include <sys/random.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <stdexcept>

namespace airlock {

int64_t system_wall_clock::now_ms() const {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

uint64_t system_entropy::next_u64() {
  uint64_t value = 0;
  auto* out = reinterpret_cast<char*>(&value);
  size_t filled = 0;
  while (filled < sizeof(value)) {
    auto n = getrandom(out + filled, sizeof(value) - filled, 0);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      throw std::runtime_error("getrandom failed"); // the kernel is broken: a bug-class failure
    filled += static_cast<size_t>(n);
  }
  return value;
}

uint64_t seeded_entropy::next_u64() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

std::string make_id(std::string_view prefix, int64_t now_ms, entropy_source& entropy) {
  char buffer[64];
  auto ms = static_cast<unsigned long long>(now_ms) & 0xffffffffffffULL;
  std::snprintf(buffer, sizeof(buffer), "%012llx%016llx", ms,
                static_cast<unsigned long long>(entropy.next_u64()));
  return std::string(prefix) + buffer;
}

} // namespace airlock
