#include "worker/egress/address_filter.hpp"

#include <array>
#include <charconv>

namespace airlock::worker::egress {
namespace {

struct denied_range {
  cidr range;
  std::string_view what;
};

constexpr uint32_t ip(uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
  return (a << 24) | (b << 16) | (c << 8) | d;
}

// Ranges that are never "the internet" (RFC 6890 special-purpose registry,
// minus the documentation ranges that tests use as public addresses).
constexpr std::array<denied_range, 11> special_ranges{{
  {{ip(0, 0, 0, 0), 8}, "the 'this network' range"},
  {{ip(10, 0, 0, 0), 8}, "a private range"},
  {{ip(100, 64, 0, 0), 10}, "the shared (carrier-grade NAT) range"},
  {{ip(127, 0, 0, 0), 8}, "the loopback range"},
  {{ip(169, 254, 0, 0), 16}, "the link-local/metadata range"},
  {{ip(172, 16, 0, 0), 12}, "a private range"},
  {{ip(192, 0, 0, 0), 24}, "the IETF protocol assignments range"},
  {{ip(192, 168, 0, 0), 16}, "a private range"},
  {{ip(198, 18, 0, 0), 15}, "the benchmarking range"},
  {{ip(224, 0, 0, 0), 4}, "the multicast range"},
  {{ip(240, 0, 0, 0), 4}, "the reserved/broadcast range"},
}};

uint32_t mask(uint32_t prefix) { return prefix == 0 ? 0 : ~uint32_t{0} << (32 - prefix); }

bool inside_any(const std::vector<cidr>& ranges, uint32_t address) {
  for (const auto& r : ranges)
    if (r.contains(address))
      return true;
  return false;
}

} // namespace

bool cidr::contains(uint32_t address) const noexcept { return (address & mask(prefix)) == base; }

std::optional<uint32_t> parse_ipv4(std::string_view text) {
  uint32_t out = 0;
  for (int i = 0; i < 4; ++i) {
    if (i > 0) {
      if (text.empty() || text.front() != '.')
        return std::nullopt;
      text.remove_prefix(1);
    }
    unsigned octet = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), octet);
    size_t used = static_cast<size_t>(end - text.data());
    if (ec != std::errc{} || used == 0 || used > 3 || octet > 255
        || (used > 1 && text.front() == '0'))
      return std::nullopt;
    out = (out << 8) | octet;
    text.remove_prefix(used);
  }
  if (!text.empty())
    return std::nullopt;
  return out;
}

std::string format_ipv4(uint32_t address) {
  return std::to_string(address >> 24) + '.' + std::to_string((address >> 16) & 0xff) + '.'
         + std::to_string((address >> 8) & 0xff) + '.' + std::to_string(address & 0xff);
}

std::string format_cidr(const cidr& range) {
  return format_ipv4(range.base) + '/' + std::to_string(range.prefix);
}

result<cidr> parse_cidr(std::string_view text) {
  auto bad = [text] {
    return make_status(errc::invalid_argument,
                       "\"" + std::string(text.substr(0, 64))
                         + "\" is not an IPv4 range (a.b.c.d/n with n from 0 to 32)");
  };
  auto slash = text.find('/');
  auto address = parse_ipv4(text.substr(0, slash));
  if (!address)
    return bad();
  uint32_t prefix = 32;
  if (slash != std::string_view::npos) {
    auto digits = text.substr(slash + 1);
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), prefix);
    if (digits.empty() || ec != std::errc{} || end != digits.data() + digits.size() || prefix > 32)
      return bad();
  }
  return cidr{*address & mask(prefix), prefix};
}

address_filter::address_filter(std::vector<cidr> allowed_private, std::vector<cidr> extra_denied)
    : allowed_private_(std::move(allowed_private)), extra_denied_(std::move(extra_denied)) {}

std::optional<std::string> address_filter::refuse_reason(uint32_t address) const {
  for (const auto& r : extra_denied_)
    if (r.contains(address))
      return format_ipv4(address) + " is in " + format_cidr(r) + ", a denied range";
  if (inside_any(allowed_private_, address))
    return std::nullopt;
  for (const auto& special : special_ranges)
    if (special.range.contains(address))
      return format_ipv4(address) + " is in " + format_cidr(special.range) + ", "
             + std::string(special.what);
  return std::nullopt;
}

} // namespace airlock::worker::egress
