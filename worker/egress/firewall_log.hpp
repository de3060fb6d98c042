#pragma once
// The firewall's drops as audit records. The worker's nftables rules log every
// sandbox packet they drop to one NFLOG group (rate-limited in the rule) with
// a prefix naming the rule ("airlock:spoof", "airlock:proto", "airlock:host",
// "airlock:fwd"), then drop it. firewall_log listens on that group over a raw
// NETLINK_NETFILTER socket (no libnetfilter_log) and turns each logged packet
// into an "egress"/"denied" audit record for the sandbox that owns the
// interface the packet came in on.
//
// Threading: start() opens and configures the socket on the caller's thread
// (so a missing module, a missing capability or a group another process
// already listens on fail there, as values), then one dedicated reader thread
// owned by the firewall_log blocks in poll() on the socket and an eventfd that
// stop() signals. The lookup and the sink are called on that thread; neither
// may block for long (the sink queues, as audit_sink requires). A dedicated
// thread rather than an Asio descriptor keeps the reader independent of the
// egress proxy's io_context: a stalled proxy never delays the audit of drops.
//
// Family binding: NFULNL_CFG_CMD_PF_UNBIND/PF_BIND are not sent. They only
// choose the namespace's *default* logger per family (used by rules that do
// not name a logger type); nftables' `log group N` names the netlink logger
// explicitly, and unbinding would take the host's syslog logger away from
// every other user of the namespace.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <thread>

#include "schema/egress.hpp"
#include "schema/errc.hpp"
#include "worker/egress/egress_types.hpp"

namespace airlock::worker::egress {

struct firewall_log_options {
  /// The NFLOG group the nftables rules log to; required, 1..65535 (group 0
  /// is what untargeted rules share). Default: 0 (start() refuses it).
  uint16_t group = 0;
  /// Records written per wall-clock second; drops beyond it are counted in
  /// suppressed() but not recorded, so a flood cannot flood the audit log.
  /// Default: 200.
  size_t records_per_second_max = 200;
  /// Bytes of each packet the kernel copies to us: enough for an IPv6 header
  /// with a few extension headers and the L4 ports. Default: 128.
  uint32_t copy_range_bytes = 128;
  /// The kernel sends its batch to us once it holds this many packets, or
  /// (next field) once the oldest has waited long enough. Default: 16.
  uint32_t kernel_batch_packets_max = 16;
  /// Longest a logged packet waits in the kernel's batch, rounded up to
  /// 10 ms. Default: 50.
  uint32_t kernel_flush_ms = 50;
  /// Size of the kernel's batch buffer and of our receive buffer per read.
  /// Default: 65536.
  uint32_t buffer_bytes = 65536;
  /// Socket receive buffer (SO_RCVBUF); past it the kernel drops batches and
  /// overruns() counts the loss. Default: 1048576.
  int socket_receive_bytes = 1 << 20;
  /// Milliseconds since the epoch, for `at_ms` and the rate window; tests
  /// freeze it. Default: empty, meaning the system clock.
  std::function<int64_t()> now_ms;
};

/// One packet as NFLOG reported it: the fields the audit record needs.
struct firewall_drop {
  std::string prefix;       ///< the rule's log prefix, e.g. "airlock:proto"
  int in_ifindex = 0;       ///< 0 when the packet had no input interface
  uint16_t hw_protocol = 0; ///< ethertype (host order), 0 when not reported
  std::string payload;      ///< the first copy_range_bytes of the L3 packet
};

/// Parses one NFULNL_MSG_PACKET netlink message (from the nlmsghdr on).
/// invalid_argument when it is not one or its attributes are malformed.
/// Exposed for tests.
result<firewall_drop> parse_nflog_packet(std::span<const uint8_t> message);

/// The audit record for one drop: kind "egress", decision "denied", reason
/// from the prefix and the packet (TCP or DNS under "airlock:proto" means the
/// worker runs no egress proxy), target "dst:port" ("dst" without ports,
/// "[v6]:port" for IPv6), detail "firewall: <prefix> proto=<p> src=<addr>"
/// (ICMP adds " icmp_type=<t>"). `sandbox` may be null: ids stay empty.
schema::audit_record describe_drop(const firewall_drop& drop, const sandbox_view* sandbox,
                                   int64_t at_ms);

/// Reads the firewall's NFLOG group and writes one audit record per dropped
/// packet (up to the rate limit). Not copyable or movable; owned by the worker.
class firewall_log {
public:
  /// The sandbox that owns host-side interface `ifindex`, or null (the record
  /// is still written, with empty sandbox and tenant ids). Called on the
  /// reader thread.
  using interface_lookup = std::function<std::shared_ptr<const sandbox_view>(int ifindex)>;

  /// Binds `options.group` and starts the reader thread. Errors:
  /// invalid_argument (group 0, no sink, zero sizes), permission_denied (no
  /// CAP_NET_ADMIN), already_exists (another socket listens on the group),
  /// unavailable (no nfnetlink_log in this kernel), io_error otherwise.
  static result<std::unique_ptr<firewall_log>>
  start(firewall_log_options options, interface_lookup lookup, std::shared_ptr<audit_sink> sink);

  /// Stops the reader thread and closes the socket (the kernel unbinds the
  /// group with it). Idempotent; not to be called from the lookup or sink.
  void stop();
  ~firewall_log();

  firewall_log(const firewall_log&) = delete;
  firewall_log& operator=(const firewall_log&) = delete;

  /// Packets the kernel reported to us.
  uint64_t received() const;
  /// Packets counted but not recorded because of records_per_second_max.
  uint64_t suppressed() const;
  /// Times the socket's receive buffer overflowed (ENOBUFS): an unknown number
  /// of packets was lost without being counted.
  uint64_t overruns() const;

private:
  firewall_log(firewall_log_options options, interface_lookup lookup,
               std::shared_ptr<audit_sink> sink, int socket_fd, int wake_fd);
  status configure();
  void run();
  void handle_batch(std::span<const uint8_t> bytes);
  void handle_packet(std::span<const uint8_t> message);
  bool admit(int64_t now_ms);
  int64_t now_ms() const;

  firewall_log_options options_;
  interface_lookup lookup_;
  std::shared_ptr<audit_sink> sink_;
  int socket_fd_ = -1;
  int wake_fd_ = -1;
  std::thread reader_;
  std::atomic<uint64_t> received_{0};
  std::atomic<uint64_t> suppressed_{0};
  std::atomic<uint64_t> overruns_{0};
  // Rate window; touched only by the reader thread.
  int64_t window_second_ = -1;
  size_t window_records_ = 0;
};

} // namespace airlock::worker::egress
