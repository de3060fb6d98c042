#pragma once
// What the egress proxy changes in a request before it leaves for the
// upstream, and how it checks a protocol switch: the hop-by-hop rules of
// RFC 9110 section 7.6.1 and the WebSocket handshake of RFC 6455. After a
// switch the proxy no longer sees requests, so only a switch it can name
// (a WebSocket to the host it judged) is ever forwarded; see docs/egress.md.

#include <optional>
#include <string>
#include <string_view>

#include <boost/beast/http.hpp>

namespace airlock::worker::egress {

namespace http = boost::beast::http;

/// The protocol switch a request asked for, after prepare_upstream_request.
struct protocol_switch {
  /// A well-formed WebSocket upgrade (GET, Connection: upgrade, Upgrade:
  /// websocket, one Sec-WebSocket-Key and -Version): forwarded.
  bool websocket = false;
  std::string websocket_key;
  /// Upgrade tokens that were asked for and stripped ("h2c"); empty if none.
  std::string refused;
};

/// Makes `req` fit to forward as one judged request: sets Host to
/// `host_field` (the name that was judged, as judged), removes the fields
/// named in Connection and every hop-by-hop field (Keep-Alive,
/// Proxy-Connection, Proxy-Authorization, TE but `trailers`, Upgrade and
/// HTTP2-Settings outside a WebSocket upgrade), removes fields by which a
/// sandbox would claim another host to the upstream (Forwarded,
/// X-Forwarded-Host ...), and sets Connection for the upstream hop
/// ("Upgrade" for a WebSocket, else close or nothing as the guest asked).
/// A credential is injected after this, so an injected Proxy-Authorization
/// stays. Returns the reason when the request must be refused instead (400):
/// Connection naming a field the request's framing or routing rests on.
std::optional<std::string> prepare_upstream_request(http::request_header<>& req,
                                                    const std::string& host_field,
                                                    protocol_switch& asked);

/// The Sec-WebSocket-Accept value that answers `key` (RFC 6455 section 4.2.2).
std::string websocket_accept(std::string_view key);

/// True when `res` (a 101) completes the WebSocket upgrade of `asked`: Upgrade
/// websocket, Connection naming upgrade, the Accept that answers the key.
bool answers_websocket(const http::response_header<>& res, const protocol_switch& asked);

/// "websocket" and the like for an audit record: the Upgrade field of `res`,
/// bounded, or "none".
std::string switched_protocol(const http::response_header<>& res);

} // namespace airlock::worker::egress
