#pragma once
// Hexadecimal digits, for parsers of percent-escapes, MAC addresses and the like.

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

} // namespace airlock::schema
