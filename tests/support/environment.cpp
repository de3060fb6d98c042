#include "tests/support/environment.hpp"

#include <unistd.h>

namespace airlock::test {

bool running_as_root() noexcept { return ::geteuid() == 0; }

std::optional<std::string> root_missing(std::string_view why) {
  if (running_as_root())
    return std::nullopt;
  return "needs root: " + std::string(why);
}

} // namespace airlock::test
