#pragma once
// Which resolved IPv4 addresses the egress proxy may connect to. A name the
// policy allows may still resolve to the host's loopback, the cloud metadata
// service, a private network or another sandbox (DNS rebinding); the egress proxy
// and its resolver refuse those addresses unless an operator allowed a range.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "schema/errc.hpp"

namespace airlock::worker::egress {

/// An IPv4 range; `base` in host byte order with the host bits cleared.
struct cidr {
  uint32_t base = 0;
  uint32_t prefix = 32;
  bool contains(uint32_t address) const noexcept;
  bool operator==(const cidr&) const = default;
};

/// "a.b.c.d/n" or "a.b.c.d" (a /32). Host bits are cleared ("10.1.2.3/8" is
/// 10.0.0.0/8). errc::invalid_argument otherwise.
result<cidr> parse_cidr(std::string_view text);

/// Strict dotted quad ("1.2.3.4", decimal, no leading zeros beyond "0") in host
/// byte order; nullopt otherwise.
std::optional<uint32_t> parse_ipv4(std::string_view text);

/// Dotted quad of an address in host byte order.
std::string format_ipv4(uint32_t address);

/// "a.b.c.d/n".
std::string format_cidr(const cidr& range);

/// Decides which resolved addresses (host byte order) the egress proxy may
/// connect to. Immutable after construction: safe to share between threads.
class address_filter {
public:
  /// Denied unless inside `allowed_private`: 0/8, 10/8, 100.64/10, 127/8,
  /// 169.254/16 (link-local, cloud metadata), 172.16/12, 192.0.0/24,
  /// 192.168/16, 198.18/15, 224/4, 240/4 (255.255.255.255 included), and
  /// every range in `extra_denied` (the worker's own sandbox address pool).
  /// The documentation ranges (192.0.2/24, 198.51.100/24, 203.0.113/24) count
  /// as public. `extra_denied` wins over `allowed_private`.
  explicit address_filter(std::vector<cidr> allowed_private = {},
                          std::vector<cidr> extra_denied = {});

  /// nullopt when the egress proxy may connect to `address`; else a sentence such
  /// as "169.254.169.254 is in 169.254.0.0/16, the link-local/metadata range".
  std::optional<std::string> refuse_reason(uint32_t address) const;

private:
  std::vector<cidr> allowed_private_;
  std::vector<cidr> extra_denied_;
};

} // namespace airlock::worker::egress
