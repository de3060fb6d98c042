#pragma once
// The egress proxy of one worker: the TLS/HTTP connection proxy every sandbox
// TCP connection is redirected to, the DNS resolver every sandbox query is
// redirected to, the sandbox table both judge by, the resolver pool both
// resolve with, and the network threads they run on.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "schema/errc.hpp"
#include "worker/egress/address_filter.hpp"
#include "worker/egress/connection_proxy.hpp"
#include "worker/egress/dns_server.hpp"
#include "worker/egress/egress_types.hpp"
#include "worker/egress/resolvers.hpp"
#include "worker/egress/sandbox_table.hpp"

namespace airlock::worker::egress {

struct egress_proxy_options {
  /// IPv4 address the proxy and the resolver bind to. Default: "0.0.0.0"
  std::string bind_address = "0.0.0.0";
  /// TCP port of the proxy; 0 picks a free one. Default: 0
  uint16_t proxy_port = 0;
  /// UDP and TCP port of the resolver; 0 picks a free one. Default: 0
  uint16_t dns_port = 0;
  /// Threads running the proxy's and the resolver's sockets. Default: 1
  std::size_t network_threads = 1;
  /// Pending connections in the listen queue. Default: 1024
  int listen_backlog = 1024;
  /// Per-connection limits, timeouts and the upstream CA file. Default: see
  /// connection_proxy_options.
  connection_proxy_options connection;
  /// Resolver threads, queue and cache. Default: see resolver_pool_options.
  resolver_pool_options resolver;
  /// DNS limits; its bind_address and port are taken from the fields above. Default: see
  /// dns_server_options.
  dns_server_options dns;
  /// A file of "name address..." lines for a static resolver (tests, air-gapped
  /// hosts); empty: the system resolver. Default: ""
  std::string hosts_file;
  /// CIDRs of private ranges upstreams may be in anyway ("10.1.0.0/16"). Default: none
  std::vector<std::string> allowed_private;
  /// Extra CIDRs never connected to (the worker's sandbox address pool). Default: none
  std::vector<std::string> denied;
  /// How a connection's original destination is read; empty: SO_ORIGINAL_DST. Default: empty
  original_destination_fn original_destination;
};

/// Owns the connection proxy, the resolver and their threads. Thread-safe.
class egress_proxy {
public:
  /// Binds both listeners and starts the threads. `audit` is required;
  /// `credentials` may be null (no credential injection).
  /// errc::invalid_argument for bad options (CIDRs, hosts file, CA file),
  /// errc::unavailable when a port cannot be bound.
  static result<std::unique_ptr<egress_proxy>>
  start(egress_proxy_options options, std::shared_ptr<audit_sink> audit,
        std::shared_ptr<credential_source> credentials);
  ~egress_proxy();
  egress_proxy(const egress_proxy&) = delete;
  egress_proxy& operator=(const egress_proxy&) = delete;

  uint16_t proxy_port() const;
  uint16_t dns_port() const;

  /// Installs the worker's egress intermediate CA (key PEM, then chain PEM:
  /// intermediate then root). Until then TLS connections are denied "egress
  /// CA not yet issued". errc::invalid_argument when the PEMs do not match.
  status set_authority(std::string intermediate_key_pem, std::string chain_pem);

  /// Adds or updates a sandbox; new connections and queries see the view.
  void attach(sandbox_view sandbox);
  /// Forgets the sandbox at `address` (dotted IPv4) and its cached credentials.
  void detach(std::string_view address);

  /// Stops accepting, closes every connection and joins the threads. Idempotent.
  void stop();

  egress_stats stats() const;
  dns_server_stats dns_stats() const;

private:
  egress_proxy() = default;
  status open(egress_proxy_options& options, std::shared_ptr<audit_sink> audit,
              std::shared_ptr<credential_source> credentials);

  std::shared_ptr<audit_sink> audit_;
  std::unique_ptr<address_filter> filter_;
  std::unique_ptr<sandbox_table> sandboxes_;
  std::unique_ptr<resolver_pool> resolver_;
  std::unique_ptr<connection_proxy> connections_;
  // stop() tears down in this order: DNS server, network threads, acceptor,
  // resolver threads, io_context (destroying the connections' coroutine
  // frames), then the rest; the audit sink, filter and table outlive it all.
  std::unique_ptr<boost::asio::io_context> io_;
  std::unique_ptr<boost::asio::ip::tcp::acceptor> acceptor_;
  std::unique_ptr<dns_server> dns_;
  std::vector<std::thread> threads_;
  uint16_t proxy_port_ = 0;
  uint16_t dns_port_ = 0;
  bool stopped_ = false;
};

} // namespace airlock::worker::egress
