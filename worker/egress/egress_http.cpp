// HTTP/1.1 on a guest connection (plain, or TLS the proxy terminated): judge
// each request, inject a credential, forward it to an upstream the proxy
// resolved and connected itself, and stream the response back.

#include <strings.h>

#include <limits>

#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <boost/beast/http.hpp>

#include "schema/egress_rules.hpp"
#include "worker/egress/body_relay.hpp"
#include "worker/egress/http_hop.hpp"
#include "worker/egress/proxy_internal.hpp"

namespace airlock::worker::egress {
namespace {

namespace http = beast::http;
using request_parser = http::request_parser<http::buffer_body>;
using response_parser = http::response_parser<http::buffer_body>;

/// The upstream connection a guest connection reuses while the host stays.
template <class Upstream>
struct upstream_link {
  std::optional<Upstream> stream;
  std::string host;
  beast::flat_buffer buffer;
  /// Body relay buffer of both directions (relay_chunk_bytes), allocated at
  /// the first body that does not arrive with its header; kept for the
  /// connection's next requests.
  std::vector<char> relay_space;
  void reset() {
    if (stream)
      tunnel_detail::close_lowest(*stream);
    stream.reset();
    host.clear();
    buffer.clear();
  }
};

/// Beast 1.74 speaks boost::string_view.
std::string_view sv(beast::string_view text) { return {text.data(), text.size()}; }

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && ::strncasecmp(a.data(), b.data(), a.size()) == 0;
}

/// "GET /path" without the query string (it may carry secrets), bounded.
std::string request_detail(const http::request<http::buffer_body>& request) {
  std::string_view target = sv(request.target());
  target = target.substr(0, target.find('?'));
  constexpr std::size_t path_max = 256;
  std::string detail{sv(request.method_string())};
  detail += ' ';
  detail += target.substr(0, path_max);
  return detail;
}

/// A refusal: HTTP status and the reason for the body and the audit log.
struct refusal {
  http::status status = http::status::forbidden;
  std::string reason;
};

/// Splits "host[:port]" ("[v6]:port" too); false when the port is not a number.
bool split_host(std::string_view text, std::string_view& host, std::optional<uint16_t>& port) {
  auto colon = text.rfind(':');
  auto bracket = text.rfind(']');
  if (colon == std::string_view::npos || (bracket != std::string_view::npos && bracket > colon)) {
    host = text;
    return true;
  }
  host = text.substr(0, colon);
  auto digits = text.substr(colon + 1);
  if (digits.empty() || digits.size() > 5)
    return false;
  uint32_t value = 0;
  for (char c : digits) {
    if (c < '0' || c > '9')
      return false;
    value = value * 10 + static_cast<uint32_t>(c - '0');
  }
  if (value == 0 || value > 65535)
    return false;
  port = static_cast<uint16_t>(value);
  return true;
}

/// Checks the request's form and Host; nullopt when it may go, with `host`
/// the judged name and `host_field` the Host to send ("name[:port]").
std::optional<refusal> check_form(const connection& conn,
                                  const http::request<http::buffer_body>& req, std::string& host,
                                  std::string& host_field) {
  using http::status;
  if (req.version() != 10 && req.version() != 11)
    return refusal{status::http_version_not_supported,
                   "HTTP version " + std::to_string(req.version() / 10) + "."
                     + std::to_string(req.version() % 10) + " is refused; use HTTP/1.1"};
  if (req.method() == http::verb::connect)
    return refusal{status::forbidden, "proxy requests are refused (CONNECT)"};
  std::string_view target = sv(req.target());
  bool origin_form = !target.empty() && target.front() == '/';
  bool asterisk = target == "*" && req.method() == http::verb::options;
  if (!origin_form && !asterisk)
    return refusal{status::forbidden,
                   "proxy requests are refused (absolute-form or authority-form target)"};
  if (req.count(http::field::host) != 1)
    return refusal{status::bad_request, "exactly one Host header is required"};
  if (req.count(http::field::content_length) > 0 && req.count(http::field::transfer_encoding) > 0)
    return refusal{status::bad_request, "both Content-Length and Transfer-Encoding are set"};
  std::string_view host_text;
  std::optional<uint16_t> port;
  if (!split_host(sv(req[http::field::host]), host_text, port))
    return refusal{status::bad_request, "Host header is malformed"};
  if (port && *port != conn.original_port)
    return refusal{status::forbidden, "Host port " + std::to_string(*port)
                                        + " differs from the connection's port "
                                        + std::to_string(conn.original_port)};
  if (conn.tls) {
    auto normalized = schema::normalize_host_name(host_text);
    if (!normalized || !iequals(*normalized, conn.sni))
      return refusal{status::misdirected_request, "Host does not match SNI (" + conn.sni + ")"};
  }
  auto verdict = schema::judge_name(conn.sandbox->policy, host_text, conn.original_port);
  if (!verdict.allowed)
    return refusal{status::forbidden, verdict.reason};
  host = schema::normalize_host_name(host_text).value_or(std::string{host_text});
  host_field = port ? host + ":" + std::to_string(*port) : host;
  return std::nullopt;
}

// GCC 12 mishandles temporaries with destructors inside a co_await
// full-expression (double destruction), so coroutines here take their
// strings by const reference and callers pass named objects.
template <class Guest>
awaitable<void> respond(const connection& conn, Guest& guest, http::status status,
                        const std::string& text) {
  http::response<http::string_body> response{status, 11};
  response.set(http::field::server, "airlock-egress");
  response.set(http::field::content_type, "text/plain; charset=utf-8");
  response.keep_alive(false);
  response.body() = text;
  response.body() += '\n';
  response.prepare_payload();
  beast::get_lowest_layer(guest).expires_after(milliseconds(conn.state.options.idle_timeout_ms));
  beast::error_code ignored;
  co_await http::async_write(guest, response, net::redirect_error(use_awaitable, ignored));
}

/// Audits a refused request and answers it; the connection closes after.
template <class Guest>
awaitable<void> refuse(const connection& conn, Guest& guest, const refusal& why,
                       const std::string& target, const std::string& detail) {
  ++conn.state.counters.denied;
  conn.audit("egress", false, why.reason, target, detail);
  std::string text = "airlock egress denied: " + why.reason;
  co_await respond(conn, guest, why.status, text);
}

using grant_list = credential_cache::grant_list;

/// The sandbox's grants (cached per sandbox); null without a source or on a
/// failed fetch, which is audited and the request goes on without credentials.
awaitable<std::shared_ptr<const grant_list>> grants_for(const connection& conn) {
  auto& state = conn.state;
  if (!state.parts.credentials)
    co_return nullptr;
  const auto& sandbox_id = conn.sandbox->sandbox_id;
  auto now = credential_cache::clock::now();
  if (auto cached = state.credentials.find(sandbox_id, now))
    co_return cached;
  using answer = result<grant_list>;
  auto start = [&conn](std::function<void(answer)> done) {
    conn.state.parts.credentials->fetch(*conn.sandbox, std::move(done));
  };
  auto fetched = co_await await_callback<answer>(
    state.life, milliseconds(state.options.credential_fetch_timeout_ms), start);
  if (!fetched || !*fetched) {
    std::string why = fetched ? fetched->error().message : std::string{"timed out"};
    conn.audit("credential", false,
               "credential fetch failed (" + why + "); request sent without credentials",
               conn.sandbox->sandbox_id);
    state.credentials.store_failure(sandbox_id, now);
    co_return nullptr;
  }
  state.credentials.store(sandbox_id, std::move(fetched->value()), now);
  co_return state.credentials.find(sandbox_id, now);
}

/// Injects the grant for `host` into `req`; a refusal (429) when its bucket is empty.
std::optional<refusal> apply_credential(const connection& conn,
                                        http::request<http::buffer_body>& req,
                                        const std::string& host, const grant_list* grants) {
  if (!grants)
    return std::nullopt;
  const auto* grant = select_grant(*grants, host);
  if (!grant)
    return std::nullopt;
  auto& state = conn.state;
  if (!state.credentials.try_use(*grant, credential_cache::clock::now())) {
    ++state.counters.rate_limited;
    std::string reason = "credential " + grant->name + " rate limit of "
                         + std::to_string(grant->rate_limit_per_min) + " per minute reached";
    conn.audit("credential", false, reason, conn.target(host), grant->name);
    return refusal{http::status::too_many_requests, reason};
  }
  req.set(grant->header, grant->value);
  ++state.counters.credential_uses;
  conn.audit("credential", true, "injected header " + grant->header, conn.target(host),
             grant->name);
  return std::nullopt;
}

/// Describes a failed upstream TLS handshake, with the certificate check's verdict.
std::string handshake_failure(tls_stream& stream, const beast::error_code& ec) {
  long verify = SSL_get_verify_result(stream.native_handle());
  std::string text = ec.message();
  if (verify != X509_V_OK)
    text += std::string(" (") + X509_verify_cert_error_string(verify) + ")";
  return text;
}

awaitable<status> finish_upstream(const connection&, upstream_link<tcp_stream>& up, tcp_stream& tcp,
                                  const std::string&) {
  up.stream.emplace(std::move(tcp));
  co_return status::ok();
}

awaitable<status> finish_upstream(const connection& conn, upstream_link<tls_stream>& up,
                                  tcp_stream& tcp, const std::string& host) {
  tls_stream stream{std::move(tcp), conn.state.client_tls};
  SSL_set_tlsext_host_name(stream.native_handle(), host.c_str());
  SSL_set1_host(stream.native_handle(), host.c_str());
  stream.set_verify_mode(net::ssl::verify_peer);
  beast::get_lowest_layer(stream).expires_after(
    milliseconds(conn.state.options.connect_timeout_ms));
  beast::error_code ec;
  co_await stream.async_handshake(net::ssl::stream_base::client,
                                  net::redirect_error(use_awaitable, ec));
  if (ec)
    co_return make_status(errc::unavailable, "TLS handshake with " + conn.target(host)
                                               + " failed: " + handshake_failure(stream, ec));
  up.stream.emplace(std::move(stream));
  co_return status::ok();
}

/// Connects `up` to `host` at the original port unless it already is.
template <class Upstream>
awaitable<status> ensure_upstream(const connection& conn, upstream_link<Upstream>& up,
                                  const std::string& host) {
  if (up.stream && up.host == host && beast::get_lowest_layer(*up.stream).socket().is_open())
    co_return status::ok();
  up.reset();
  auto addresses = co_await resolve_allowed(conn, host);
  if (!addresses)
    co_return addresses.error();
  auto tcp = co_await connect_tcp(conn, *addresses, conn.original_port);
  if (!tcp)
    co_return tcp.error();
  auto done = co_await finish_upstream(conn, up, tcp.value(), host);
  if (done)
    up.host = host;
  co_return done;
}

/// Answers 502 for an upstream failure after auditing it.
template <class Guest>
awaitable<void> upstream_failed(const connection& conn, Guest& guest, const std::string& host,
                                const std::string& what, const std::string& detail) {
  ++conn.state.counters.upstream_failures;
  conn.audit("egress", false, "upstream failed: " + what, conn.target(host), detail);
  std::string text = "airlock egress: upstream failed: " + what;
  co_await respond(conn, guest, http::status::bad_gateway, text);
}

/// Ends a guest connection after a body delimited by the connection's end:
/// a TLS guest needs close_notify, or it cannot tell the end from a cut.
awaitable<void> end_of_body(const connection&, tcp_stream& guest) {
  beast::error_code ignored;
  guest.socket().shutdown(net::ip::tcp::socket::shutdown_send, ignored);
  co_return;
}

awaitable<void> end_of_body(const connection& conn, tls_stream& guest) {
  beast::get_lowest_layer(guest).expires_after(milliseconds(conn.state.options.idle_timeout_ms));
  beast::error_code ignored; // the guest may close without answering close_notify
  co_await guest.async_shutdown(net::redirect_error(use_awaitable, ignored));
}

/// Relays responses (interim 1xx first) from upstream to the guest. True
/// when the guest connection may carry another request.
template <class Guest, class Upstream>
awaitable<bool> relay_response(const connection& conn, Guest& guest,
                               beast::flat_buffer& guest_buffer, const request_parser& request,
                               const protocol_switch& asked, upstream_link<Upstream>& up,
                               const std::string& host, const std::string& detail) {
  const auto& options = conn.state.options;
  constexpr int interim_max = 8;
  for (int interim = 0; interim <= interim_max; ++interim) {
    response_parser parser;
    parser.header_limit(options.header_bytes_max);
    parser.body_limit(std::numeric_limits<std::uint64_t>::max());
    if (request.get().method() == http::verb::head)
      parser.skip(true);
    beast::get_lowest_layer(*up.stream).expires_after(milliseconds(options.idle_timeout_ms));
    beast::error_code ec;
    co_await http::async_read_header(*up.stream, up.buffer, parser,
                                     net::redirect_error(use_awaitable, ec));
    if (ec) {
      up.reset();
      std::string what = "reading the response: " + ec.message();
      co_await upstream_failed(conn, guest, host, what, detail);
      co_return false;
    }
    auto code = parser.get().result_int();
    if (code == 101 && !answers_websocket(parser.get(), asked)) {
      // Past a 101 the proxy sees no more requests: only the WebSocket it
      // judged may follow. Anything else ends both connections.
      up.reset();
      std::string what =
        "upstream switched protocols (101, Upgrade: " + switched_protocol(parser.get()) + ") "
        + (asked.websocket ? "without answering the WebSocket upgrade asked for"
                           : "though no switch was asked for");
      ++conn.state.counters.switches_refused;
      refusal why{http::status::bad_gateway, what};
      std::string target = conn.target(host);
      co_await refuse(conn, guest, why, target, detail);
      co_return false;
    }
    bool keep_upstream = parser.get().keep_alive();
    const bool until_close = framing_of(parser).until_close;
    auto relayed =
      co_await relay_message(conn, *up.stream, up.buffer, parser, guest, up.relay_space);
    if (relayed != relay_failure::none) {
      up.reset();
      co_return false; // the guest already has part of the response: only closing tells it
    }
    if (until_close) { // the body ended with the upstream connection; the guest's end must say so
                       // too
      up.reset();
      co_await end_of_body(conn, guest);
      co_return false;
    }
    if (code == 101) {
      ++conn.state.counters.upgrades;
      conn.audit_tunnel("protocol switched to websocket: the tunnel's bytes are no longer judged "
                        "request by request",
                        conn.target(host), detail);
      co_await tunnel(guest, *up.stream, guest_buffer, up.buffer,
                      milliseconds(options.tunnel_idle_timeout_ms), options.relay_chunk_bytes);
      up.reset();
      co_return false;
    }
    if (code / 100 == 1)
      continue;
    if (!keep_upstream)
      up.reset();
    co_return keep_upstream&& request.get().keep_alive();
  }
  up.reset();
  co_return false;
}

/// Connects upstream, relays the request and its response. True: keep going.
template <class Guest, class Upstream>
awaitable<bool> forward(const connection& conn, Guest& guest, beast::flat_buffer& buffer,
                        request_parser& parser, const protocol_switch& asked,
                        upstream_link<Upstream>& up, const std::string& host,
                        const std::string& detail) {
  auto connected = co_await ensure_upstream(conn, up, host);
  if (!connected) {
    if (connected.code == errc::permission_denied) {
      refusal why{http::status::forbidden, connected.message};
      std::string target = conn.target(host);
      co_await refuse(conn, guest, why, target, detail);
    } else {
      co_await upstream_failed(conn, guest, host, connected.message, detail);
    }
    co_return false;
  }
  auto& req = parser.get();
  if (iequals(sv(req[http::field::expect]), "100-continue")) {
    // The guest waits for 100 before sending its body; we answer it ourselves
    // so the relay below does not stall waiting for a body that never comes.
    req.erase(http::field::expect);
    static constexpr std::string_view continue_line = "HTTP/1.1 100 Continue\r\n\r\n";
    beast::error_code ec;
    beast::get_lowest_layer(guest).expires_after(milliseconds(conn.state.options.idle_timeout_ms));
    co_await net::async_write(guest, net::buffer(continue_line),
                              net::redirect_error(use_awaitable, ec));
    if (ec)
      co_return false;
  }
  ++conn.state.counters.allowed_requests;
  conn.audit("egress", true, conn.tls ? "allowed (TLS terminated)" : "allowed", conn.target(host),
             detail);
  auto sent = co_await relay_message(conn, guest, buffer, parser, *up.stream, up.relay_space);
  if (sent == relay_failure::input)
    co_return false;
  if (sent == relay_failure::output) {
    up.reset();
    std::string what = "sending the request failed";
    co_await upstream_failed(conn, guest, host, what, detail);
    co_return false;
  }
  co_return co_await relay_response(conn, guest, buffer, parser, asked, up, host, detail);
}

/// Judges one parsed request header and forwards it. True: keep going.
template <class Guest, class Upstream>
awaitable<bool> handle_request(const connection& conn, Guest& guest, beast::flat_buffer& buffer,
                               request_parser& parser, upstream_link<Upstream>& up) {
  auto& req = parser.get();
  auto detail = request_detail(req);
  std::string host;
  std::string host_field;
  if (auto why = check_form(conn, req, host, host_field)) {
    std::string_view host_text;
    std::optional<uint16_t> port;
    if (!split_host(sv(req[http::field::host]), host_text, port))
      host_text = "?";
    if (host_text.empty())
      host_text = conn.tls ? std::string_view{conn.sni} : "?";
    std::string target = conn.target(host_text);
    co_await refuse(conn, guest, *why, target, detail);
    co_return false;
  }
  protocol_switch asked;
  if (auto reason = prepare_upstream_request(req, host_field, asked)) {
    refusal why{http::status::bad_request, *reason};
    std::string target = conn.target(host);
    co_await refuse(conn, guest, why, target, detail);
    co_return false;
  }
  if (!asked.refused.empty()) {
    // Stripped rather than refused: an upgrade is optional (RFC 9110
    // section 7.8), so the request goes on as HTTP/1.1; the switch is a denial.
    ++conn.state.counters.denied;
    ++conn.state.counters.switches_refused;
    conn.audit("egress", false,
               "protocol switch to " + asked.refused
                 + " refused (only WebSocket is forwarded); the request "
                   "went on as HTTP/1.1",
               conn.target(host), detail);
  }
  auto grants = co_await grants_for(conn);
  if (auto why = apply_credential(conn, req, host, grants.get())) {
    ++conn.state.counters.denied;
    std::string text = "airlock egress denied: " + why->reason;
    co_await respond(conn, guest, why->status, text);
    co_return false;
  }
  co_return co_await forward(conn, guest, buffer, parser, asked, up, host, detail);
}

/// Waits for the next request's first byte; false when the guest went idle or closed.
template <class Guest>
awaitable<bool> wait_for_request(const connection& conn, Guest& guest, beast::flat_buffer& buffer) {
  if (buffer.size() > 0)
    co_return true;
  beast::get_lowest_layer(guest).expires_after(milliseconds(conn.state.options.idle_timeout_ms));
  beast::error_code ec;
  std::size_t count =
    co_await guest.async_read_some(buffer.prepare(4096), net::redirect_error(use_awaitable, ec));
  if (ec)
    co_return false;
  buffer.commit(count);
  co_return true;
}

/// The guest sent bytes that are not HTTP/1.1 (as opposed to closing early).
bool is_parse_error(const beast::error_code& ec) {
  static const auto& parser_errors = beast::error_code{http::error::bad_method}.category();
  return ec.category() == parser_errors && ec != http::error::end_of_stream
         && ec != http::error::partial_message;
}

/// A request header that did not arrive whole: answer what can be answered.
template <class Guest>
awaitable<void> header_failed(const connection& conn, Guest& guest, const beast::error_code& ec) {
  auto target = conn.target(conn.tls ? conn.sni : format_ipv4(conn.original_address));
  const auto& options = conn.state.options;
  const std::string no_detail;
  if (ec == http::error::header_limit) {
    refusal why{http::status::request_header_fields_too_large,
                "request header larger than " + std::to_string(options.header_bytes_max)
                  + " bytes"};
    co_await refuse(conn, guest, why, target, no_detail);
  } else if (ec == beast::error::timeout) {
    ++conn.state.counters.denied;
    conn.audit("egress", false,
               "request header not complete within " + std::to_string(options.header_timeout_ms)
                 + " ms (slow client)",
               target);
  } else if (is_parse_error(ec)) {
    refusal why{http::status::bad_request, "malformed request: " + ec.message()};
    co_await refuse(conn, guest, why, target, no_detail);
  }
}

/// True when the next bytes are HTTP/2's connection preface ("PRI *
/// HTTP/2.0"): HTTP/2 with prior knowledge, which only HTTP/1.1 may replace.
bool is_http2_preface(const beast::flat_buffer& buffer) {
  static constexpr std::string_view preface = "PRI * HTTP/2";
  return buffered(buffer).starts_with(preface);
}

template <class Guest, class Upstream>
awaitable<void> http_loop(connection& conn, Guest& guest, beast::flat_buffer& buffer) {
  upstream_link<Upstream> up;
  const auto& options = conn.state.options;
  while (co_await wait_for_request(conn, guest, buffer)) {
    if (is_http2_preface(buffer)) {
      refusal why{http::status::http_version_not_supported,
                  "HTTP/2 connection preface in clear text (h2c with prior knowledge) is refused; "
                  "use HTTP/1.1, or HTTPS"};
      auto target = conn.target(conn.tls ? conn.sni : format_ipv4(conn.original_address));
      const std::string detail = "PRI *";
      co_await refuse(conn, guest, why, target, detail);
      break;
    }
    request_parser parser;
    parser.header_limit(options.header_bytes_max);
    parser.body_limit(std::numeric_limits<std::uint64_t>::max());
    beast::get_lowest_layer(guest).expires_after(milliseconds(options.header_timeout_ms));
    beast::error_code ec;
    co_await http::async_read_header(guest, buffer, parser, net::redirect_error(use_awaitable, ec));
    if (ec) {
      co_await header_failed(conn, guest, ec);
      break;
    }
    if (!co_await handle_request(conn, guest, buffer, parser, up))
      break;
  }
  up.reset();
}

} // namespace

awaitable<void> serve_http(connection& conn, tcp_stream& guest, beast::flat_buffer& buffer) {
  co_await http_loop<tcp_stream, tcp_stream>(conn, guest, buffer);
}

awaitable<void> serve_https(connection& conn, tls_stream& guest, beast::flat_buffer& buffer) {
  co_await http_loop<tls_stream, tls_stream>(conn, guest, buffer);
}

} // namespace airlock::worker::egress
