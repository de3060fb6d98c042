#pragma once
// Standard base64 (RFC 4648 section 4, padded): the API's "encoding": "base64"
// output chunks.

#include <optional>
#include <string>
#include <string_view>

namespace airlock::cli {

/// Padded standard base64 of `bytes`.
std::string base64_encode(std::string_view bytes);

/// The bytes of padded (or unpadded) standard base64; nullopt for any other
/// character, a misplaced '=', or a length no encoder produces. Whitespace is
/// not allowed: the server sends one line.
std::optional<std::string> base64_decode(std::string_view text);

} // namespace airlock::cli
