#include "worker/egress/dns_server.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <future>
#include <mutex>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <gtest/gtest.h>

#include "tests/support/wait.hpp"
#include "worker/egress/dns_message.hpp"

namespace airlock::worker::egress {
namespace {

uint32_t addr(std::string_view text) { return parse_ipv4(text).value(); }

class recording_sink : public audit_sink {
public:
  void record(schema::audit_record record) override {
    std::lock_guard lock(mutex_);
    records_.push_back(std::move(record));
  }
  std::vector<schema::audit_record> records() const {
    std::lock_guard lock(mutex_);
    return records_;
  }

private:
  mutable std::mutex mutex_;
  std::vector<schema::audit_record> records_;
};

void put16(std::string& out, uint16_t v) {
  out += static_cast<char>(v >> 8);
  out += static_cast<char>(v & 0xff);
}

/// A query as a stub resolver sends it.
std::string make_query(uint16_t id, std::string_view name, uint16_t qtype, uint16_t qclass = 1) {
  std::string out;
  put16(out, id);
  put16(out, 0x0100); // RD
  put16(out, 1);
  put16(out, 0);
  put16(out, 0);
  put16(out, 0);
  size_t start = 0;
  while (start < name.size()) {
    size_t dot = name.find('.', start);
    auto label = name.substr(start, dot == std::string_view::npos ? name.npos : dot - start);
    out += static_cast<char>(label.size());
    out += label;
    start = dot == std::string_view::npos ? name.size() : dot + 1;
  }
  out += '\0';
  put16(out, qtype);
  put16(out, qclass);
  return out;
}

struct answer {
  uint16_t id = 0;
  uint16_t flags = 0;
  uint16_t questions = 0;
  std::vector<uint32_t> addresses;
  uint32_t ttl = 0;
  int rcode() const { return flags & 0xf; }
  bool truncated() const { return (flags & 0x0200) != 0; }
};

uint16_t get16(std::string_view b, size_t at) {
  return static_cast<uint16_t>((static_cast<uint8_t>(b[at]) << 8)
                               | static_cast<uint8_t>(b[at + 1]));
}

answer parse_answer(std::string_view bytes) {
  answer a;
  EXPECT_GE(bytes.size(), 12u);
  if (bytes.size() < 12)
    return a;
  a.id = get16(bytes, 0);
  a.flags = get16(bytes, 2);
  a.questions = get16(bytes, 4);
  uint16_t count = get16(bytes, 6);
  size_t at = 12;
  for (uint16_t q = 0; q < a.questions; ++q) {
    while (at < bytes.size() && bytes[at] != 0)
      at += static_cast<uint8_t>(bytes[at]) + 1;
    at += 5;
  }
  for (uint16_t i = 0; i < count && at + 16 <= bytes.size(); ++i, at += 16) {
    EXPECT_EQ(get16(bytes, at + 2), 1); // type A
    a.ttl = (uint32_t{get16(bytes, at + 6)} << 16) | get16(bytes, at + 8);
    a.addresses.push_back((uint32_t{get16(bytes, at + 12)} << 16) | get16(bytes, at + 14));
  }
  EXPECT_EQ(a.addresses.size(), count);
  return a;
}

/// A socket closed at scope end, with a receive timeout so a lost answer
/// fails the test instead of hanging it.
struct client_socket {
  int fd = -1;
  client_socket(int type, std::string_view source) {
    fd = ::socket(AF_INET, type, 0);
    timeval timeout{5, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    sockaddr_in local{};
    local.sin_family = AF_INET;
    ::inet_pton(AF_INET, std::string(source).c_str(), &local.sin_addr);
    EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof local), 0);
  }
  ~client_socket() { ::close(fd); }
  static sockaddr_in server(uint16_t port) {
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(port);
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return to;
  }
};

std::string udp_exchange(uint16_t port, const std::string& query,
                         std::string_view source = "127.0.0.1") {
  client_socket s(SOCK_DGRAM, source);
  auto to = client_socket::server(port);
  ::sendto(s.fd, query.data(), query.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof to);
  char buffer[4096];
  ssize_t n = ::recv(s.fd, buffer, sizeof buffer, 0);
  return n > 0 ? std::string(buffer, static_cast<size_t>(n)) : std::string{};
}

bool read_exact(int fd, char* out, size_t size) {
  for (size_t got = 0; got < size;) {
    ssize_t n = ::recv(fd, out + got, size - got, 0);
    if (n <= 0)
      return false;
    got += static_cast<size_t>(n);
  }
  return true;
}

/// One length-prefixed exchange on a connected TCP socket; empty on EOF.
std::string tcp_exchange(int fd, const std::string& query) {
  std::string framed;
  put16(framed, static_cast<uint16_t>(query.size()));
  framed += query;
  ::send(fd, framed.data(), framed.size(), MSG_NOSIGNAL);
  char length[2];
  if (!read_exact(fd, length, 2))
    return {};
  std::string body(get16(std::string_view(length, 2), 0), '\0');
  return read_exact(fd, body.data(), body.size()) ? body : std::string{};
}

bool connect_to(int fd, uint16_t port) {
  auto to = client_socket::server(port);
  return ::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0;
}

template <class Predicate>
bool eventually(Predicate done) {
  return airlock::test::wait_for(done, std::chrono::seconds(5));
}

std::map<std::string, std::vector<uint32_t>> test_internet() {
  std::vector<uint32_t> many;
  for (uint32_t i = 0; i < 40; ++i)
    many.push_back(addr("203.0.113.100") + i);
  return {{"allowed.example", {addr("203.0.113.10"), addr("203.0.113.11")}},
          {"private.example", {addr("10.0.0.5"), addr("169.254.169.254")}},
          {"loopback.example", {addr("127.0.0.1")}},
          {"mixed.example", {addr("10.0.0.1"), addr("203.0.113.20")}},
          {"many.example", many},
          {"a.wild.example", {addr("203.0.113.30")}}};
}

/// A DNS server on 127.0.0.1:<any> for a sandbox whose address is 127.0.0.1.
struct dns_fixture {
  sandbox_table table;
  recording_sink sink;
  address_filter filter;
  std::unique_ptr<resolver_pool> pool =
    std::make_unique<resolver_pool>(std::make_unique<static_resolver>(test_internet()));
  boost::asio::io_context io;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work{io.get_executor()};
  std::thread thread{[this] { io.run(); }};
  std::unique_ptr<dns_server> server;

  explicit dns_fixture(dns_server_options options = {}) {
    table.put({"sb_dns",
               "tn_1",
               "base",
               "127.0.0.1",
               {schema::egress_profile::allowlist,
                {"allowed.example", "private.example", "loopback.example", "mixed.example",
                 "many.example:443", "*.wild.example"}}});
    options.bind_address = "127.0.0.1";
    options.port = 0;
    auto started = dns_server::start(io.get_executor(), table, *pool, filter, sink, options);
    EXPECT_TRUE(started) << started.error().message;
    server = std::move(*started);
  }

  ~dns_fixture() {
    server.reset();
    drain();
    pool.reset();
    work.reset();
    io.stop();
    thread.join();
  }

  void drain() {
    std::promise<void> done;
    boost::asio::post(io, [&done] { done.set_value(); });
    done.get_future().wait();
  }

  uint16_t port() const { return server->port(); }

  std::optional<schema::audit_record> last_audit() const {
    auto records = sink.records();
    if (records.empty())
      return std::nullopt;
    return records.back();
  }
};

constexpr int noerror = 0;
constexpr int formerr = 1;
constexpr int nxdomain = 3;
constexpr int refused = 5;

TEST(dns_server, answers_an_allowed_name_with_its_public_addresses) {
  dns_fixture f;
  ASSERT_NE(f.port(), 0);
  auto a = parse_answer(udp_exchange(f.port(), make_query(0x1234, "Allowed.Example", dns::type_a)));
  EXPECT_EQ(a.id, 0x1234);
  EXPECT_EQ(a.rcode(), noerror);
  EXPECT_TRUE(a.flags & 0x8000);
  EXPECT_EQ(a.questions, 1);
  EXPECT_EQ(a.addresses, (std::vector<uint32_t>{addr("203.0.113.10"), addr("203.0.113.11")}));
  EXPECT_EQ(a.ttl, 30u);
  auto record = f.last_audit();
  ASSERT_TRUE(record);
  EXPECT_EQ(record->kind, "dns");
  EXPECT_EQ(record->decision, "allowed");
  EXPECT_EQ(record->sandbox_id, "sb_dns");
  EXPECT_EQ(record->tenant_id, "tn_1");
  EXPECT_EQ(record->target, "Allowed.Example");
  EXPECT_EQ(record->detail, "type A");
  EXPECT_GT(record->at_ms, 0);
  EXPECT_EQ(f.server->stats().answered, 1u);
}

TEST(dns_server, a_rule_with_a_port_and_a_wildcard_let_names_resolve) {
  dns_fixture f;
  auto wild = parse_answer(udp_exchange(f.port(), make_query(1, "a.wild.example", dns::type_a)));
  EXPECT_EQ(wild.addresses, std::vector<uint32_t>{addr("203.0.113.30")});
  auto missing =
    parse_answer(udp_exchange(f.port(), make_query(2, "missing.wild.example", dns::type_a)));
  EXPECT_EQ(missing.rcode(), nxdomain);
}

TEST(dns_server, aaaa_of_an_allowed_name_is_answered_empty) {
  dns_fixture f;
  auto a = parse_answer(udp_exchange(f.port(), make_query(7, "allowed.example", dns::type_aaaa)));
  EXPECT_EQ(a.rcode(), noerror);
  EXPECT_TRUE(a.addresses.empty());
  auto record = f.last_audit();
  ASSERT_TRUE(record);
  EXPECT_EQ(record->decision, "allowed");
  EXPECT_EQ(record->detail, "type AAAA");
}

TEST(dns_server, txt_and_other_record_types_are_refused_and_audited) {
  dns_fixture f;
  for (uint16_t type : {16, 15, 255, 10, 33, 5}) {
    auto a = parse_answer(udp_exchange(f.port(), make_query(9, "allowed.example", type)));
    EXPECT_EQ(a.rcode(), refused) << type;
    EXPECT_TRUE(a.addresses.empty());
    auto record = f.last_audit();
    ASSERT_TRUE(record);
    EXPECT_EQ(record->decision, "denied");
    EXPECT_EQ(record->reason,
              "record type " + dns::type_name(type) + " is refused (could carry data out)");
  }
  EXPECT_EQ(f.last_audit()->detail, "type CNAME");
  auto chaos = parse_answer(udp_exchange(f.port(), make_query(3, "version.bind", 16, 3)));
  EXPECT_EQ(chaos.rcode(), refused);
  EXPECT_EQ(f.server->stats().refused, 7u);
}

TEST(dns_server, names_outside_the_allowlist_are_refused) {
  dns_fixture f;
  auto a = parse_answer(udp_exchange(f.port(), make_query(4, "other.example", dns::type_a)));
  EXPECT_EQ(a.rcode(), refused);
  auto record = f.last_audit();
  ASSERT_TRUE(record);
  EXPECT_EQ(record->decision, "denied");
  EXPECT_NE(record->reason.find("not in the sandbox's allowlist"), std::string::npos)
    << record->reason;
  // Long-label tunnelling under an unlisted domain goes nowhere either.
  std::string tunnel(63, 'x');
  auto t = parse_answer(
    udp_exchange(f.port(), make_query(5, tunnel + "." + tunnel + ".attacker.example", 1)));
  EXPECT_EQ(t.rcode(), refused);
  // A label with a dot inside is not the name it looks like.
  std::string sneaky = make_query(6, "x", dns::type_a);
  sneaky.replace(12, 2,
                 std::string("\x0f"
                             "allowed.example",
                             16));
  EXPECT_EQ(parse_answer(udp_exchange(f.port(), sneaky)).rcode(), refused);
}

TEST(dns_server, a_name_resolving_only_to_private_addresses_gets_nxdomain) {
  dns_fixture f;
  for (std::string_view name : {"private.example", "loopback.example"}) {
    auto a = parse_answer(udp_exchange(f.port(), make_query(8, name, dns::type_a)));
    EXPECT_EQ(a.rcode(), nxdomain) << name;
    EXPECT_TRUE(a.addresses.empty());
    auto record = f.last_audit();
    ASSERT_TRUE(record);
    EXPECT_EQ(record->decision, "denied");
    EXPECT_NE(record->reason.find("resolves only to private/loopback/metadata addresses"),
              std::string::npos)
      << record->reason;
  }
  auto mixed = parse_answer(udp_exchange(f.port(), make_query(9, "mixed.example", dns::type_a)));
  EXPECT_EQ(mixed.rcode(), noerror);
  EXPECT_EQ(mixed.addresses, std::vector<uint32_t>{addr("203.0.113.20")});
}

TEST(dns_server, malformed_queries_get_formerr) {
  dns_fixture f;
  std::string truncated = make_query(0x4242, "allowed.example", dns::type_a);
  truncated.resize(20);
  auto a = parse_answer(udp_exchange(f.port(), truncated));
  EXPECT_EQ(a.id, 0x4242);
  EXPECT_EQ(a.rcode(), formerr);
  EXPECT_EQ(a.questions, 0);

  std::string two = make_query(0x4343, "allowed.example", dns::type_a);
  two[5] = 2;
  EXPECT_EQ(parse_answer(udp_exchange(f.port(), two)).rcode(), formerr);

  std::string pointer = make_query(0x4444, "x", dns::type_a);
  pointer.replace(12, 2, "\xc0\x0c");
  EXPECT_EQ(parse_answer(udp_exchange(f.port(), pointer)).rcode(), formerr);

  auto record = f.last_audit();
  ASSERT_TRUE(record);
  EXPECT_EQ(record->decision, "denied");
  EXPECT_EQ(record->reason, "the query is malformed");
  EXPECT_EQ(f.server->stats().malformed, 3u);
}

TEST(dns_server, queries_from_unknown_sources_are_dropped_silently) {
  dns_fixture f;
  client_socket stranger(SOCK_DGRAM, "127.0.0.2");
  auto to = client_socket::server(f.port());
  auto query = make_query(1, "allowed.example", dns::type_a);
  ::sendto(stranger.fd, query.data(), query.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof to);
  ASSERT_TRUE(eventually([&f] { return f.server->stats().dropped_unknown_source == 1; }));
  // The server handles datagrams in order: once a later query is answered, an
  // answer to the stranger would already be in its socket.
  EXPECT_EQ(parse_answer(udp_exchange(f.port(), query)).rcode(), noerror);
  char buffer[512];
  EXPECT_EQ(::recv(stranger.fd, buffer, sizeof buffer, MSG_DONTWAIT), -1);
  EXPECT_EQ(f.sink.records().size(), 1u); // only the known sandbox's query

  client_socket tcp_stranger(SOCK_STREAM, "127.0.0.2");
  ASSERT_TRUE(connect_to(tcp_stranger.fd, f.port()));
  EXPECT_EQ(tcp_exchange(tcp_stranger.fd, query), "");
  EXPECT_EQ(f.server->stats().dropped_unknown_source, 2u);
}

TEST(dns_server, long_answers_are_truncated_over_udp_and_whole_over_tcp) {
  dns_fixture f;
  auto query = make_query(11, "many.example", dns::type_a);
  auto udp = parse_answer(udp_exchange(f.port(), query));
  EXPECT_TRUE(udp.truncated());
  EXPECT_TRUE(udp.addresses.empty());

  client_socket tcp(SOCK_STREAM, "127.0.0.1");
  ASSERT_TRUE(connect_to(tcp.fd, f.port()));
  auto whole = parse_answer(tcp_exchange(tcp.fd, query));
  EXPECT_FALSE(whole.truncated());
  EXPECT_EQ(whole.addresses.size(), 40u);
  // Several queries on one connection.
  auto txt = parse_answer(tcp_exchange(tcp.fd, make_query(12, "allowed.example", 16)));
  EXPECT_EQ(txt.id, 12);
  EXPECT_EQ(txt.rcode(), refused);
  auto again = parse_answer(tcp_exchange(tcp.fd, make_query(13, "allowed.example", 1)));
  EXPECT_EQ(again.addresses.size(), 2u);
}

TEST(dns_server, tcp_connections_past_the_limit_are_closed) {
  dns_fixture f({.tcp_connections_max = 1});
  client_socket first(SOCK_STREAM, "127.0.0.1");
  ASSERT_TRUE(connect_to(first.fd, f.port()));
  EXPECT_FALSE(tcp_exchange(first.fd, make_query(1, "allowed.example", 1)).empty());
  client_socket second(SOCK_STREAM, "127.0.0.1");
  ASSERT_TRUE(connect_to(second.fd, f.port()));
  EXPECT_EQ(tcp_exchange(second.fd, make_query(2, "allowed.example", 1)), "");
  EXPECT_EQ(f.server->stats().tcp_rejected, 1u);
  EXPECT_FALSE(tcp_exchange(first.fd, make_query(3, "allowed.example", 1)).empty());
}

TEST(dns_server, idle_tcp_connections_are_closed) {
  dns_fixture f({.tcp_idle_timeout_ms = 100});
  client_socket idle(SOCK_STREAM, "127.0.0.1");
  ASSERT_TRUE(connect_to(idle.fd, f.port()));
  auto started = std::chrono::steady_clock::now();
  char byte;
  EXPECT_EQ(::recv(idle.fd, &byte, 1, 0), 0); // EOF from the server, not the 5 s timeout
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(4));
}

TEST(dns_server, a_policy_update_applies_to_the_next_query) {
  dns_fixture f;
  auto query = make_query(1, "allowed.example", dns::type_a);
  EXPECT_EQ(parse_answer(udp_exchange(f.port(), query)).rcode(), noerror);
  f.table.put({"sb_dns", "tn_1", "base", "127.0.0.1", {schema::egress_profile::none, {}}});
  EXPECT_EQ(parse_answer(udp_exchange(f.port(), query)).rcode(), refused);
  EXPECT_EQ(f.last_audit()->reason, "egress profile is none");
  f.table.put({"sb_dns", "tn_1", "base", "127.0.0.1", {schema::egress_profile::open, {}}});
  EXPECT_EQ(parse_answer(udp_exchange(f.port(), make_query(2, "a.wild.example", 1))).rcode(),
            noerror);
}

TEST(dns_server, refuses_a_bad_bind_address) {
  sandbox_table table;
  recording_sink sink;
  address_filter filter;
  resolver_pool pool(std::make_unique<static_resolver>(test_internet()));
  boost::asio::io_context io;
  auto started = dns_server::start(io.get_executor(), table, pool, filter, sink,
                                   {.bind_address = "not an address", .port = 0});
  EXPECT_EQ(started.code(), errc::invalid_argument);
}

} // namespace
} // namespace airlock::worker::egress
