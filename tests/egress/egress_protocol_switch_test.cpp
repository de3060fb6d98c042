// The egress proxy over loopback (fixture: egress_proxy_fixture.hpp):
// protocol switches and hop-by-hop fields. Nothing after one judged request
// may carry another that was not judged.

#include "tests/egress/egress_proxy_fixture.hpp"

namespace airlock::worker::egress {
namespace {

using namespace proxy_testing;

TEST_F(egress_proxy_test, an_h2c_upgrade_is_stripped_and_the_clear_text_preface_after_it_refused) {
  start();
  policy(egress_profile::allowlist, {"api.test"});
  auto socket = guest(http_upstream_.port());
  auto response = exchange(socket, "api.test", "/",
                           {{"Connection", "Upgrade, HTTP2-Settings"},
                            {"Upgrade", "h2c"},
                            {"HTTP2-Settings", "AAMAAABkAAQAAP__"}});
  EXPECT_EQ(response.result_int(), 200);
  auto seen = http_upstream_.requests().at(0).headers;
  EXPECT_EQ(seen.count("upgrade"), 0u);
  EXPECT_EQ(seen.count("http2-settings"), 0u);
  EXPECT_EQ(seen.count("connection"), 0u);
  EXPECT_TRUE(has_denial("protocol switch to h2c refused"));
  EXPECT_EQ(proxy_->stats().switches_refused, 1u);
  // What an h2c client sends next: the preface, on the same connection.
  auto reply =
    raw_exchange(socket, std::string("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n") + std::string(9, '\0'));
  EXPECT_TRUE(reply.starts_with("HTTP/1.1 505")) << reply.substr(0, 100);
  EXPECT_TRUE(has_denial("HTTP/2 connection preface"));
  EXPECT_EQ(http_upstream_.requests().size(), 1u);
  EXPECT_TRUE(audits("egress", "tunnel").empty());
}

TEST_F(egress_proxy_test, the_http2_preface_as_first_bytes_is_refused) {
  start();
  policy(egress_profile::open);
  auto socket = guest(http_upstream_.port());
  auto reply =
    raw_exchange(socket, std::string("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n") + std::string(9, '\0'));
  EXPECT_TRUE(reply.starts_with("HTTP/1.1 505")) << reply.substr(0, 100);
  EXPECT_TRUE(has_denial("HTTP/2 connection preface"));
  EXPECT_TRUE(http_upstream_.requests().empty());
}

TEST_F(egress_proxy_test, alpn_h2_on_a_terminated_connection_gets_http_1_1_only) {
  start();
  policy(egress_profile::allowlist, {"api.test"});
  auto context = guest_tls(pki_.proxy_root.cert_pem);
  static const unsigned char h2_only[] = {2, 'h', '2'};
  ASSERT_EQ(SSL_CTX_set_alpn_protos(context->native_handle(), h2_only, sizeof h2_only), 0);
  beast::error_code ec;
  auto stream = tls_guest(https_upstream_.port(), "api.test", *context, ec);
  ASSERT_FALSE(ec) << ec.message();
  const unsigned char* selected = nullptr;
  unsigned selected_length = 0;
  SSL_get0_alpn_selected(stream->native_handle(), &selected, &selected_length);
  EXPECT_EQ(selected_length, 0u) << "the proxy never agrees to h2";
  // A client that speaks HTTP/2 regardless is refused.
  std::string preface = std::string("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n") + std::string(9, '\0');
  net::write(*stream, net::buffer(preface));
  beast::flat_buffer buffer;
  http::response<http::string_body> response;
  http::read(*stream, buffer, response, ec);
  EXPECT_EQ(response.result_int(), 505);
  EXPECT_TRUE(https_upstream_.requests().empty());
}

TEST_F(egress_proxy_test, a_101_nobody_asked_for_ends_both_connections) {
  start();
  policy(egress_profile::allowlist, {"api.test"});
  auto socket = guest(http_upstream_.port());
  auto reply = raw_exchange(socket, "GET /switch HTTP/1.1\r\nHost: api.test\r\n\r\n");
  EXPECT_TRUE(reply.starts_with("HTTP/1.1 502")) << reply.substr(0, 100);
  EXPECT_EQ(reply.find("HTTP/1.1 101"), std::string::npos)
    << "the 101 itself never reaches the guest: " << reply.substr(0, 200);
  EXPECT_TRUE(
    has_denial("upstream switched protocols (101, Upgrade: h2c) though no switch was asked for"));
  EXPECT_EQ(proxy_->stats().switches_refused, 1u);
  EXPECT_TRUE(audits("egress", "tunnel").empty());
  EXPECT_EQ(http_upstream_.echoed_after_switch(), 0u);
}

TEST_F(egress_proxy_test,
       a_101_that_does_not_answer_the_websocket_asked_for_ends_both_connections) {
  start();
  policy(egress_profile::allowlist, {"api.test"});
  for (const char* target : {"/switch", "/bad-accept"}) {
    auto socket = guest(http_upstream_.port());
    std::string ask =
      std::string("GET ") + target
      + " HTTP/1.1\r\nHost: api.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";
    auto reply = raw_exchange(socket, ask + "bytes meant for the tunnel");
    EXPECT_TRUE(reply.starts_with("HTTP/1.1 502")) << target << ": " << reply.substr(0, 100);
  }
  EXPECT_TRUE(has_denial("without answering the WebSocket upgrade asked for"));
  EXPECT_EQ(proxy_->stats().switches_refused, 2u);
  EXPECT_EQ(proxy_->stats().upgrades, 0u);
  EXPECT_TRUE(audits("egress", "tunnel").empty());
  EXPECT_EQ(http_upstream_.echoed_after_switch(), 0u)
    << "no byte after the 101 reached the upstream";
}

TEST_F(egress_proxy_test, an_upstream_connection_opened_for_one_host_never_carries_another) {
  start();
  // api.test and other.test resolve to one address, as names on a shared host do.
  policy(egress_profile::allowlist, {"api.test", "other.test"});
  auto socket = guest(http_upstream_.port());
  EXPECT_EQ(exchange(socket, "api.test", "/one").body(), "hello from api.test /one body=");
  EXPECT_EQ(exchange(socket, "other.test", "/two").body(), "hello from other.test /two body=");
  EXPECT_EQ(exchange(socket, "api.test", "/three").body(), "hello from api.test /three body=");
  EXPECT_EQ(http_upstream_.connections(), 3) << "one upstream connection per change of host";
  EXPECT_EQ(audits("egress", "allowed").size(), 3u) << "each request judged on its own";
}

TEST_F(egress_proxy_test, connection_naming_content_length_cannot_smuggle_a_request) {
  start();
  policy(egress_profile::allowlist, {"api.test"});
  auto socket = guest(http_upstream_.port());
  std::string smuggled = "GET /hidden HTTP/1.1\r\nHost: other.test\r\n\r\n";
  auto reply =
    raw_exchange(socket, "POST /upload HTTP/1.1\r\nHost: api.test\r\nConnection: Content-Length\r\n"
                         "Content-Length: "
                           + std::to_string(smuggled.size()) + "\r\n\r\n" + smuggled);
  EXPECT_TRUE(reply.starts_with("HTTP/1.1 400")) << reply.substr(0, 100);
  EXPECT_TRUE(has_denial("framing or routing"));
  EXPECT_TRUE(http_upstream_.requests().empty());
}

TEST_F(egress_proxy_test, hop_by_hop_fields_and_claims_of_another_host_never_reach_the_upstream) {
  start();
  policy(egress_profile::allowlist, {"api.test"});
  auto socket = guest(http_upstream_.port());
  auto response = exchange(socket, "API.test", "/hello",
                           {{"Connection", "X-Hop"},
                            {"X-Hop", "1"},
                            {"Keep-Alive", "timeout=5"},
                            {"Proxy-Connection", "keep-alive"},
                            {"Proxy-Authorization", "Basic Z3Vlc3Q="},
                            {"TE", "gzip"},
                            {"X-Forwarded-Host", "evil.test"},
                            {"Forwarded", "host=evil.test"},
                            {"X-Kept", "end to end"}});
  EXPECT_EQ(response.result_int(), 200);
  auto seen = http_upstream_.requests().at(0);
  EXPECT_EQ(seen.host, "api.test") << "the Host sent is the name judged";
  for (const char* name : {"x-hop", "keep-alive", "proxy-connection", "proxy-authorization", "te",
                           "x-forwarded-host", "forwarded", "connection"})
    EXPECT_EQ(seen.headers.count(name), 0u) << name;
  EXPECT_EQ(seen.headers["x-kept"], "end to end");
}

TEST_F(egress_proxy_test, a_proxy_authorization_credential_is_still_injected) {
  start();
  auto grant = api_grant();
  grant.header = "Proxy-Authorization";
  credentials_->set(credential_source::grants{grant});
  policy(egress_profile::allowlist, {"api.test"});
  auto socket = guest(http_upstream_.port());
  EXPECT_EQ(exchange(socket, "api.test", "/hello", {{"Proxy-Authorization", "Basic Z3Vlc3Q="}})
              .result_int(),
            200);
  EXPECT_EQ(http_upstream_.requests().at(0).headers["proxy-authorization"], secret_value);
}

} // namespace
} // namespace airlock::worker::egress
