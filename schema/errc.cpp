#include "schema/errc.hpp"

namespace airlock {

std::string_view to_string(errc code) noexcept {
  switch (code) {
    case errc::none: return "none";
    case errc::invalid_argument: return "invalid_argument";
    case errc::not_found: return "not_found";
    case errc::already_exists: return "already_exists";
    case errc::wrong_state: return "wrong_state";
    case errc::corrupt_record: return "corrupt_record";
    case errc::unsupported_version: return "unsupported_version";
    case errc::io_error: return "io_error";
    case errc::timeout: return "timeout";
    case errc::outcome_unknown: return "outcome_unknown";
    case errc::cancelled: return "cancelled";
    case errc::unavailable: return "unavailable";
    case errc::resource_exhausted: return "resource_exhausted";
    case errc::internal: return "internal";
    case errc::unknown_kind: return "unknown_kind";
    case errc::deadline_exceeded: return "deadline_exceeded";
    case errc::unauthenticated: return "unauthenticated";
    case errc::permission_denied: return "permission_denied";
    case errc::conflict: return "conflict";
    case errc::gone: return "gone";
    case errc::too_large: return "too_large";
    case errc::unimplemented: return "unimplemented";
  }
  return "unknown_error";
}

errc errc_from_string(std::string_view name) noexcept {
  for (int i = 0; i <= static_cast<int>(errc::unimplemented); ++i) {
    auto code = static_cast<errc>(i);
    if (to_string(code) == name)
      return code;
  }
  return errc::internal;
}

} // namespace airlock
