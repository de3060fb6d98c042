#pragma once
// Base64 (RFC 4648): the standard alphabet, padded, for the API's binary
// output chunks; the URL alphabet, unpadded, for data-plane tokens. Header
// only, so that the CLI (which links schema and no other airlock library)
// shares it without linking anything.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace airlock {

enum class base64_variant : uint8_t {
  standard, ///< "+/" with '=' padding (section 4)
  url,      ///< "-_" without padding (section 5)
};

namespace detail {
inline std::string_view base64_alphabet(base64_variant variant) noexcept {
  return variant == base64_variant::standard
           ? "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
           : "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
}
} // namespace detail

inline std::string base64_encode(std::string_view bytes,
                                 base64_variant variant = base64_variant::standard) {
  auto alphabet = detail::base64_alphabet(variant);
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  uint32_t buffer = 0;
  int bits = 0;
  for (unsigned char byte : bytes) {
    buffer = (buffer << 8) | byte;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out += alphabet[(buffer >> bits) & 0x3f];
    }
  }
  if (bits > 0)
    out += alphabet[(buffer << (6 - bits)) & 0x3f];
  if (variant == base64_variant::standard)
    while (out.size() % 4 != 0)
      out += '=';
  return out;
}

/// The bytes of `text`; nullopt for a character outside the alphabet, a
/// misplaced '=' (standard: padding is optional but only at the end of a
/// group), or a length no encoder produces. `strict`: the unused low bits
/// of the last character must be zero, so every byte string has exactly
/// one text (tokens rely on it).
inline std::optional<std::string> base64_decode(std::string_view text,
                                                base64_variant variant = base64_variant::standard,
                                                bool strict = false) {
  if (variant == base64_variant::standard) {
    size_t padding = 0;
    while (padding < 2 && padding < text.size() && text[text.size() - 1 - padding] == '=')
      ++padding;
    if (padding > 0 && text.size() % 4 != 0)
      return std::nullopt;
    text.remove_suffix(padding);
  }
  if (text.size() % 4 == 1)
    return std::nullopt;
  auto alphabet = detail::base64_alphabet(variant);
  std::string out;
  out.reserve(text.size() * 3 / 4);
  uint32_t buffer = 0;
  int bits = 0;
  for (char c : text) {
    auto pos = alphabet.find(c);
    if (pos == std::string_view::npos)
      return std::nullopt;
    buffer = (buffer << 6) | static_cast<uint32_t>(pos);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((buffer >> bits) & 0xff);
    }
  }
  if (strict && (buffer & ((1u << bits) - 1)) != 0)
    return std::nullopt;
  return out;
}

} // namespace airlock
