#pragma once
// airlock::errc as a CAF error category, so failures cross actor (and host)
// boundaries as codes a caller can act on, with a human sentence as context.

#include <caf/atom.hpp>
#include <caf/error.hpp>

#include <string>

#include "schema/errc.hpp"

namespace airlock {

/// The CAF error category of airlock::errc.
inline constexpr caf::atom_value errc_category = caf::atom("airlock");

/// Lets `caf::error e = errc::not_found;` work.
caf::error make_error(errc code);
caf::error make_error(errc code, std::string message);
caf::error make_error(const status& failure);

/// Converts any CAF error into a status: airlock errors keep their code and
/// message; a request timeout becomes errc::timeout; everything else becomes
/// errc::internal with CAF's rendering of it.
status to_status(const caf::error& error);

} // namespace airlock
