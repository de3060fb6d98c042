#include "gateway/endpoint.hpp"

#include <charconv>

namespace airlock::gateway {

namespace {

status bad_endpoint(std::string_view text, std::string_view why) {
  return make_status(errc::invalid_argument, "expected HOST:PORT (IPv6 as [ADDR]:PORT), got '"
                                               + std::string(text) + "': " + std::string(why));
}

} // namespace

result<endpoint> parse_endpoint(std::string_view text) {
  std::string_view host;
  std::string_view port_text;
  if (text.starts_with('[')) {
    auto close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':')
      return bad_endpoint(text, "an IPv6 address needs ']' followed by ':PORT'");
    host = text.substr(1, close - 1);
    port_text = text.substr(close + 2);
  } else {
    auto colon = text.rfind(':');
    if (colon == std::string_view::npos)
      return bad_endpoint(text, "no ':PORT'");
    host = text.substr(0, colon);
    port_text = text.substr(colon + 1);
    if (host.find(':') != std::string_view::npos)
      return bad_endpoint(text, "put an IPv6 address in brackets");
  }
  if (host.empty())
    return bad_endpoint(text, "the host is empty");
  unsigned port = 0;
  auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (port_text.empty() || ec != std::errc{} || end != port_text.data() + port_text.size()
      || port > 65535)
    return bad_endpoint(text, "the port must be a number in 0..65535");
  return endpoint{std::string(host), static_cast<uint16_t>(port)};
}

std::string to_string(const endpoint& address) {
  std::string port = std::to_string(address.port);
  if (address.host.find(':') != std::string::npos)
    return "[" + address.host + "]:" + port;
  return address.host + ":" + port;
}

endpoint dialable(const endpoint& address) {
  if (address.host == "0.0.0.0")
    return {"127.0.0.1", address.port};
  if (address.host == "::" || address.host == "[::]")
    return {"::1", address.port};
  return address;
}

} // namespace airlock::gateway
