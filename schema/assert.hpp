#pragma once
// AIRLOCK_ASSERT: for bugs only, never for input. On in release builds: a
// broken invariant stops the process before it can persist nonsense.

#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace airlock::detail {

template <class... Context>
[[noreturn]] void assertion_failed(const char* condition, const char* file, int line,
                                   const Context&... context) {
  std::ostringstream out;
  ((out << ' ' << context), ...);
  std::fprintf(stderr, "airlock: assertion failed: %s at %s:%d:%s\n", condition, file, line,
               out.str().c_str());
  std::abort();
}

} // namespace airlock::detail

#define AIRLOCK_ASSERT(condition, ...)                                                             \
  do {                                                                                             \
    if (!(condition)) [[unlikely]]                                                                 \
      ::airlock::detail::assertion_failed(#condition, __FILE__,                                    \
                                          __LINE__ __VA_OPT__(, ) __VA_ARGS__);                    \
  } while (false)
