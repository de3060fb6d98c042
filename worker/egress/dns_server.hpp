#pragma once
// The resolver sandboxes are given (the host's nftables rules send all their
// UDP and TCP port 53 traffic here). It answers only what the sandbox's
// egress policy allows: A records of allowed names, filtered through the
// address filter; an empty answer for AAAA (no IPv6); REFUSED for every other
// record type, since TXT, NULL and friends are how data is tunnelled through
// DNS. Every decision becomes an audit record of kind "dns".

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include <boost/asio/any_io_executor.hpp>

#include "schema/errc.hpp"
#include "worker/egress/address_filter.hpp"
#include "worker/egress/egress_types.hpp"
#include "worker/egress/resolvers.hpp"
#include "worker/egress/sandbox_table.hpp"

namespace airlock::worker::egress {

struct dns_server_options {
  /// IPv4 address both sockets bind to. Default: "127.0.0.1"
  std::string bind_address = "127.0.0.1";
  /// UDP and TCP port; 0 picks a free one (the same for both). Default: 53
  uint16_t port = 53;
  /// TTL of A records we answer with. Default: 30
  uint32_t answer_ttl_s = 30;
  /// Largest UDP answer; longer ones are sent empty with TC set. Default: 512
  size_t udp_answer_bytes_max = 512;
  /// Largest query or TCP answer accepted or sent. Default: 4096
  size_t message_bytes_max = 4096;
  /// Open TCP connections; more are closed at once. Default: 64
  size_t tcp_connections_max = 64;
  /// A TCP connection that sends or takes nothing this long is closed. Default: 5000
  uint32_t tcp_idle_timeout_ms = 5000;
  /// Queries waiting for the resolver; more are dropped (clients retry). Default: 1024
  size_t pending_queries_max = 1024;
};

struct dns_server_stats {
  uint64_t queries = 0;                ///< messages from known sandboxes
  uint64_t answered = 0;               ///< with A records
  uint64_t refused = 0;                ///< REFUSED (policy or record type)
  uint64_t malformed = 0;              ///< FORMERR or NOTIMP answers, dropped responses
  uint64_t dropped_unknown_source = 0; ///< from an address no sandbox has
  uint64_t dropped_overload = 0;       ///< past pending_queries_max
  uint64_t tcp_rejected = 0;           ///< past tcp_connections_max
};

/// A DNS server on one UDP and one TCP socket. All its work runs on a strand
/// of the executor given to start(). The sandbox table, resolver pool, filter
/// and audit sink must outlive every handler of the server. Teardown order:
/// destroy the server (it closes its sockets on the strand), let the
/// executor run that (drain it, or stop its io_context), destroy the
/// resolver pool, and only then stop the io_context for good and destroy the
/// rest: a pool still running could post an answer to a dead executor.
class dns_server {
public:
  /// Binds both sockets and starts serving. errc::invalid_argument for a bad
  /// bind address, errc::unavailable when a socket cannot be bound.
  static result<std::unique_ptr<dns_server>>
  start(boost::asio::any_io_executor ex, const sandbox_table& sandboxes, resolver_pool& resolver,
        const address_filter& filter, audit_sink& audit, dns_server_options options = {});
  /// Closes the sockets and open connections (asynchronously, on the strand).
  ~dns_server();
  dns_server(const dns_server&) = delete;
  dns_server& operator=(const dns_server&) = delete;

  /// The bound port (UDP and TCP).
  uint16_t port() const;

  /// Counters; readable from any thread.
  dns_server_stats stats() const;

  class impl;

private:
  explicit dns_server(std::shared_ptr<impl> state);
  std::shared_ptr<impl> impl_;
};

} // namespace airlock::worker::egress
