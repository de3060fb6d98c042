#include "worker/egress/dns_server.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <functional>
#include <unordered_map>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/udp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>

#include "schema/egress_rules.hpp"
#include "worker/egress/dns_message.hpp"

namespace airlock::worker::egress {

namespace asio = boost::asio;
using udp = asio::ip::udp;
using tcp = asio::ip::tcp;
using error_code = boost::system::error_code;
using strand_type = asio::strand<asio::any_io_executor>;

namespace {

constexpr int bind_attempts = 8;                             // port 0: UDP and TCP must agree
constexpr auto accept_retry = std::chrono::milliseconds(50); // after EMFILE and the like

struct counters {
  std::atomic<uint64_t> queries{0};
  std::atomic<uint64_t> answered{0};
  std::atomic<uint64_t> refused{0};
  std::atomic<uint64_t> malformed{0};
  std::atomic<uint64_t> dropped_unknown_source{0};
  std::atomic<uint64_t> dropped_overload{0};
  std::atomic<uint64_t> tcp_rejected{0};
};

int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

std::string join_addresses(const std::vector<uint32_t>& addresses) {
  std::string out;
  for (auto a : addresses)
    out += (out.empty() ? "" : " ") + format_ipv4(a);
  return out;
}

} // namespace

class tcp_session;

/// Called exactly once per message with the answer; empty: send nothing.
using responder = std::function<void(std::string)>;

/// Where one answer goes and how large it may be.
struct reply_to {
  std::shared_ptr<const sandbox_view> sandbox;
  size_t bytes_max = 512;
  bool stream = false; ///< TCP: trim records to fit instead of setting TC
  responder respond;
};

class dns_server::impl : public std::enable_shared_from_this<impl> {
public:
  impl(asio::any_io_executor ex, const sandbox_table& sandboxes, resolver_pool& resolver,
       const address_filter& filter, audit_sink& audit, dns_server_options options)
      : strand_(asio::make_strand(ex)), udp_(strand_), acceptor_(strand_), accept_retry_(strand_),
        sandboxes_(sandboxes), resolver_(resolver), filter_(filter), audit_(audit),
        options_(std::move(options)), udp_buffer_(options_.message_bytes_max + 1) {}

  status bind(const asio::ip::address_v4& address);
  void start();
  void stop();
  uint16_t port() const { return port_; }
  dns_server_stats stats() const;

  /// One message from `source`; calls respond exactly once (maybe later).
  void handle(std::string_view message, uint32_t source, size_t bytes_max, bool stream,
              responder respond);

  strand_type& strand() { return strand_; }
  const dns_server_options& options() const { return options_; }
  void session_closed(tcp_session* session) { sessions_.erase(session); }

private:
  void receive_udp();
  void on_datagram(size_t length);
  void accept_tcp();
  void on_accept(tcp::socket socket);
  void answer_query(reply_to reply, const dns::query& q);
  void answer_a(reply_to& reply, const dns::query& q, const std::string& allowed_reason,
                result<std::vector<uint32_t>> answer);
  void audit(const sandbox_view& sandbox, const char* decision, std::string reason,
             std::string target, std::string detail);
  std::string respond_code(const dns::query& q, dns::rcode code, const reply_to& reply) const {
    return dns::build_response(q, code, {}, 0, reply.bytes_max);
  }

  strand_type strand_;
  udp::socket udp_;
  tcp::acceptor acceptor_;
  asio::steady_timer accept_retry_;
  const sandbox_table& sandboxes_;
  resolver_pool& resolver_;
  const address_filter& filter_;
  audit_sink& audit_;
  dns_server_options options_;
  uint16_t port_ = 0;

  // Strand-only state.
  bool stopped_ = false;
  std::vector<char> udp_buffer_;
  udp::endpoint udp_sender_;
  size_t pending_ = 0;
  std::unordered_map<tcp_session*, std::weak_ptr<tcp_session>> sessions_;

  counters count_;
};

// ---- TCP: length-prefixed messages, one at a time, idle deadline ----

class tcp_session : public std::enable_shared_from_this<tcp_session> {
public:
  tcp_session(std::shared_ptr<dns_server::impl> server, tcp::socket socket, uint32_t source)
      : server_(std::move(server)), socket_(std::move(socket)), timer_(server_->strand()),
        source_(source) {}

  void start() { read_length(); }

  void close() {
    if (closed_)
      return;
    closed_ = true;
    error_code ignored;
    socket_.close(ignored);
    timer_.cancel();
    server_->session_closed(this);
  }

private:
  /// (Re)starts the idle deadline for the next read or write.
  void arm() {
    auto generation = ++deadline_;
    timer_.expires_after(std::chrono::milliseconds(server_->options().tcp_idle_timeout_ms));
    timer_.async_wait([self = shared_from_this(), generation](error_code ec) {
      if (!ec && generation == self->deadline_)
        self->close();
    });
  }

  void disarm() {
    ++deadline_;
    timer_.cancel();
  }

  void read_length() {
    arm();
    asio::async_read(socket_, asio::buffer(length_),
                     [self = shared_from_this()](error_code ec, size_t) {
                       if (ec)
                         return self->close();
                       size_t length = (size_t{self->length_[0]} << 8) | self->length_[1];
                       if (length == 0 || length > self->server_->options().message_bytes_max)
                         return self->close();
                       self->read_body(length);
                     });
  }

  void read_body(size_t length) {
    body_.resize(length);
    asio::async_read(socket_, asio::buffer(body_),
                     [self = shared_from_this()](error_code ec, size_t) {
                       if (ec)
                         return self->close();
                       self->disarm();
                       auto& server = *self->server_;
                       server.handle(self->body_, self->source_, server.options().message_bytes_max,
                                     true, [self](std::string answer) {
                                       if (self->closed_)
                                         return;
                                       if (answer.empty())
                                         return self->read_length();
                                       self->write(std::move(answer));
                                     });
                     });
  }

  void write(std::string answer) {
    out_.clear();
    out_ += static_cast<char>(answer.size() >> 8);
    out_ += static_cast<char>(answer.size() & 0xff);
    out_ += answer;
    arm();
    asio::async_write(socket_, asio::buffer(out_),
                      [self = shared_from_this()](error_code ec, size_t) {
                        if (ec)
                          return self->close();
                        self->read_length();
                      });
  }

  std::shared_ptr<dns_server::impl> server_;
  tcp::socket socket_;
  asio::steady_timer timer_;
  uint32_t source_;
  uint64_t deadline_ = 0;
  bool closed_ = false;
  std::array<uint8_t, 2> length_{};
  std::string body_;
  std::string out_;
};

// ---- binding and lifetime ----

status dns_server::impl::bind(const asio::ip::address_v4& address) {
  error_code ec;
  for (int attempt = 0; attempt < bind_attempts; ++attempt) {
    udp_.close(ec);
    acceptor_.close(ec);
    udp_.open(udp::v4(), ec);
    if (!ec)
      udp_.bind(udp::endpoint(address, options_.port), ec);
    if (ec)
      return make_status(errc::unavailable, "binding the DNS UDP socket failed: " + ec.message());
    port_ = udp_.local_endpoint(ec).port();
    acceptor_.open(tcp::v4(), ec);
    if (!ec)
      acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec)
      acceptor_.bind(tcp::endpoint(address, port_), ec);
    if (!ec)
      acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (!ec)
      return status::ok();
    if (options_.port != 0 || ec != asio::error::address_in_use)
      break; // a fixed port cannot move; other errors will not go away
  }
  return make_status(errc::unavailable, "binding the DNS TCP socket failed: " + ec.message());
}

void dns_server::impl::start() {
  asio::dispatch(strand_, [self = shared_from_this()] {
    self->receive_udp();
    self->accept_tcp();
  });
}

void dns_server::impl::stop() {
  asio::dispatch(strand_, [self = shared_from_this()] {
    self->stopped_ = true;
    error_code ignored;
    self->udp_.close(ignored);
    self->acceptor_.close(ignored);
    self->accept_retry_.cancel();
    auto sessions = std::move(self->sessions_);
    self->sessions_.clear();
    for (auto& [raw, weak] : sessions)
      if (auto session = weak.lock())
        session->close();
  });
}

dns_server_stats dns_server::impl::stats() const {
  return {count_.queries.load(),
          count_.answered.load(),
          count_.refused.load(),
          count_.malformed.load(),
          count_.dropped_unknown_source.load(),
          count_.dropped_overload.load(),
          count_.tcp_rejected.load()};
}

// ---- UDP ----

void dns_server::impl::receive_udp() {
  udp_.async_receive_from(asio::buffer(udp_buffer_), udp_sender_,
                          [self = shared_from_this()](error_code ec, size_t length) {
                            if (self->stopped_ || !self->udp_.is_open())
                              return;
                            if (!ec)
                              self->on_datagram(length);
                            self->receive_udp();
                          });
}

void dns_server::impl::on_datagram(size_t length) {
  if (length > options_.message_bytes_max) {
    ++count_.malformed; // a query this large is no query; the buffer cut it
    return;
  }
  auto from = udp_sender_;
  if (!from.address().is_v4()) {
    ++count_.dropped_unknown_source;
    return;
  }
  handle(std::string_view(udp_buffer_.data(), length), from.address().to_v4().to_uint(),
         options_.udp_answer_bytes_max, false,
         [self = shared_from_this(), from](std::string answer) {
           if (answer.empty() || self->stopped_)
             return;
           auto data = std::make_shared<std::string>(std::move(answer));
           self->udp_.async_send_to(asio::buffer(*data), from, [data](error_code, size_t) {});
         });
}

// ---- TCP accept ----

void dns_server::impl::accept_tcp() {
  acceptor_.async_accept(strand_, [self = shared_from_this()](error_code ec, tcp::socket socket) {
    if (self->stopped_ || !self->acceptor_.is_open())
      return;
    if (!ec) {
      self->on_accept(std::move(socket));
      return self->accept_tcp();
    }
    // Out of descriptors and the like: try again shortly instead of spinning.
    self->accept_retry_.expires_after(accept_retry);
    self->accept_retry_.async_wait([self](error_code wait_ec) {
      if (!wait_ec && !self->stopped_)
        self->accept_tcp();
    });
  });
}

void dns_server::impl::on_accept(tcp::socket socket) {
  error_code ec;
  std::erase_if(sessions_, [](const auto& entry) { return entry.second.expired(); });
  if (sessions_.size() >= options_.tcp_connections_max) {
    ++count_.tcp_rejected;
    socket.close(ec);
    return;
  }
  auto remote = socket.remote_endpoint(ec);
  if (ec || !remote.address().is_v4() || !sandboxes_.find(remote.address().to_v4().to_uint())) {
    ++count_.dropped_unknown_source;
    socket.close(ec);
    return;
  }
  auto session = std::make_shared<tcp_session>(shared_from_this(), std::move(socket),
                                               remote.address().to_v4().to_uint());
  sessions_.emplace(session.get(), session);
  session->start();
}

// ---- deciding ----

void dns_server::impl::handle(std::string_view message, uint32_t source, size_t bytes_max,
                              bool stream, responder respond) {
  auto sandbox = sandboxes_.find(source);
  if (!sandbox) {
    ++count_.dropped_unknown_source;
    return respond({});
  }
  ++count_.queries;
  auto q = dns::parse_query(message);
  reply_to reply{std::move(sandbox), bytes_max, stream, std::move(respond)};
  if (q.outcome == dns::verdict::drop) {
    ++count_.malformed;
    return reply.respond({});
  }
  if (q.outcome != dns::verdict::query) {
    ++count_.malformed;
    bool formerr = q.outcome == dns::verdict::formerr;
    audit(*reply.sandbox, "denied",
          formerr ? "the query is malformed" : "only standard queries are answered", "", "");
    return reply.respond(
      respond_code(q, formerr ? dns::rcode::formerr : dns::rcode::notimp, reply));
  }
  answer_query(std::move(reply), q);
}

void dns_server::impl::answer_query(reply_to reply, const dns::query& q) {
  std::string detail = "type " + dns::type_name(q.qtype);
  auto refuse = [&](std::string reason) {
    ++count_.refused;
    audit(*reply.sandbox, "denied", std::move(reason), q.name, detail);
    reply.respond(respond_code(q, dns::rcode::refused, reply));
  };
  if (q.qclass != dns::class_in)
    return refuse("class " + std::to_string(q.qclass) + " is refused");
  if (q.qtype != dns::type_a && q.qtype != dns::type_aaaa)
    return refuse("record type " + dns::type_name(q.qtype) + " is refused (could carry data out)");
  auto verdict = schema::judge_dns_name(reply.sandbox->policy, q.name);
  if (!verdict.allowed)
    return refuse(std::move(verdict.reason));
  if (q.qtype == dns::type_aaaa) {
    audit(*reply.sandbox, "allowed", verdict.reason + "; no IPv6 addresses are served", q.name,
          detail);
    return reply.respond(respond_code(q, dns::rcode::noerror, reply));
  }
  if (pending_ >= options_.pending_queries_max) {
    ++count_.dropped_overload;
    return reply.respond({});
  }
  ++pending_;
  auto name = *schema::normalize_host_name(q.name); // allowed implies valid
  resolver_.resolve(name, strand_,
                    [self = shared_from_this(), reply = std::move(reply), q,
                     reason = std::move(verdict.reason)](auto answer) mutable {
                      --self->pending_;
                      if (self->stopped_)
                        return;
                      self->answer_a(reply, q, reason, std::move(answer));
                    });
}

void dns_server::impl::answer_a(reply_to& reply, const dns::query& q,
                                const std::string& allowed_reason,
                                result<std::vector<uint32_t>> answer) {
  const std::string detail = "type A";
  if (!answer && answer.code() != errc::not_found) {
    audit(*reply.sandbox, "denied", "resolving failed: " + answer.error().message, q.name, detail);
    return reply.respond(respond_code(q, dns::rcode::servfail, reply));
  }
  std::vector<uint32_t> kept;
  std::string refusal;
  if (answer) {
    for (auto address : *answer) {
      if (auto why = filter_.refuse_reason(address))
        refusal = refusal.empty() ? *why : refusal;
      else
        kept.push_back(address);
    }
  }
  if (kept.empty() && !refusal.empty()) {
    audit(*reply.sandbox, "denied",
          "resolves only to private/loopback/metadata addresses (" + refusal + ")", q.name, detail);
    return reply.respond(respond_code(q, dns::rcode::nxdomain, reply));
  }
  if (kept.empty()) {
    audit(*reply.sandbox, "allowed", allowed_reason + "; the name does not exist", q.name, detail);
    return reply.respond(respond_code(q, dns::rcode::nxdomain, reply));
  }
  if (reply.stream)
    kept.resize(std::min(kept.size(), dns::answers_that_fit(q, reply.bytes_max)));
  ++count_.answered;
  audit(*reply.sandbox, "allowed", allowed_reason + "; answered " + join_addresses(kept), q.name,
        detail);
  reply.respond(
    dns::build_response(q, dns::rcode::noerror, kept, options_.answer_ttl_s, reply.bytes_max));
}

void dns_server::impl::audit(const sandbox_view& sandbox, const char* decision, std::string reason,
                             std::string target, std::string detail) {
  schema::audit_record record;
  record.at_ms = wall_ms();
  record.tenant_id = sandbox.tenant_id;
  record.sandbox_id = sandbox.sandbox_id;
  record.kind = "dns";
  record.decision = decision;
  record.reason = std::move(reason);
  record.target = std::move(target);
  record.detail = std::move(detail);
  audit_.record(std::move(record));
}

// ---- the handle ----

result<std::unique_ptr<dns_server>>
dns_server::start(asio::any_io_executor ex, const sandbox_table& sandboxes, resolver_pool& resolver,
                  const address_filter& filter, audit_sink& audit, dns_server_options options) {
  error_code ec;
  auto address = asio::ip::make_address_v4(options.bind_address, ec);
  if (ec)
    return make_status(errc::invalid_argument,
                       "\"" + options.bind_address + "\" is not an IPv4 address");
  auto state =
    std::make_shared<impl>(std::move(ex), sandboxes, resolver, filter, audit, std::move(options));
  if (auto bound = state->bind(address); !bound)
    return bound;
  state->start();
  return std::unique_ptr<dns_server>(new dns_server(std::move(state)));
}

dns_server::dns_server(std::shared_ptr<impl> state) : impl_(std::move(state)) {}

dns_server::~dns_server() { impl_->stop(); }

uint16_t dns_server::port() const { return impl_->port(); }

dns_server_stats dns_server::stats() const { return impl_->stats(); }

} // namespace airlock::worker::egress
