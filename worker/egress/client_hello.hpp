#pragma once
// Reads the server name (SNI) out of a TLS ClientHello before the egress proxy
// decides whether to terminate, pass through or refuse a connection. Pure
// parsing over bytes already read from the guest: no OpenSSL, no sockets.

#include <cstddef>
#include <string>
#include <string_view>

namespace airlock::worker::egress {

/// The most bytes the egress proxy reads before it must know the ClientHello.
inline constexpr std::size_t client_hello_bytes_max = 16384;

enum class hello_status {
  need_more, ///< a prefix of a plausible ClientHello: read more bytes
  not_tls,   ///< the first bytes are not a TLS handshake record
  ok,        ///< a whole ClientHello was parsed; `out` is filled
  malformed, ///< TLS framing, but the hello is broken or larger than the bound
};

struct client_hello {
  std::string sni;      ///< the host_name entry of server_name, as sent (not validated)
  bool has_sni = false; ///< false: the hello carries no server_name host_name entry
};

/// Parses a ClientHello from `bytes`, which may span several TLS records.
/// Answers need_more while the hello is incomplete and `bytes` is below
/// client_hello_bytes_max, malformed beyond it. Thread-safe (pure).
hello_status parse_client_hello(std::string_view bytes, client_hello& out);

} // namespace airlock::worker::egress
