#pragma once
// Finds the Debian mirror this host already uses, so that the `base` template
// is bootstrapped from the same (possibly local or proxied) mirror as the
// host's own packages. Reads both apt formats: one-line `deb URI SUITE COMP..`
// (sources.list, *.list) and deb822 stanzas (*.sources).

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "schema/errc.hpp"

namespace airlock::worker {

/// The URI of the first `deb` line for exactly `suite` (not suite-updates or
/// suite-security) with component `main`, in one-line format; comments,
/// deb-src lines, `[options]` and cdrom:/mirror+ URIs handled.
std::optional<std::string> find_mirror_in_list(std::string_view text, std::string_view suite);

/// The same for deb822 text: the first URI of the first enabled stanza whose
/// Types has `deb`, Suites has `suite` and Components has `main`.
std::optional<std::string> find_mirror_in_deb822(std::string_view text, std::string_view suite);

/// Searches `apt_dir`/sources.list, then sources.list.d/*.list and *.sources
/// in name order (as apt reads them). not_found names the files it read and
/// says to set the mirror explicitly.
result<std::string> find_host_mirror(const std::filesystem::path& apt_dir, std::string_view suite);

} // namespace airlock::worker
