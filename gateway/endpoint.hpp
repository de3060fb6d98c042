#pragma once
// HOST:PORT as operators write it on command lines and in config files.

#include <cstdint>
#include <string>
#include <string_view>

#include "schema/errc.hpp"

namespace airlock::gateway {

/// A host (name, IPv4 or IPv6 address) and a TCP port. Port 0 asks the kernel
/// for a free port when listening.
struct endpoint {
  std::string host;
  uint16_t port = 0;
  bool operator==(const endpoint&) const = default;
};

/// Parses "HOST:PORT", "[IPV6]:PORT". invalid_argument with a sentence naming
/// the expected form when `text` is not one of those or the port is not in
/// 0..65535.
result<endpoint> parse_endpoint(std::string_view text);

/// "HOST:PORT", with brackets around an IPv6 host.
std::string to_string(const endpoint& address);

/// The address a client on this machine should dial to reach a listener bound
/// to `address`: a wildcard host (0.0.0.0, ::) becomes the matching loopback.
endpoint dialable(const endpoint& address);

} // namespace airlock::gateway
