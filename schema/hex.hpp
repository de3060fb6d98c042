#pragma once
// Hexadecimal digits, for parsers of percent-escapes, MAC addresses and the like.

#include <string>
#include <string_view>

namespace airlock::schema {

/// The value of hex digit `c` (either case); -1 for anything else.
constexpr int hex_digit_value(char c) noexcept {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

/// `bytes` as lower-case hex, two digits per byte.
inline std::string to_hex(std::string_view bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char byte : bytes) {
    out.push_back(digits[byte >> 4]);
    out.push_back(digits[byte & 0x0f]);
  }
  return out;
}

} // namespace airlock::schema
