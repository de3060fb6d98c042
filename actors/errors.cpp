#include "actors/errors.hpp"

#include <caf/message.hpp>
#include <caf/sec.hpp>

namespace airlock {

caf::error make_error(errc code) { return caf::error(static_cast<uint8_t>(code), errc_category); }

caf::error make_error(errc code, std::string message) {
  return caf::error(static_cast<uint8_t>(code), errc_category,
                    caf::make_message(std::move(message)));
}

caf::error make_error(const status& failure) { return make_error(failure.code, failure.message); }

status to_status(const caf::error& error) {
  if (!error)
    return status::ok();
  if (error.category() == errc_category) {
    std::string message;
    if (error.context().match_elements<std::string>())
      message = error.context().get_as<std::string>(0);
    return make_status(static_cast<errc>(error.code()), std::move(message));
  }
  if (error == caf::sec::request_timeout)
    return make_status(errc::timeout, "the request timed out");
  return make_status(errc::internal, caf::to_string(error));
}

} // namespace airlock
