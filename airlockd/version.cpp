#include "airlockd/version.hpp"

// Generated at build time by airlockd/build_info.cmake; only this file
// includes it, so a new commit recompiles one file.
#include "airlockd/build_info.hpp"

namespace airlock::airlockd {

std::string_view version() { return build_info::version; }

std::string_view git_commit() { return build_info::git_commit; }

std::string version_line() {
  return "airlockd " + std::string(version()) + " (commit " + std::string(git_commit()) + ")";
}

} // namespace airlock::airlockd
