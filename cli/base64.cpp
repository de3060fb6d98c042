#include "cli/base64.hpp"

#include <cstdint>

namespace airlock::cli {

namespace {

constexpr std::string_view alphabet =
  "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

} // namespace

std::string base64_encode(std::string_view bytes) {
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
  while (out.size() % 4 != 0)
    out += '=';
  return out;
}

std::optional<std::string> base64_decode(std::string_view text) {
  // Padding: at most two '=' and only at the end of a 4-character group.
  size_t padding = 0;
  while (padding < 2 && padding < text.size() && text[text.size() - 1 - padding] == '=')
    ++padding;
  if (padding > 0 && text.size() % 4 != 0)
    return std::nullopt;
  text.remove_suffix(padding);
  if (text.size() % 4 == 1)
    return std::nullopt;
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
  return out;
}

} // namespace airlock::cli
