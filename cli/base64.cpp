#include "cli/base64.hpp"

#include "schema/base64.hpp"

namespace airlock::cli {

std::string base64_encode(std::string_view bytes) { return airlock::base64_encode(bytes); }

std::optional<std::string> base64_decode(std::string_view text) {
  return airlock::base64_decode(text);
}

} // namespace airlock::cli
