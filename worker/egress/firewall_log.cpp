#include "worker/egress/firewall_log.hpp"

#include <arpa/inet.h>
#include <linux/capability.h>
#include <linux/if_ether.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_log.h>
#include <linux/netlink.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

namespace airlock::worker::egress {
namespace {

constexpr uint16_t packet_type = (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_PACKET;
constexpr uint16_t config_type = (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_CONFIG;
/// How long start() waits for the kernel to acknowledge the configuration.
constexpr int ack_timeout_ms = 2000;

template <class T>
T load(std::span<const uint8_t> bytes, size_t offset) {
  T value{};
  std::memcpy(&value, bytes.data() + offset, sizeof(T));
  return value;
}

std::string errno_text(int error) { return std::system_category().message(error); }

// ---- the packet summary ------------------------------------------------------

struct ip_summary {
  int version = 0; ///< 4, 6 or 0 (not IP or too short to tell)
  std::string src;
  std::string dst;
  int protocol = -1; ///< IP protocol / IPv6 upper-layer header; -1 unknown
  std::optional<uint16_t> dst_port;
  std::optional<uint8_t> icmp_type;
};

std::string address_text(int family, const uint8_t* bytes) {
  char text[INET6_ADDRSTRLEN] = {};
  if (inet_ntop(family, bytes, text, sizeof(text)) == nullptr)
    return "?";
  return text;
}

/// Reads the destination port or ICMP type at `offset`, when the bytes are there.
void read_transport(std::span<const uint8_t> p, size_t offset, ip_summary& s) {
  bool ported = s.protocol == IPPROTO_TCP || s.protocol == IPPROTO_UDP || s.protocol == IPPROTO_SCTP
                || s.protocol == IPPROTO_UDPLITE;
  if (ported && p.size() >= offset + 4)
    s.dst_port = ntohs(load<uint16_t>(p, offset + 2));
  bool icmp = s.protocol == IPPROTO_ICMP || s.protocol == IPPROTO_ICMPV6;
  if (icmp && p.size() >= offset + 1)
    s.icmp_type = p[offset];
}

void summarise_ipv4(std::span<const uint8_t> p, ip_summary& s) {
  size_t header = size_t{p[0] & 0x0fu} * 4;
  if (p.size() < 20 || header < 20)
    return;
  s.version = 4;
  s.protocol = p[9];
  s.src = address_text(AF_INET, p.data() + 12);
  s.dst = address_text(AF_INET, p.data() + 16);
  // Only the first fragment carries the transport header.
  bool first_fragment = (ntohs(load<uint16_t>(p, 6)) & 0x1fff) == 0;
  if (first_fragment && header <= p.size())
    read_transport(p, header, s);
}

void summarise_ipv6(std::span<const uint8_t> p, ip_summary& s) {
  if (p.size() < 40)
    return;
  s.version = 6;
  s.src = address_text(AF_INET6, p.data() + 8);
  s.dst = address_text(AF_INET6, p.data() + 24);
  int next = p[6];
  size_t offset = 40;
  // Walk a bounded number of extension headers to the upper-layer header.
  for (int hops = 0; hops < 8 && offset + 8 <= p.size(); ++hops) {
    if (next == IPPROTO_HOPOPTS || next == IPPROTO_ROUTING || next == IPPROTO_DSTOPTS) {
      next = p[offset];
      offset += (size_t{p[offset + 1]} + 1) * 8;
    } else if (next == IPPROTO_FRAGMENT) {
      bool first_fragment = (ntohs(load<uint16_t>(p, offset + 2)) & 0xfff8) == 0;
      next = p[offset];
      offset += 8;
      if (!first_fragment) {
        s.protocol = next;
        return;
      }
    } else if (next == IPPROTO_AH) {
      next = p[offset];
      offset += (size_t{p[offset + 1]} + 2) * 4;
    } else {
      break;
    }
  }
  s.protocol = next;
  if (offset <= p.size())
    read_transport(p, offset, s);
}

ip_summary summarise(const firewall_drop& drop) {
  ip_summary s;
  auto p = std::span(reinterpret_cast<const uint8_t*>(drop.payload.data()), drop.payload.size());
  if (p.empty())
    return s;
  // The payload's version nibble decides; hw_protocol may be absent (0).
  if ((p[0] >> 4) == 4 && drop.hw_protocol != ETH_P_IPV6)
    summarise_ipv4(p, s);
  else if ((p[0] >> 4) == 6 && drop.hw_protocol != ETH_P_IP)
    summarise_ipv6(p, s);
  return s;
}

std::string protocol_name(int protocol) {
  switch (protocol) {
    case IPPROTO_TCP: return "tcp";
    case IPPROTO_UDP: return "udp";
    case IPPROTO_ICMP: return "icmp";
    case IPPROTO_ICMPV6: return "icmpv6";
    case IPPROTO_SCTP: return "sctp";
    case IPPROTO_UDPLITE: return "udplite";
    case IPPROTO_IGMP: return "igmp";
    case IPPROTO_GRE: return "gre";
    case IPPROTO_ESP: return "esp";
    case IPPROTO_IPIP: return "ipip";
    case IPPROTO_IPV6: return "ipv6-in-ipv4";
    case -1: return "unknown";
    default: return "ip-" + std::to_string(protocol);
  }
}

std::string ethertype_text(uint16_t ethertype) {
  char text[8];
  std::snprintf(text, sizeof(text), "0x%04x", ethertype);
  return text;
}

std::string proto_reason(const ip_summary& s) {
  if (s.version == 6)
    return "IPv6 is not allowed";
  // TCP and DNS reach the proto drop only when the worker runs no egress proxy.
  bool dns = (s.protocol == IPPROTO_UDP || s.protocol == IPPROTO_TCP) && s.dst_port == 53;
  if (s.protocol == IPPROTO_TCP || dns)
    return "no egress proxy runs: nothing leaves a sandbox";
  if (s.protocol == IPPROTO_UDP)
    return "UDP is not allowed (only TCP and DNS leave a sandbox)";
  if (s.protocol == IPPROTO_ICMP)
    return "ICMP is not allowed";
  return "IP protocol " + protocol_name(s.protocol)
         + " is not allowed (only TCP and DNS leave a sandbox)";
}

std::string reason_for(std::string_view prefix, const ip_summary& s) {
  if (prefix == "airlock:spoof") {
    if (s.version == 6)
      return "IPv6 is not allowed";
    if (s.version == 0)
      return "non-IP traffic is not allowed";
    return "source address " + s.src + " is not the sandbox's own (spoofing)";
  }
  if (s.version == 0)
    return "non-IP traffic is not allowed";
  if (prefix == "airlock:proto")
    return proto_reason(s);
  if (prefix == "airlock:host")
    return "the host's own services are unreachable";
  if (prefix == "airlock:fwd")
    return "routing through the host is not allowed (only the egress proxy is reachable)";
  return "dropped by the host firewall (rule prefix \"" + std::string(prefix) + "\")";
}

std::string target_of(const firewall_drop& drop, const ip_summary& s) {
  if (s.version == 0)
    return "ethertype " + ethertype_text(drop.hw_protocol);
  if (!s.dst_port)
    return s.dst;
  if (s.version == 6)
    return "[" + s.dst + "]:" + std::to_string(*s.dst_port);
  return s.dst + ":" + std::to_string(*s.dst_port);
}

std::string detail_of(const firewall_drop& drop, const ip_summary& s) {
  std::string detail = "firewall: " + drop.prefix;
  if (s.version == 0)
    return detail + " proto=non-ip ethertype=" + ethertype_text(drop.hw_protocol);
  detail += " proto=" + protocol_name(s.protocol) + " src=" + s.src;
  if (s.icmp_type)
    detail += " icmp_type=" + std::to_string(*s.icmp_type);
  return detail;
}

// ---- netlink -----------------------------------------------------------------

/// One netlink request under construction: header, nfgenmsg, attributes.
class nl_request {
public:
  nl_request(uint16_t type, uint16_t flags, uint32_t seq, uint8_t family, uint16_t res_id) {
    bytes_.resize(NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(nfgenmsg)));
    nlmsghdr header{};
    header.nlmsg_type = type;
    header.nlmsg_flags = flags;
    header.nlmsg_seq = seq;
    std::memcpy(bytes_.data(), &header, sizeof(header));
    nfgenmsg gen{};
    gen.nfgen_family = family;
    gen.version = NFNETLINK_V0;
    gen.res_id = htons(res_id);
    std::memcpy(bytes_.data() + NLMSG_HDRLEN, &gen, sizeof(gen));
  }

  void attribute(uint16_t type, const void* data, size_t size) {
    size_t at = bytes_.size();
    bytes_.resize(at + NLA_ALIGN(NLA_HDRLEN + size));
    nlattr header{static_cast<uint16_t>(NLA_HDRLEN + size), type};
    std::memcpy(bytes_.data() + at, &header, sizeof(header));
    std::memcpy(bytes_.data() + at + NLA_HDRLEN, data, size);
  }

  std::span<const uint8_t> finish() {
    auto length = static_cast<uint32_t>(bytes_.size());
    std::memcpy(bytes_.data() + offsetof(nlmsghdr, nlmsg_len), &length, sizeof(length));
    return bytes_;
  }

private:
  std::vector<uint8_t> bytes_;
};

/// Whether this thread holds CAP_NET_ADMIN: the kernel answers EPERM both
/// without it and for a group another socket has bound.
bool has_net_admin() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
  if (::syscall(SYS_capget, &header, data) != 0)
    return false;
  return (data[CAP_NET_ADMIN / 32].effective & (1u << (CAP_NET_ADMIN % 32))) != 0;
}

status bind_error(int error, uint16_t group) {
  std::string what = "binding NFLOG group " + std::to_string(group) + ": " + errno_text(error);
  if (error == EPERM && has_net_admin())
    error = EBUSY;
  switch (error) {
    case EPERM:
    case EACCES: return make_status(errc::permission_denied, what + " (needs CAP_NET_ADMIN)");
    case EBUSY:
      return make_status(errc::already_exists, "binding NFLOG group " + std::to_string(group)
                                                 + ": another socket listens on it");
    case ENOENT:
    case EOPNOTSUPP:
    case EPROTONOSUPPORT: return make_status(errc::unavailable, what + " (no nfnetlink_log?)");
    default: return make_status(errc::io_error, what);
  }
}

status check_options(const firewall_log_options& o, const audit_sink* sink) {
  if (o.group == 0)
    return make_status(errc::invalid_argument, "the NFLOG group must be 1..65535");
  if (sink == nullptr)
    return make_status(errc::invalid_argument, "firewall_log needs an audit sink");
  if (o.records_per_second_max == 0 || o.copy_range_bytes == 0 || o.buffer_bytes < 4096
      || o.kernel_batch_packets_max == 0 || o.socket_receive_bytes <= 0)
    return make_status(errc::invalid_argument,
                       "firewall_log options: rates and sizes must be positive (buffer >= 4096)");
  return status::ok();
}

/// A NETLINK_NETFILTER socket bound to a kernel-assigned port id.
result<int> open_socket(const firewall_log_options& o) {
  int fd = ::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_NETFILTER);
  if (fd < 0) {
    int error = errno;
    errc code = error == EPROTONOSUPPORT            ? errc::unavailable
                : error == EPERM || error == EACCES ? errc::permission_denied
                                                    : errc::io_error;
    return make_status(code, "opening a NETLINK_NETFILTER socket: " + errno_text(error));
  }
  // SO_RCVBUFFORCE passes rmem_max when we have CAP_NET_ADMIN; else the capped one.
  int bytes = o.socket_receive_bytes;
  if (::setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &bytes, sizeof(bytes)) != 0)
    (void)::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes));
  sockaddr_nl local{};
  local.nl_family = AF_NETLINK;
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&local), sizeof(local)) != 0) {
    int error = errno;
    ::close(fd);
    return make_status(errc::io_error, "binding a netlink socket: " + errno_text(error));
  }
  return fd;
}

/// One message: bind the group, copy mode and range, batching and buffer size.
std::vector<uint8_t> bind_request(const firewall_log_options& o, uint32_t seq) {
  nl_request r(config_type, NLM_F_REQUEST | NLM_F_ACK, seq, AF_UNSPEC, o.group);
  nfulnl_msg_config_cmd cmd{NFULNL_CFG_CMD_BIND};
  r.attribute(NFULA_CFG_CMD, &cmd, sizeof(cmd));
  nfulnl_msg_config_mode mode{};
  mode.copy_range = htonl(o.copy_range_bytes);
  mode.copy_mode = NFULNL_COPY_PACKET;
  r.attribute(NFULA_CFG_MODE, &mode, sizeof(mode));
  uint32_t qthresh = htonl(o.kernel_batch_packets_max);
  r.attribute(NFULA_CFG_QTHRESH, &qthresh, sizeof(qthresh));
  uint32_t timeout = htonl(std::max<uint32_t>(1, (o.kernel_flush_ms + 9) / 10));
  r.attribute(NFULA_CFG_TIMEOUT, &timeout, sizeof(timeout));
  uint32_t bufsize = htonl(o.buffer_bytes);
  r.attribute(NFULA_CFG_NLBUFSIZ, &bufsize, sizeof(bufsize));
  auto bytes = r.finish();
  return {bytes.begin(), bytes.end()};
}

/// The errno of the NLMSG_ERROR answering `seq` in `bytes` (0 = ack), if any.
std::optional<int> ack_in(std::span<const uint8_t> bytes, uint32_t seq) {
  size_t offset = 0;
  while (offset + NLMSG_HDRLEN <= bytes.size()) {
    auto header = load<nlmsghdr>(bytes, offset);
    if (header.nlmsg_len < NLMSG_HDRLEN || offset + header.nlmsg_len > bytes.size())
      break;
    if (header.nlmsg_type == NLMSG_ERROR && header.nlmsg_seq == seq
        && header.nlmsg_len >= NLMSG_HDRLEN + sizeof(nlmsgerr))
      return -load<nlmsgerr>(bytes, offset + NLMSG_HDRLEN).error;
    offset += NLMSG_ALIGN(header.nlmsg_len);
  }
  return std::nullopt;
}

} // namespace

// ---- parsing -------------------------------------------------------------------

result<firewall_drop> parse_nflog_packet(std::span<const uint8_t> message) {
  constexpr size_t attrs_at = NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(nfgenmsg));
  if (message.size() < attrs_at)
    return make_status(errc::invalid_argument, "short NFLOG message");
  auto header = load<nlmsghdr>(message, 0);
  if (header.nlmsg_type != packet_type)
    return make_status(errc::invalid_argument, "not an NFULNL_MSG_PACKET message");
  if (header.nlmsg_len < attrs_at || header.nlmsg_len > message.size())
    return make_status(errc::invalid_argument, "NFLOG message length out of bounds");
  firewall_drop drop;
  size_t offset = attrs_at;
  while (offset + NLA_HDRLEN <= header.nlmsg_len) {
    auto attr = load<nlattr>(message, offset);
    if (attr.nla_len < NLA_HDRLEN || offset + attr.nla_len > header.nlmsg_len)
      return make_status(errc::invalid_argument, "NFLOG attribute length out of bounds");
    auto value = message.subspan(offset + NLA_HDRLEN, attr.nla_len - NLA_HDRLEN);
    switch (attr.nla_type & NLA_TYPE_MASK) {
      case NFULA_PACKET_HDR:
        if (value.size() >= sizeof(nfulnl_msg_packet_hdr))
          drop.hw_protocol = ntohs(load<uint16_t>(value, 0));
        break;
      case NFULA_PREFIX: {
        std::string_view text(reinterpret_cast<const char*>(value.data()), value.size());
        text = text.substr(0, text.find('\0'));
        while (!text.empty() && text.back() == ' ')
          text.remove_suffix(1); // iptables' habit
        drop.prefix = std::string(text);
        break;
      }
      case NFULA_IFINDEX_INDEV:
        if (value.size() >= 4)
          drop.in_ifindex = static_cast<int>(ntohl(load<uint32_t>(value, 0)));
        break;
      case NFULA_PAYLOAD:
        drop.payload.assign(reinterpret_cast<const char*>(value.data()), value.size());
        break;
      default: break;
    }
    offset += NLA_ALIGN(attr.nla_len);
  }
  return drop;
}

schema::audit_record describe_drop(const firewall_drop& drop, const sandbox_view* sandbox,
                                   int64_t at_ms) {
  ip_summary s = summarise(drop);
  schema::audit_record r;
  r.at_ms = at_ms;
  if (sandbox != nullptr) {
    r.tenant_id = sandbox->tenant_id;
    r.sandbox_id = sandbox->sandbox_id;
  }
  r.kind = "egress";
  r.decision = "denied";
  r.reason = reason_for(drop.prefix, s);
  r.target = target_of(drop, s);
  r.detail = detail_of(drop, s);
  return r;
}

// ---- the reader ------------------------------------------------------------------

firewall_log::firewall_log(firewall_log_options options, interface_lookup lookup,
                           std::shared_ptr<audit_sink> sink, int socket_fd, int wake_fd)
    : options_(std::move(options)), lookup_(std::move(lookup)), sink_(std::move(sink)),
      socket_fd_(socket_fd), wake_fd_(wake_fd) {}

result<std::unique_ptr<firewall_log>> firewall_log::start(firewall_log_options options,
                                                          interface_lookup lookup,
                                                          std::shared_ptr<audit_sink> sink) {
  if (auto checked = check_options(options, sink.get()); !checked)
    return checked;
  auto fd = open_socket(options);
  if (!fd)
    return fd.error();
  int wake = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake < 0) {
    int error = errno;
    ::close(*fd);
    return make_status(errc::resource_exhausted, "eventfd: " + errno_text(error));
  }
  // Owned from here: the destructor closes both descriptors on every failure below.
  std::unique_ptr<firewall_log> log(
    new firewall_log(std::move(options), std::move(lookup), std::move(sink), *fd, wake));
  if (auto bound = log->configure(); !bound)
    return bound;
  try {
    log->reader_ = std::thread([raw = log.get()] { raw->run(); });
  } catch (const std::system_error& e) {
    return make_status(errc::resource_exhausted,
                       std::string("starting the reader thread: ") + e.what());
  }
  return log;
}

status firewall_log::configure() {
  constexpr uint32_t seq = 1;
  auto request = bind_request(options_, seq);
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (::sendto(socket_fd_, request.data(), request.size(), 0,
               reinterpret_cast<const sockaddr*>(&kernel), sizeof(kernel))
      < 0)
    return bind_error(errno, options_.group);
  std::vector<uint8_t> buffer(options_.buffer_bytes);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ack_timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{socket_fd_, POLLIN, 0};
    if (::poll(&p, 1, ack_timeout_ms) <= 0)
      continue;
    ssize_t n = ::recv(socket_fd_, buffer.data(), buffer.size(), 0);
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR)
        continue;
      if (errno == ENOBUFS) {
        ++overruns_;
        continue;
      }
      return bind_error(errno, options_.group);
    }
    auto bytes = std::span<const uint8_t>(buffer.data(), static_cast<size_t>(n));
    // Packets logged while the bind was answered are not lost.
    auto ack = ack_in(bytes, seq);
    handle_batch(bytes);
    if (ack)
      return *ack == 0 ? status::ok() : bind_error(*ack, options_.group);
  }
  return make_status(errc::timeout, "the kernel did not acknowledge binding NFLOG group "
                                      + std::to_string(options_.group));
}

void firewall_log::stop() {
  if (reader_.joinable()) {
    uint64_t one = 1;
    ssize_t written = ::write(wake_fd_, &one, sizeof(one));
    (void)written; // an eventfd write of 1 only fails on overflow, which cannot happen here
    reader_.join();
  }
  if (socket_fd_ >= 0)
    ::close(socket_fd_);
  if (wake_fd_ >= 0)
    ::close(wake_fd_);
  socket_fd_ = -1;
  wake_fd_ = -1;
}

firewall_log::~firewall_log() { stop(); }

uint64_t firewall_log::received() const { return received_.load(); }
uint64_t firewall_log::suppressed() const { return suppressed_.load(); }
uint64_t firewall_log::overruns() const { return overruns_.load(); }

void firewall_log::run() {
  std::vector<uint8_t> buffer(options_.buffer_bytes);
  for (;;) {
    pollfd fds[2] = {{socket_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR)
        continue;
      return; // only EFAULT/EINVAL/ENOMEM: nothing a retry would fix
    }
    if ((fds[1].revents & POLLIN) != 0)
      return;
    if ((fds[0].revents & (POLLIN | POLLERR)) == 0)
      continue;
    iovec io{buffer.data(), buffer.size()};
    msghdr msg{};
    msg.msg_iov = &io;
    msg.msg_iovlen = 1;
    ssize_t n = ::recvmsg(socket_fd_, &msg, 0);
    if (n < 0) {
      // ENOBUFS: the kernel dropped batches because we fell behind; go on.
      if (errno == ENOBUFS)
        ++overruns_;
      continue;
    }
    if ((msg.msg_flags & MSG_TRUNC) != 0)
      ++overruns_;
    handle_batch(std::span<const uint8_t>(buffer.data(), static_cast<size_t>(n)));
  }
}

void firewall_log::handle_batch(std::span<const uint8_t> bytes) {
  size_t offset = 0;
  while (offset + NLMSG_HDRLEN <= bytes.size()) {
    auto header = load<nlmsghdr>(bytes, offset);
    if (header.nlmsg_len < NLMSG_HDRLEN || offset + header.nlmsg_len > bytes.size())
      return;
    if (header.nlmsg_type == packet_type)
      handle_packet(bytes.subspan(offset, header.nlmsg_len));
    offset += NLMSG_ALIGN(header.nlmsg_len);
  }
}

void firewall_log::handle_packet(std::span<const uint8_t> message) {
  auto drop = parse_nflog_packet(message);
  if (!drop)
    return; // the kernel wrote it; a malformed one is not a packet to count
  ++received_;
  int64_t now = now_ms();
  if (!admit(now)) {
    ++suppressed_;
    return;
  }
  std::shared_ptr<const sandbox_view> sandbox;
  if (lookup_ && drop->in_ifindex > 0)
    sandbox = lookup_(drop->in_ifindex);
  sink_->record(describe_drop(*drop, sandbox.get(), now));
}

bool firewall_log::admit(int64_t now) {
  int64_t second = now / 1000;
  if (second != window_second_) {
    window_second_ = second;
    window_records_ = 0;
  }
  if (window_records_ >= options_.records_per_second_max)
    return false;
  ++window_records_;
  return true;
}

int64_t firewall_log::now_ms() const {
  if (options_.now_ms)
    return options_.now_ms();
  return std::chrono::duration_cast<std::chrono::milliseconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

} // namespace airlock::worker::egress
