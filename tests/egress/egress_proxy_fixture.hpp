#pragma once
// The fixture of the egress proxy tests over loopback: a guest (the test)
// connects to the proxy port with its original destination injected; "the
// internet" is an HTTP and an HTTPS server on 127.0.0.1 reached through a
// static name map.

#include "worker/egress/egress_proxy.hpp"

#include <arpa/inet.h>
#include <stdlib.h>
#include <sys/socket.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <limits>

#include <boost/asio/connect.hpp>
#include <gtest/gtest.h>
#include <openssl/ssl.h>

#include "crypto/certificates.hpp"
#include "tests/egress/egress_test_upstream.hpp"

namespace airlock::worker::egress::proxy_testing {

using namespace test_doubles;
using tcp = net::ip::tcp;
using schema::egress_profile;

inline constexpr const char* secret_value = "sk-test-secret-4f1d9c";
inline constexpr uint32_t guest_original_ip = 0xCB007109; // 203.0.113.9: never connected to

/// A chain for the egress proxy (intermediate key and chain PEM) and one for the
/// upstream HTTPS server, each under its own root.
struct test_pki {
  crypto::key_and_cert proxy_root;
  std::string intermediate_key;
  std::string chain;
  crypto::key_and_cert upstream_root;
  std::unique_ptr<crypto::leaf_minter> upstream_minter;

  test_pki() {
    proxy_root = crypto::create_root_ca("airlock test egress root", 30).value();
    intermediate_key = crypto::generate_key_pem().value();
    auto intermediate = crypto::issue_intermediate(
      proxy_root, crypto::public_key_pem(intermediate_key).value(), "worker egress", 30);
    chain = intermediate.value() + proxy_root.cert_pem;
    upstream_root = crypto::create_root_ca("airlock test upstream root", 30).value();
    auto upstream_key = crypto::generate_key_pem().value();
    auto upstream_intermediate = crypto::issue_intermediate(
      upstream_root, crypto::public_key_pem(upstream_key).value(), "upstream ca", 30);
    upstream_minter = crypto::leaf_minter::create(upstream_key, upstream_intermediate.value()
                                                                  + upstream_root.cert_pem)
                        .value();
  }
};

/// A server context presenting the upstream leaf for api.test.
inline void use_upstream_leaf(net::ssl::context& context, crypto::leaf_minter& minter) {
  auto leaf = minter.for_name("api.test").value();
  SSL_CTX_use_certificate(context.native_handle(), leaf.cert.get());
  SSL_CTX_use_PrivateKey(context.native_handle(), leaf.key.get());
  for (const auto& cert : leaf.chain)
    SSL_CTX_add1_chain_cert(context.native_handle(), cert.get());
}

class egress_proxy_test : public ::testing::Test {
protected:
  void SetUp() override {
    char pattern[] = "/tmp/airlock-egress-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
    use_upstream_leaf(upstream_tls_, *pki_.upstream_minter);
    std::ofstream{dir_ / "upstream-ca.pem"} << pki_.upstream_root.cert_pem;
    std::ofstream{dir_ / "hosts"}
      << "# the test's internet\n"
      << "api.test 127.0.0.1\nother.test 127.0.0.1\nwrong.test 127.0.0.1\n"
      << "private.test 10.0.0.7\nmetadata.test 169.254.169.254\n";
    credentials_->set(credential_source::grants{});
  }

  void TearDown() override {
    proxy_.reset();
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  egress_proxy_options options() {
    egress_proxy_options o;
    o.bind_address = "127.0.0.1";
    o.hosts_file = (dir_ / "hosts").string();
    o.allowed_private = {"127.0.0.0/8"};
    o.connection.upstream_ca_file = (dir_ / "upstream-ca.pem").string();
    o.original_destination = [this](int fd) -> result<std::pair<uint32_t, uint16_t>> {
      sockaddr_in peer{};
      socklen_t length = sizeof(peer);
      ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &length);
      std::lock_guard lock{mutex_};
      auto it = destinations_.find(ntohs(peer.sin_port));
      if (it == destinations_.end())
        return make_status(errc::not_found, "no destination registered");
      return std::pair<uint32_t, uint16_t>{guest_original_ip, it->second};
    };
    return o;
  }

  void start(egress_proxy_options o, bool with_authority = true) {
    auto started = egress_proxy::start(std::move(o), audit_, credentials_);
    ASSERT_TRUE(started) << started.error().message;
    proxy_ = std::move(started.value());
    if (with_authority) {
      auto authority = proxy_->set_authority(pki_.intermediate_key, pki_.chain);
      ASSERT_TRUE(authority) << authority.message;
    }
  }
  void start() { start(options()); }

  void policy(egress_profile profile, std::vector<std::string> allow = {},
              std::string address = "127.0.0.1") {
    sandbox_view view;
    view.sandbox_id = "sb_test";
    view.tenant_id = "tn_test";
    view.template_name = "base";
    view.address = std::move(address);
    view.policy = schema::egress_policy{profile, std::move(allow)};
    proxy_->attach(std::move(view));
  }

  /// A guest socket whose original destination is `port`, connected to the proxy.
  tcp::socket guest(uint16_t port, const char* source = "127.0.0.1") {
    tcp::socket socket{io_};
    socket.open(tcp::v4());
    socket.bind(tcp::endpoint{net::ip::make_address_v4(source), 0});
    timeval timeout{10, 0};
    ::setsockopt(socket.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    {
      std::lock_guard lock{mutex_};
      destinations_[socket.local_endpoint().port()] = port;
    }
    socket.connect(tcp::endpoint{net::ip::make_address_v4("127.0.0.1"), proxy_->proxy_port()});
    return socket;
  }

  /// The guest's TLS context: trusts the egress proxy's root (or `ca_pem`).
  std::unique_ptr<net::ssl::context> guest_tls(const std::string& ca_pem) {
    auto context = std::make_unique<net::ssl::context>(net::ssl::context::tls_client);
    context->add_certificate_authority(net::buffer(ca_pem));
    context->set_verify_mode(net::ssl::verify_peer);
    return context;
  }

  /// TLS to the proxy as a guest would: SNI `sni` (none when empty), verified.
  std::unique_ptr<net::ssl::stream<tcp::socket>> tls_guest(uint16_t port, const std::string& sni,
                                                           net::ssl::context& context,
                                                           beast::error_code& ec) {
    auto stream = std::make_unique<net::ssl::stream<tcp::socket>>(guest(port), context);
    if (!sni.empty()) {
      SSL_set_tlsext_host_name(stream->native_handle(), sni.c_str());
      SSL_set1_host(stream->native_handle(), sni.c_str());
    }
    stream->handshake(net::ssl::stream_base::client, ec);
    return stream;
  }

  template <class Stream>
  http::response<http::string_body>
  exchange(Stream& stream, const std::string& host, const std::string& target = "/hello",
           std::vector<std::pair<std::string, std::string>> extra = {}) {
    http::request<http::string_body> request{http::verb::get, target, 11};
    request.set(http::field::host, host);
    for (auto& [name, value] : extra)
      request.set(name, value);
    http::write(stream, request);
    beast::flat_buffer buffer;
    http::response<http::string_body> response;
    beast::error_code ec;
    http::read(stream, buffer, response, ec);
    EXPECT_FALSE(ec) << ec.message();
    return response;
  }

  /// GET `target` from api.test with no limit on the body's size; `ec` says
  /// how reading the response ended.
  template <class Stream>
  http::response<http::string_body> fetch(Stream& stream, const std::string& target,
                                          beast::error_code& ec) {
    http::request<http::empty_body> request{http::verb::get, target, 11};
    request.set(http::field::host, "api.test");
    http::write(stream, request);
    beast::flat_buffer buffer;
    http::response_parser<http::string_body> parser;
    parser.body_limit(std::numeric_limits<std::uint64_t>::max());
    http::read(stream, buffer, parser, ec);
    return parser.release();
  }

  /// Sends raw bytes, returns everything until the proxy closes.
  std::string raw_exchange(tcp::socket& socket, const std::string& bytes) {
    net::write(socket, net::buffer(bytes));
    std::string received;
    beast::error_code ec;
    for (char chunk[4096];;) {
      auto count = socket.read_some(net::buffer(chunk), ec);
      if (ec)
        break;
      received.append(chunk, count);
    }
    return received;
  }

  std::vector<schema::audit_record> audits(std::string_view kind, std::string_view decision) const {
    std::vector<schema::audit_record> found;
    for (auto& record : audit_->records())
      if (record.kind == kind && record.decision == decision)
        found.push_back(record);
    return found;
  }

  /// Waits (bounded) until an audit record matching `predicate` exists.
  template <class Predicate>
  bool wait_for_audit(Predicate predicate) const {
    return audit_->wait_for_record(predicate);
  }

  bool has_denial(std::string_view reason_part) const {
    return wait_for_audit([&](const schema::audit_record& r) {
      return r.kind == "egress" && r.decision == "denied"
             && r.reason.find(reason_part) != std::string::npos;
    });
  }

  schema::credential_grant api_grant(uint32_t rate = 0) {
    schema::credential_grant grant;
    grant.credential_id = "cred_1";
    grant.name = "api-key";
    grant.scope = schema::credential_scope::sandbox;
    grant.hosts = {"api.test"};
    grant.header = "X-Api-Key";
    grant.value = secret_value;
    grant.rate_limit_per_min = rate;
    return grant;
  }

  std::filesystem::path dir_;
  test_pki pki_;
  net::ssl::context upstream_tls_{net::ssl::context::tls_server};
  upstream_server http_upstream_;
  upstream_server https_upstream_{&upstream_tls_};
  std::shared_ptr<recording_audit> audit_ = std::make_shared<recording_audit>();
  std::shared_ptr<fixed_credentials> credentials_ = std::make_shared<fixed_credentials>();
  std::unique_ptr<egress_proxy> proxy_;
  net::io_context io_;
  std::mutex mutex_;
  std::map<uint16_t, uint16_t> destinations_;
};

} // namespace airlock::worker::egress::proxy_testing
