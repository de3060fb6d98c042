#include "worker/egress/connection_proxy.hpp"

#include <linux/netfilter_ipv4.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include <openssl/ssl.h>

#include "crypto/certificates.hpp"
#include "schema/egress_rules.hpp"
#include "worker/egress/client_hello.hpp"
#include "worker/egress/proxy_internal.hpp"
#include "worker/egress/resolvers.hpp"
#include "worker/egress/sandbox_table.hpp"

namespace airlock::worker::egress {
namespace {

int64_t wall_clock_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

/// Decrements the sandbox's open-connection count when the connection ends.
class connection_slot {
public:
  connection_slot(proxy_state& state, std::string sandbox_id)
      : state_(state), sandbox_id_(std::move(sandbox_id)) {
    ++state_.counters.active_connections;
  }
  ~connection_slot() {
    --state_.counters.active_connections;
    state_.release_slot(sandbox_id_);
  }
  connection_slot(const connection_slot&) = delete;
  connection_slot& operator=(const connection_slot&) = delete;

private:
  proxy_state& state_;
  std::string sandbox_id_;
};

enum class first_bytes { tls, http, refused, gone };

/// A request line starts with a method token (uppercase letters) and a space.
hello_status looks_like_http(std::string_view bytes) {
  constexpr std::size_t method_max = 20;
  for (std::size_t i = 0; i < bytes.size() && i <= method_max; ++i) {
    char c = bytes[i];
    if (c == ' ')
      return i > 0 ? hello_status::ok : hello_status::not_tls;
    if (c < 'A' || c > 'Z')
      return hello_status::not_tls;
  }
  return bytes.size() > method_max ? hello_status::not_tls : hello_status::need_more;
}

/// What the bytes so far say: need_more (read on), or a decision.
std::optional<first_bytes> classify(std::string_view bytes, client_hello& hello,
                                    std::string& reason) {
  if (static_cast<uint8_t>(bytes[0]) == 0x16) {
    switch (parse_client_hello(bytes, hello)) {
      case hello_status::ok: return first_bytes::tls;
      case hello_status::need_more: return std::nullopt;
      case hello_status::not_tls:
      case hello_status::malformed:
        reason = "malformed TLS ClientHello";
        return first_bytes::refused;
    }
  }
  switch (looks_like_http(bytes)) {
    case hello_status::ok: return first_bytes::http;
    case hello_status::need_more: return std::nullopt;
    default:
      reason = "unsupported protocol (only HTTP and TLS leave a sandbox)";
      return first_bytes::refused;
  }
}

/// Reads until the first bytes identify TLS or HTTP, within first_bytes_timeout_ms.
awaitable<first_bytes> read_first_bytes(connection& conn, tcp_stream& stream,
                                        beast::flat_buffer& buffer, client_hello& hello) {
  const auto& options = conn.state.options;
  stream.expires_after(milliseconds(options.first_bytes_timeout_ms));
  std::string reason;
  for (;;) {
    if (buffer.size() > 0) {
      if (auto verdict = classify(buffered(buffer), hello, reason)) {
        if (*verdict == first_bytes::refused)
          conn.audit("egress", false, reason, conn.target(format_ipv4(conn.original_address)));
        co_return *verdict;
      }
    }
    if (buffer.size() >= client_hello_bytes_max) {
      conn.audit("egress", false, "first bytes larger than a ClientHello may be",
                 conn.target(format_ipv4(conn.original_address)));
      co_return first_bytes::refused;
    }
    beast::error_code ec;
    std::size_t count =
      co_await stream.async_read_some(buffer.prepare(client_hello_bytes_max - buffer.size()),
                                      net::redirect_error(use_awaitable, ec));
    if (ec == beast::error::timeout) {
      conn.audit("egress", false,
                 "no complete request line or ClientHello within "
                   + std::to_string(options.first_bytes_timeout_ms) + " ms",
                 conn.target(format_ipv4(conn.original_address)));
      co_return first_bytes::refused;
    }
    if (ec)
      co_return first_bytes::gone; // the guest closed before saying anything
    buffer.commit(count);
  }
}

void install_leaf(tls_stream& stream, const crypto::leaf_minter::leaf& leaf) {
  SSL* ssl = stream.native_handle();
  SSL_use_certificate(ssl, leaf.cert.get());
  SSL_use_PrivateKey(ssl, leaf.key.get());
  for (const auto& cert : leaf.chain)
    SSL_add1_chain_cert(ssl, cert.get());
}

/// Pass-through: the SNI was judged; bytes go to the name's own address untouched.
awaitable<void> pass_through(connection& conn, tcp_stream& guest, beast::flat_buffer& buffer) {
  auto target = conn.target(conn.sni);
  auto addresses = co_await resolve_allowed(conn, conn.sni);
  if (!addresses) {
    conn.audit("egress", false, addresses.error().message, target, "tls passthrough");
    co_return;
  }
  auto upstream = co_await connect_tcp(conn, *addresses, conn.original_port);
  if (!upstream) {
    ++conn.state.counters.upstream_failures;
    conn.audit("egress", false, upstream.error().message, target, "tls passthrough");
    co_return;
  }
  ++conn.state.counters.passthrough;
  conn.audit_tunnel(
    "TLS pass-through rule: the SNI was judged, the tunnel's bytes are not (not terminated)",
    target, "tls passthrough");
  beast::flat_buffer nothing;
  co_await tunnel(guest, *upstream, buffer, nothing,
                  milliseconds(conn.state.options.tunnel_idle_timeout_ms),
                  conn.state.options.relay_chunk_bytes);
}

/// Checks the SNI; nullopt when the connection may go on (conn.sni set).
std::optional<std::string> refuse_sni(connection& conn, const client_hello& hello,
                                      schema::egress_verdict& verdict) {
  if (!hello.has_sni)
    return "TLS without a server name (SNI); connect by name";
  if (schema::is_ip_literal(hello.sni))
    return "TLS server name is an IP address; connect by name";
  auto name = schema::normalize_host_name(hello.sni);
  if (!name)
    return "TLS server name is not a valid host name";
  conn.tls = true;
  conn.sni = *name;
  verdict = schema::judge_name(conn.sandbox->policy, conn.sni, conn.original_port);
  if (!verdict.allowed)
    return verdict.reason;
  return std::nullopt;
}

awaitable<void> serve_tls(connection& conn, tcp_stream& stream, beast::flat_buffer& buffer,
                          const client_hello& hello) {
  schema::egress_verdict verdict;
  auto fallback_target =
    conn.target(hello.has_sni ? hello.sni : format_ipv4(conn.original_address));
  if (auto refusal = refuse_sni(conn, hello, verdict)) {
    ++conn.state.counters.denied;
    conn.audit("egress", false, *refusal, fallback_target, "tls");
    co_return; // closed without a certificate
  }
  if (verdict.passthrough)
    co_return co_await pass_through(conn, stream, buffer);
  auto minter = conn.state.minter();
  if (!minter) {
    ++conn.state.counters.denied;
    conn.audit("egress", false, "egress CA not yet issued", conn.target(conn.sni), "tls");
    co_return;
  }
  auto leaf = minter->for_name(conn.sni);
  if (!leaf) {
    conn.audit("egress", false, "no certificate for the name: " + leaf.error().message,
               conn.target(conn.sni), "tls");
    co_return;
  }
  tls_stream tls{std::move(stream), conn.state.server_tls};
  install_leaf(tls, *leaf);
  beast::get_lowest_layer(tls).expires_after(
    milliseconds(conn.state.options.first_bytes_timeout_ms));
  beast::error_code ec;
  co_await tls.async_handshake(net::ssl::stream_base::server, buffer.data(),
                               net::redirect_error(use_awaitable, ec));
  buffer.consume(buffer.size());
  if (ec) {
    conn.audit("egress", false, "TLS handshake with the sandbox failed: " + ec.message(),
               conn.target(conn.sni), "tls");
    co_return;
  }
  ++conn.state.counters.tls_terminated;
  co_await serve_https(conn, tls, buffer);
}

/// Small writes (a response header, a short body) go out at once: with
/// Nagle's algorithm the second of two small writes waits for the peer's
/// delayed ACK (~40 ms on Linux).
void set_no_delay(net::ip::tcp::socket& socket) {
  beast::error_code ignored;
  socket.set_option(net::ip::tcp::no_delay(true), ignored);
}

/// The sandbox a connection comes from, or null (unknown peers are closed).
std::shared_ptr<const sandbox_view> identify(proxy_state& state,
                                             const net::ip::tcp::socket& socket) {
  beast::error_code ec;
  auto peer = socket.remote_endpoint(ec);
  if (ec || !peer.address().is_v4())
    return nullptr;
  return state.parts.sandboxes->find(peer.address().to_v4().to_uint());
}

awaitable<void> run_connection(std::shared_ptr<proxy_state> state, net::ip::tcp::socket socket) {
  auto sandbox = identify(*state, socket);
  if (!sandbox) {
    ++state->counters.unknown_peers;
    co_return;
  }
  ++state->counters.connections;
  connection conn{*state, sandbox, 0, 0, false, {}};
  if (!state->acquire_slot(sandbox->sandbox_id)) {
    ++state->counters.denied;
    conn.audit("egress", false,
               "too many open connections (limit "
                 + std::to_string(state->options.connections_per_sandbox_max) + ")",
               sandbox->address);
    co_return;
  }
  connection_slot slot{*state, sandbox->sandbox_id};
  auto destination = state->parts.original_destination(socket.native_handle());
  if (!destination) {
    conn.audit("egress", false, "original destination unknown: " + destination.error().message,
               sandbox->address);
    co_return;
  }
  conn.original_address = destination->first;
  conn.original_port = destination->second;
  set_no_delay(socket);
  tcp_stream stream{std::move(socket)};
  beast::flat_buffer buffer;
  client_hello hello;
  switch (co_await read_first_bytes(conn, stream, buffer, hello)) {
    case first_bytes::tls: co_await serve_tls(conn, stream, buffer, hello); break;
    case first_bytes::http: co_await serve_http(conn, stream, buffer); break;
    case first_bytes::refused: ++state->counters.denied; break;
    case first_bytes::gone: break;
  }
}

} // namespace

result<std::pair<uint32_t, uint16_t>> socket_original_destination(int fd) {
  sockaddr_in address{};
  socklen_t length = sizeof(address);
  if (::getsockopt(fd, SOL_IP, SO_ORIGINAL_DST, &address, &length) != 0)
    return make_status(errc::unavailable, std::string("SO_ORIGINAL_DST: ") + std::strerror(errno));
  return std::pair<uint32_t, uint16_t>{ntohl(address.sin_addr.s_addr), ntohs(address.sin_port)};
}

proxy_state::proxy_state(connection_proxy_options opts, connection_proxy::parts p)
    : options(std::move(opts)), parts(std::move(p)),
      credentials(credential_cache_options{.ttl_ms = options.credential_ttl_ms}) {
  if (!parts.original_destination)
    parts.original_destination = socket_original_destination;
  constexpr auto legacy = net::ssl::context::default_workarounds | net::ssl::context::no_sslv2
                          | net::ssl::context::no_sslv3 | net::ssl::context::no_tlsv1
                          | net::ssl::context::no_tlsv1_1;
  server_tls.set_options(legacy);
  client_tls.set_options(legacy);
  client_tls.set_default_verify_paths();
  client_tls.set_verify_mode(net::ssl::verify_peer);
  // Upstream connections are HTTP/1.1 only; we never offer ALPN there, and we
  // select none for the guest, so both sides speak HTTP/1.1.
  if (!options.upstream_ca_file.empty())
    client_tls.load_verify_file(options.upstream_ca_file);
}

std::shared_ptr<crypto::leaf_minter> proxy_state::minter() const {
  std::lock_guard lock{mutex_};
  return minter_;
}

void proxy_state::set_minter(std::shared_ptr<crypto::leaf_minter> minter) {
  std::lock_guard lock{mutex_};
  minter_ = std::move(minter);
}

bool proxy_state::acquire_slot(const std::string& sandbox_id) {
  std::lock_guard lock{mutex_};
  auto& open = open_per_sandbox_[sandbox_id];
  if (open >= options.connections_per_sandbox_max) {
    if (open == 0)
      open_per_sandbox_.erase(sandbox_id);
    return false;
  }
  ++open;
  return true;
}

void proxy_state::release_slot(const std::string& sandbox_id) {
  std::lock_guard lock{mutex_};
  auto it = open_per_sandbox_.find(sandbox_id);
  if (it != open_per_sandbox_.end() && --it->second == 0)
    open_per_sandbox_.erase(it);
}

void connection::audit(std::string_view kind, bool allowed, std::string reason, std::string target,
                       std::string detail) const {
  record_audit(kind, allowed ? "allowed" : "denied", std::move(reason), std::move(target),
               std::move(detail));
}

void connection::audit_tunnel(std::string reason, std::string target, std::string detail) const {
  record_audit("egress", "tunnel", std::move(reason), std::move(target), std::move(detail));
}

void connection::record_audit(std::string_view kind, std::string_view decision, std::string reason,
                              std::string target, std::string detail) const {
  schema::audit_record record;
  record.at_ms = wall_clock_ms();
  record.tenant_id = sandbox->tenant_id;
  record.sandbox_id = sandbox->sandbox_id;
  record.kind = std::string{kind};
  record.decision = std::string{decision};
  record.reason = std::move(reason);
  record.target = std::move(target);
  record.detail = std::move(detail);
  state.parts.audit->record(std::move(record));
}

std::string connection::target(std::string_view host) const {
  return std::string{host} + ":" + std::to_string(original_port);
}

awaitable<result<std::vector<uint32_t>>> resolve_allowed(const connection& conn,
                                                         const std::string& host) {
  auto executor = co_await net::this_coro::executor;
  using answer = result<std::vector<uint32_t>>;
  auto start = [&conn, &host, executor](std::function<void(answer)> done) {
    conn.state.parts.resolver->resolve(host, executor, std::move(done));
  };
  auto resolved = co_await await_callback<answer>(
    conn.state.life, milliseconds(conn.state.options.resolve_timeout_ms), start);
  if (!resolved)
    co_return make_status(errc::timeout, "resolving " + host + " timed out");
  if (!*resolved)
    co_return make_status(resolved->code(),
                          "resolving " + host + " failed: " + resolved->error().message);
  std::vector<uint32_t> allowed;
  std::string refusal;
  for (uint32_t address : resolved->value()) {
    if (auto reason = conn.state.parts.filter.refuse_reason(address)) {
      if (refusal.empty())
        refusal = *reason;
    } else {
      allowed.push_back(address);
    }
  }
  if (allowed.empty())
    co_return make_status(errc::permission_denied,
                          "name resolves only to private, loopback or metadata addresses ("
                            + refusal + ")");
  co_return allowed;
}

awaitable<result<tcp_stream>> connect_tcp(const connection& conn,
                                          const std::vector<uint32_t>& addresses, uint16_t port) {
  auto executor = co_await net::this_coro::executor;
  tcp_stream stream{executor};
  std::vector<net::ip::tcp::endpoint> endpoints;
  for (uint32_t address : addresses)
    endpoints.emplace_back(net::ip::address_v4{address}, port);
  stream.expires_after(milliseconds(conn.state.options.connect_timeout_ms));
  beast::error_code ec;
  co_await stream.async_connect(endpoints, net::redirect_error(use_awaitable, ec));
  if (ec)
    co_return make_status(errc::unavailable, "connecting to " + format_ipv4(addresses.front()) + ":"
                                               + std::to_string(port) + " failed: " + ec.message());
  set_no_delay(stream.socket());
  co_return std::move(stream);
}

connection_proxy::connection_proxy(std::shared_ptr<proxy_state> state) : state_(std::move(state)) {}

connection_proxy::~connection_proxy() { close(); }

result<std::unique_ptr<connection_proxy>> connection_proxy::create(connection_proxy_options options,
                                                                   parts parts) {
  if (!parts.sandboxes || !parts.resolver || !parts.audit)
    return make_status(errc::invalid_argument,
                       "egress proxy needs a sandbox table, resolver and audit sink");
  try {
    auto state = std::make_shared<proxy_state>(std::move(options), std::move(parts));
    return std::unique_ptr<connection_proxy>(new connection_proxy(std::move(state)));
  } catch (const boost::system::system_error& error) {
    return make_status(errc::invalid_argument, "egress proxy TLS setup failed (upstream_ca_file?): "
                                                 + std::string(error.what()));
  }
}

void connection_proxy::set_minter(std::shared_ptr<crypto::leaf_minter> minter) {
  state_->set_minter(std::move(minter));
}

void connection_proxy::serve(net::ip::tcp::socket socket) {
  auto executor = socket.get_executor();
  net::co_spawn(executor, run_connection(state_, std::move(socket)), [](std::exception_ptr) {});
}

void connection_proxy::close() { state_->life->close(); }

void connection_proxy::forget_credentials(const std::string& sandbox_id) {
  state_->credentials.forget(sandbox_id);
}

egress_stats connection_proxy::stats() const {
  const auto& c = state_->counters;
  return egress_stats{
    c.connections,      c.unknown_peers,     c.active_connections, c.denied,
    c.allowed_requests, c.tls_terminated,    c.passthrough,        c.credential_uses,
    c.rate_limited,     c.upstream_failures, c.upgrades,           c.switches_refused};
}

} // namespace airlock::worker::egress
