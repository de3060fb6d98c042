#pragma once
// The version of this build and the git commit it was built from.

#include <string>
#include <string_view>

namespace airlock::airlockd {

/// The project version from CMake, e.g. "0.1.0".
std::string_view version();

/// The abbreviated git commit of the build, or "unknown" outside a git checkout.
std::string_view git_commit();

/// "airlockd 0.1.0 (commit 0123456789ab)".
std::string version_line();

} // namespace airlock::airlockd
