#pragma once
// What a test needs of the host, checked in one place so that every suite
// that cannot run here says why and is reported as not run (GTEST_SKIP, which
// ctest shows as "Not Run ... Skipped"), never as passed.

#include <optional>
#include <string>
#include <string_view>

namespace airlock::test {

bool running_as_root() noexcept;

/// "needs root: <why>" when this process is not root; nothing when it is.
std::optional<std::string> root_missing(std::string_view why);

} // namespace airlock::test

/// Skips the current test, with the reason, unless it runs as root.
#define AIRLOCK_REQUIRE_ROOT(why)                                                                  \
  do {                                                                                             \
    if (auto airlock_root_missing_ = ::airlock::test::root_missing(why))                           \
      GTEST_SKIP() << *airlock_root_missing_;                                                      \
  } while (false)
