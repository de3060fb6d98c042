#include "worker/egress/client_hello.hpp"

#include <cstdint>
#include <optional>

namespace airlock::worker::egress {
namespace {

constexpr uint8_t record_handshake = 0x16;
constexpr uint8_t handshake_client_hello = 1;
constexpr uint16_t extension_server_name = 0;
constexpr uint8_t name_type_host_name = 0;
// RFC 8446 5.1: a plaintext record carries at most 2^14 bytes.
constexpr std::size_t record_payload_max = 16384;

/// A bounds-checked reader over a byte range; every read fails once short.
class reader {
public:
  explicit reader(std::string_view bytes) : bytes_(bytes) {}
  std::optional<uint32_t> number(std::size_t width) {
    if (bytes_.size() < width)
      return std::nullopt;
    uint32_t value = 0;
    for (std::size_t i = 0; i < width; ++i)
      value = (value << 8) | static_cast<uint8_t>(bytes_[i]);
    bytes_.remove_prefix(width);
    return value;
  }
  std::optional<std::string_view> take(std::size_t count) {
    if (bytes_.size() < count)
      return std::nullopt;
    auto part = bytes_.substr(0, count);
    bytes_.remove_prefix(count);
    return part;
  }
  /// A field prefixed by its length in `width` bytes.
  std::optional<std::string_view> vector(std::size_t width) {
    auto length = number(width);
    if (!length)
      return std::nullopt;
    return take(*length);
  }
  bool empty() const { return bytes_.empty(); }

private:
  std::string_view bytes_;
};

/// Concatenates the payloads of the leading handshake records. nullopt:
/// not TLS or broken framing (`status` says which).
std::optional<std::string> handshake_bytes(std::string_view bytes, hello_status& status) {
  std::string payload;
  while (bytes.size() >= 5) {
    auto type = static_cast<uint8_t>(bytes[0]);
    auto major = static_cast<uint8_t>(bytes[1]);
    std::size_t length = (static_cast<uint8_t>(bytes[3]) << 8) | static_cast<uint8_t>(bytes[4]);
    if (type != record_handshake || major != 3) {
      // A later record of another type ends the hello early: broken.
      status = payload.empty() ? hello_status::not_tls : hello_status::malformed;
      return std::nullopt;
    }
    if (length == 0 || length > record_payload_max) {
      status = hello_status::malformed;
      return std::nullopt;
    }
    // A record still arriving contributes what has arrived: the handshake
    // header inside it already tells whether the hello can fit the bound.
    payload.append(bytes.substr(5, length));
    if (bytes.size() < 5 + length) {
      bytes = {};
      break;
    }
    bytes.remove_prefix(5 + length);
  }
  if (payload.empty() && !bytes.empty()) {
    auto type = static_cast<uint8_t>(bytes[0]);
    bool tls_start = type == record_handshake && (bytes.size() < 2 || bytes[1] == 3);
    if (!tls_start) {
      status = hello_status::not_tls;
      return std::nullopt;
    }
  }
  return payload;
}

/// Reads the server_name extension's host_name entry.
hello_status parse_server_name(std::string_view data, client_hello& out) {
  reader in{data};
  auto list = in.vector(2);
  if (!list || !in.empty())
    return hello_status::malformed;
  reader names{*list};
  while (!names.empty()) {
    auto type = names.number(1);
    auto name = names.vector(2);
    if (!type || !name)
      return hello_status::malformed;
    if (*type == name_type_host_name && !out.has_sni) {
      if (name->empty())
        return hello_status::malformed;
      out.sni = std::string{*name};
      out.has_sni = true;
    }
  }
  return hello_status::ok;
}

hello_status parse_hello_body(std::string_view body, client_hello& out) {
  reader in{body};
  if (!in.number(2) || !in.take(32))
    return hello_status::malformed; // version, random
  auto session = in.vector(1);
  auto suites = in.vector(2);
  auto compression = in.vector(1);
  if (!session || session->size() > 32 || !suites || suites->empty() || suites->size() % 2 != 0
      || !compression || compression->empty())
    return hello_status::malformed;
  if (in.empty())
    return hello_status::ok; // no extensions at all
  auto extensions = in.vector(2);
  if (!extensions || !in.empty())
    return hello_status::malformed;
  reader ext{*extensions};
  bool seen_server_name = false;
  while (!ext.empty()) {
    auto type = ext.number(2);
    auto data = ext.vector(2);
    if (!type || !data)
      return hello_status::malformed;
    if (*type != extension_server_name)
      continue;
    // Two server_name extensions could make us judge one name while the
    // upstream's TLS stack reads the other.
    if (seen_server_name)
      return hello_status::malformed;
    seen_server_name = true;
    if (auto status = parse_server_name(*data, out); status != hello_status::ok)
      return status;
  }
  return hello_status::ok;
}

} // namespace

hello_status parse_client_hello(std::string_view bytes, client_hello& out) {
  out = client_hello{};
  if (bytes.empty())
    return hello_status::need_more;
  auto status = hello_status::need_more;
  auto payload = handshake_bytes(bytes.substr(0, client_hello_bytes_max), status);
  if (!payload)
    return status;
  auto more = [&] {
    return bytes.size() >= client_hello_bytes_max ? hello_status::malformed
                                                  : hello_status::need_more;
  };
  if (payload->size() < 4)
    return more();
  if (static_cast<uint8_t>((*payload)[0]) != handshake_client_hello)
    return hello_status::malformed;
  std::size_t length = (static_cast<uint8_t>((*payload)[1]) << 16)
                       | (static_cast<uint8_t>((*payload)[2]) << 8)
                       | static_cast<uint8_t>((*payload)[3]);
  if (length + 4 > client_hello_bytes_max)
    return hello_status::malformed;
  if (payload->size() < length + 4)
    return more();
  return parse_hello_body(std::string_view{*payload}.substr(4, length), out);
}

} // namespace airlock::worker::egress
