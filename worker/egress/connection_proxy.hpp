#pragma once
// The egress proxy's connection half: every TCP connection a sandbox opens
// arrives here (nftables redirects it). Per connection it finds the sandbox by source address,
// reads the first bytes, and for TLS judges the SNI, then either passes the bytes through (rules
// marked passthrough) or terminates TLS with a leaf minted for that name; for plain HTTP and
// terminated TLS it serves HTTP/1.1 itself: judges each request's Host, injects credentials,
// resolves the name with its own resolver and connects to the address it resolved, never the
// guest's.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include <boost/asio/ip/tcp.hpp>

#include "schema/errc.hpp"
#include "worker/egress/address_filter.hpp"
#include "worker/egress/egress_types.hpp"

namespace airlock::crypto {
class leaf_minter;
}

namespace airlock::worker::egress {

class sandbox_table;
class resolver_pool;

/// Where the guest meant to connect: IPv4 address (host order) and port of a
/// redirected connection's socket.
using original_destination_fn = std::function<result<std::pair<uint32_t, uint16_t>>(int fd)>;

/// The default: getsockopt(SOL_IP, SO_ORIGINAL_DST), which nftables `redirect` sets.
result<std::pair<uint32_t, uint16_t>> socket_original_destination(int fd);

struct connection_proxy_options {
  /// Open connections per sandbox; more are closed and audited. Default: 256.
  uint32_t connections_per_sandbox_max = 256;
  /// Time for the guest's first bytes (ClientHello or request line). Default: 10000.
  uint32_t first_bytes_timeout_ms = 10000;
  /// Largest request or response header. Default: 65536.
  uint32_t header_bytes_max = 65536;
  /// A keep-alive connection waiting for its next request, or a body stalling. Default: 60000.
  uint32_t idle_timeout_ms = 60000;
  /// Time from a request's first byte to the end of its header (slow clients). Default: 30000.
  uint32_t header_timeout_ms = 30000;
  /// Upstream TCP connect plus TLS handshake. Default: 10000.
  uint32_t connect_timeout_ms = 10000;
  /// Silence in one direction of a WebSocket or pass-through tunnel. Default: 300000.
  uint32_t tunnel_idle_timeout_ms = 300000;
  /// Credentials fetched per sandbox are reused this long. Default: 30000.
  uint32_t credential_ttl_ms = 30000;
  /// Longest wait for credential_source::fetch; then the request goes without. Default: 5000.
  uint32_t credential_fetch_timeout_ms = 5000;
  /// Longest wait for the resolver pool. Default: 10000.
  uint32_t resolve_timeout_ms = 10000;
  /// Bytes moved per read when relaying bodies and tunnels. Default: 16384.
  uint32_t relay_chunk_bytes = 16384;
  /// PEM file of extra CAs trusted for upstream TLS beside the system store. Default: "" (none).
  std::string upstream_ca_file;
};

/// Counters since start; each is monotonic except active_connections.
struct egress_stats {
  uint64_t connections = 0;   ///< accepted from a known sandbox
  uint64_t unknown_peers = 0; ///< accepted from an address no sandbox has (closed)
  uint64_t active_connections = 0;
  uint64_t denied = 0;           ///< connections or requests refused by policy or limits
  uint64_t allowed_requests = 0; ///< HTTP requests forwarded upstream
  uint64_t tls_terminated = 0;
  uint64_t passthrough = 0;
  uint64_t credential_uses = 0;
  uint64_t rate_limited = 0;      ///< requests answered 429
  uint64_t upstream_failures = 0; ///< requests answered 502
  uint64_t upgrades = 0;          ///< 101 responses turned into tunnels
  uint64_t switches_refused = 0;  ///< upgrades stripped, and 101s that answered none asked for
};

struct proxy_state;

/// Serves redirected guest connections. Thread-safe; each connection runs as
/// one coroutine on the strand its socket was accepted on.
class connection_proxy {
public:
  /// What the proxy reads. `sandboxes` and `resolver` must outlive the proxy
  /// and every connection it serves (egress_proxy stops its threads first).
  struct parts {
    sandbox_table* sandboxes = nullptr;
    resolver_pool* resolver = nullptr;
    address_filter filter;
    std::shared_ptr<audit_sink> audit;              ///< required
    std::shared_ptr<credential_source> credentials; ///< may be null: no credentials
    original_destination_fn original_destination;   ///< empty: socket_original_destination
  };

  /// invalid_argument when upstream_ca_file cannot be loaded.
  static result<std::unique_ptr<connection_proxy>> create(connection_proxy_options options,
                                                          parts parts);
  ~connection_proxy();
  connection_proxy(const connection_proxy&) = delete;
  connection_proxy& operator=(const connection_proxy&) = delete;

  /// Installs the minter for terminated TLS; until then TLS is denied
  /// ("egress CA not yet issued"). Thread-safe.
  void set_minter(std::shared_ptr<crypto::leaf_minter> minter);

  /// Serves one accepted connection on the socket's executor, which must be
  /// a strand (or an io_context run by one thread).
  void serve(boost::asio::ip::tcp::socket socket);

  /// After this, callbacks from credential sources no longer reach the
  /// network threads. Call before destroying the io_context.
  void close();

  /// Drops a sandbox's cached credentials (it left or its grants changed).
  void forget_credentials(const std::string& sandbox_id);

  egress_stats stats() const;

private:
  explicit connection_proxy(std::shared_ptr<proxy_state> state);
  std::shared_ptr<proxy_state> state_;
};

} // namespace airlock::worker::egress
