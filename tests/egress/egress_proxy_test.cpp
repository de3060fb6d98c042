// The egress proxy over loopback (fixture: egress_proxy_fixture.hpp):
// what reaches the upstream, refusals, credentials, limits and bodies.

#include <chrono>
#include <limits>

#include "tests/egress/egress_proxy_fixture.hpp"
#include "tests/support/wait.hpp"

namespace airlock::worker::egress {
namespace {

using namespace proxy_testing;

TEST_F(egress_proxy_test, allowed_plain_http_reaches_the_resolved_address_not_the_guest_s) {
  start();
  policy(egress_profile::allowlist, {"api.test"});
  auto socket = guest(http_upstream_.port());
  auto response = exchange(socket, "api.test");
  EXPECT_EQ(response.result_int(), 200);
  EXPECT_EQ(response.body(), "hello from api.test /hello body=");
  ASSERT_EQ(http_upstream_.requests().size(), 1u);
  auto allowed = audits("egress", "allowed");
  ASSERT_EQ(allowed.size(), 1u);
  EXPECT_EQ(allowed[0].target, "api.test:" + std::to_string(http_upstream_.port()));
  EXPECT_EQ(allowed[0].detail, "GET /hello");
  EXPECT_EQ(allowed[0].sandbox_id, "sb_test");
  EXPECT_EQ(allowed[0].tenant_id, "tn_test");
  EXPECT_EQ(proxy_->stats().allowed_requests, 1u);
  EXPECT_EQ(proxy_->stats().connections, 1u);
}

TEST_F(egress_proxy_test, the_audit_detail_leaves_out_the_query_string) {
  start();
  policy(egress_profile::open);
  auto socket = guest(http_upstream_.port());
  auto response = exchange(socket, "api.test", "/search?token=hunter2");
  EXPECT_EQ(response.result_int(), 200);
  for (auto& record : audit_->records())
    EXPECT_EQ(record.detail.find("hunter2"), std::string::npos);
  EXPECT_EQ(audits("egress", "allowed").at(0).detail, "GET /search");
}

TEST_F(egress_proxy_test, https_is_terminated_and_gets_the_credential_the_guest_never_sees) {
  start();
  policy(egress_profile::allowlist, {"api.test"});
  credentials_->set(credential_source::grants{api_grant()});
  auto context = guest_tls(pki_.proxy_root.cert_pem);
  beast::error_code ec;
  auto stream = tls_guest(https_upstream_.port(), "api.test", *context, ec);
  ASSERT_FALSE(ec) << ec.message();
  auto response = exchange(*stream, "api.test", "/v1/models", {{"X-Api-Key", "guest-made-up"}});
  EXPECT_EQ(response.result_int(), 200);
  auto seen = https_upstream_.requests();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].headers["x-api-key"], secret_value);
  std::ostringstream guest_view;
  guest_view << response;
  EXPECT_EQ(guest_view.str().find(secret_value), std::string::npos);
  auto used = audits("credential", "allowed");
  ASSERT_EQ(used.size(), 1u);
  EXPECT_EQ(used[0].detail, "api-key");
  for (auto& record : audit_->records()) {
    EXPECT_EQ(record.reason.find(secret_value), std::string::npos);
    EXPECT_EQ(record.detail.find(secret_value), std::string::npos);
    EXPECT_EQ(record.target.find(secret_value), std::string::npos);
  }
  auto stats = proxy_->stats();
  EXPECT_EQ(stats.credential_uses, 1u);
  EXPECT_EQ(stats.tls_terminated, 1u);
  EXPECT_EQ(stats.allowed_requests, 1u);
}

TEST_F(egress_proxy_test, a_host_that_differs_from_the_sni_is_refused_421) {
  start();
  policy(egress_profile::allowlist, {"api.test", "other.test"});
  auto context = guest_tls(pki_.proxy_root.cert_pem);
  beast::error_code ec;
  auto stream = tls_guest(https_upstream_.port(), "api.test", *context, ec);
  ASSERT_FALSE(ec) << ec.message();
  auto response = exchange(*stream, "other.test");
  EXPECT_EQ(response.result_int(), 421);
  EXPECT_NE(response.body().find("Host does not match SNI"), std::string::npos);
  EXPECT_TRUE(has_denial("Host does not match SNI"));
  EXPECT_TRUE(https_upstream_.requests().empty());
}

TEST_F(egress_proxy_test, a_disallowed_sni_with_an_allowed_host_gets_no_certificate) {
  start();
  policy(egress_profile::allowlist, {"api.test"});
  auto context = guest_tls(pki_.proxy_root.cert_pem);
  beast::error_code ec;
  auto stream = tls_guest(https_upstream_.port(), "other.test", *context, ec);
  EXPECT_TRUE(ec);
  EXPECT_TRUE(wait_for_audit([](const schema::audit_record& r) {
    return r.decision == "denied" && r.target.starts_with("other.test:");
  }));
  EXPECT_EQ(https_upstream_.connections(), 0);
}

TEST_F(egress_proxy_test, tls_without_sni_is_closed_without_a_certificate) {
  start();
  policy(egress_profile::open);
  auto context = guest_tls(pki_.proxy_root.cert_pem);
  beast::error_code ec;
  auto stream = tls_guest(https_upstream_.port(), "", *context, ec);
  EXPECT_TRUE(ec);
  EXPECT_TRUE(has_denial("without a server name"));
  EXPECT_EQ(https_upstream_.connections(), 0);
}

TEST_F(egress_proxy_test, an_ip_address_as_sni_is_refused) {
  start();
  policy(egress_profile::open);
  auto context = std::make_unique<net::ssl::context>(net::ssl::context::tls_client);
  auto stream =
    std::make_unique<net::ssl::stream<tcp::socket>>(guest(https_upstream_.port()), *context);
  SSL_set_tlsext_host_name(stream->native_handle(), "127.0.0.1");
  beast::error_code ec;
  stream->handshake(net::ssl::stream_base::client, ec);
  EXPECT_TRUE(ec);
  EXPECT_TRUE(has_denial("IP address"));
}

TEST_F(egress_proxy_test, connect_requests_are_refused) {
  start();
  policy(egress_profile::open);
  auto socket = guest(http_upstream_.port());
  auto reply = raw_exchange(socket, "CONNECT api.test:443 HTTP/1.1\r\nHost: api.test:443\r\n\r\n");
  EXPECT_TRUE(reply.starts_with("HTTP/1.1 403")) << reply;
  EXPECT_NE(reply.find("proxy requests are refused"), std::string::npos);
  EXPECT_TRUE(has_denial("CONNECT"));
}

TEST_F(egress_proxy_test, absolute_uri_requests_are_refused) {
  start();
  policy(egress_profile::open);
  auto socket = guest(http_upstream_.port());
  auto reply = raw_exchange(socket, "GET http://api.test/ HTTP/1.1\r\nHost: api.test\r\n\r\n");
  EXPECT_TRUE(reply.starts_with("HTTP/1.1 403")) << reply;
  EXPECT_NE(reply.find("proxy requests are refused"), std::string::npos);
  EXPECT_TRUE(http_upstream_.requests().empty());
}

TEST_F(egress_proxy_test, profile_none_lets_nothing_out) {
  start();
  policy(egress_profile::none);
  auto socket = guest(http_upstream_.port());
  auto response = exchange(socket, "api.test");
  EXPECT_EQ(response.result_int(), 403);
  EXPECT_TRUE(response.body().starts_with("airlock egress denied: "));
  EXPECT_FALSE(response.keep_alive());
  EXPECT_TRUE(has_denial("none"));
  EXPECT_TRUE(http_upstream_.requests().empty());
}

TEST_F(egress_proxy_test, a_host_outside_the_allowlist_is_refused) {
  start();
  policy(egress_profile::allowlist, {"api.test"});
  auto socket = guest(http_upstream_.port());
  auto response = exchange(socket, "other.test");
  EXPECT_EQ(response.result_int(), 403);
  EXPECT_TRUE(wait_for_audit([](const schema::audit_record& r) {
    return r.decision == "denied" && r.target.starts_with("other.test:");
  }));
  EXPECT_TRUE(http_upstream_.requests().empty());
  EXPECT_GE(proxy_->stats().denied, 1u);
}

TEST_F(egress_proxy_test, a_name_resolving_to_private_or_metadata_addresses_is_refused) {
  start();
  policy(egress_profile::allowlist, {"private.test", "metadata.test"});
  for (std::string name : {"private.test", "metadata.test"}) {
    auto socket = guest(http_upstream_.port());
    auto response = exchange(socket, name);
    EXPECT_EQ(response.result_int(), 403) << name;
    EXPECT_NE(response.body().find("resolves only to private"), std::string::npos)
      << response.body();
  }
  EXPECT_TRUE(has_denial("169.254.169.254"));
}

TEST_F(egress_proxy_test, past_the_credential_rate_limit_the_guest_gets_429) {
  start();
  policy(egress_profile::allowlist, {"api.test"});
  credentials_->set(credential_source::grants{api_grant(1)});
  auto first = guest(http_upstream_.port());
  EXPECT_EQ(exchange(first, "api.test").result_int(), 200);
  auto second = guest(http_upstream_.port());
  auto response = exchange(second, "api.test");
  EXPECT_EQ(response.result_int(), 429);
  EXPECT_NE(response.body().find("credential api-key rate limit"), std::string::npos);
  auto refused = audits("credential", "denied");
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_EQ(refused[0].detail, "api-key");
  EXPECT_EQ(http_upstream_.requests().size(), 1u);
  EXPECT_EQ(proxy_->stats().rate_limited, 1u);
  EXPECT_EQ(credentials_->fetches, 1); // the second connection used the cache
}

TEST_F(egress_proxy_test, a_failed_credential_fetch_is_audited_and_the_request_goes_without) {
  start();
  policy(egress_profile::allowlist, {"api.test"});
  credentials_->set(make_status(errc::unavailable, "control plane unreachable"));
  auto socket = guest(http_upstream_.port());
  EXPECT_EQ(exchange(socket, "api.test").result_int(), 200);
  EXPECT_EQ(http_upstream_.requests().at(0).headers.count("x-api-key"), 0u);
  auto failures = audits("credential", "denied");
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_NE(failures[0].reason.find("control plane unreachable"), std::string::npos);
}

TEST_F(egress_proxy_test, keep_alive_carries_two_requests_over_one_upstream_connection) {
  start();
  policy(egress_profile::allowlist, {"api.test"});
  auto context = guest_tls(pki_.proxy_root.cert_pem);
  beast::error_code ec;
  auto stream = tls_guest(https_upstream_.port(), "api.test", *context, ec);
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(exchange(*stream, "api.test", "/one").body(), "hello from api.test /one body=");
  EXPECT_EQ(exchange(*stream, "api.test", "/two").body(), "hello from api.test /two body=");
  EXPECT_EQ(https_upstream_.requests().size(), 2u);
  EXPECT_EQ(https_upstream_.connections(), 1);
  EXPECT_EQ(proxy_->stats().connections, 1u);
}

TEST_F(egress_proxy_test, a_request_body_is_streamed_upstream) {
  start();
  policy(egress_profile::open);
  auto socket = guest(http_upstream_.port());
  std::string body(200000, 'b');
  http::request<http::string_body> request{http::verb::post, "/upload", 11};
  request.set(http::field::host, "api.test");
  request.body() = body;
  request.prepare_payload();
  http::write(socket, request);
  beast::flat_buffer buffer;
  http::response<http::string_body> response;
  http::read(socket, buffer, response);
  EXPECT_EQ(response.result_int(), 200);
  EXPECT_EQ(http_upstream_.requests().at(0).body.size(), body.size());
}

TEST_F(egress_proxy_test, a_websocket_upgrade_becomes_a_tunnel_both_ways) {
  start();
  policy(egress_profile::allowlist, {"api.test"});
  beast::websocket::stream<tcp::socket> ws{guest(http_upstream_.port())};
  ws.handshake("api.test", "/ws");
  ws.write(net::buffer(std::string{"ping through the egress proxy"}));
  beast::flat_buffer message;
  ws.read(message);
  EXPECT_EQ(beast::buffers_to_string(message.data()), "ping through the egress proxy");
  ws.write(net::buffer(std::string{"second"}));
  message.clear();
  ws.read(message);
  EXPECT_EQ(beast::buffers_to_string(message.data()), "second");
  ws.close(beast::websocket::close_code::normal);
  EXPECT_EQ(proxy_->stats().upgrades, 1u);
  auto tunnels = audits("egress", "tunnel");
  ASSERT_EQ(tunnels.size(), 1u);
  EXPECT_EQ(tunnels[0].target, "api.test:" + std::to_string(http_upstream_.port()));
  EXPECT_NE(tunnels[0].reason.find("websocket"), std::string::npos) << tunnels[0].reason;
}

TEST_F(egress_proxy_test, a_passthrough_rule_relays_tls_untouched) {
  start();
  policy(egress_profile::allowlist, {"passthrough:api.test"});
  // The guest sees the upstream's own certificate, so it must trust the upstream root.
  auto context = guest_tls(pki_.upstream_root.cert_pem);
  beast::error_code ec;
  auto stream = tls_guest(https_upstream_.port(), "api.test", *context, ec);
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(exchange(*stream, "api.test").result_int(), 200);
  EXPECT_EQ(proxy_->stats().passthrough, 1u);
  EXPECT_EQ(proxy_->stats().tls_terminated, 0u);
  EXPECT_TRUE(wait_for_audit([](const schema::audit_record& r) {
    return r.kind == "egress" && r.decision == "tunnel"
           && r.reason.find("pass-through") != std::string::npos
           && r.target.starts_with("api.test:");
  }));
}

TEST_F(egress_proxy_test, a_header_over_the_limit_is_answered_431) {
  start();
  policy(egress_profile::open);
  auto socket = guest(http_upstream_.port());
  std::string request =
    "GET / HTTP/1.1\r\nHost: api.test\r\nX-Big: " + std::string(70000, 'h') + "\r\n\r\n";
  auto reply = raw_exchange(socket, request);
  EXPECT_TRUE(reply.starts_with("HTTP/1.1 431")) << reply.substr(0, 100);
  EXPECT_TRUE(has_denial("request header larger than"));
  EXPECT_TRUE(http_upstream_.requests().empty());
}

TEST_F(egress_proxy_test, other_protocols_are_refused) {
  start();
  policy(egress_profile::open);
  auto socket = guest(2222);
  auto reply = raw_exchange(socket, "SSH-2.0-OpenSSH_9.6\r\n");
  EXPECT_TRUE(reply.empty());
  EXPECT_TRUE(has_denial("unsupported protocol"));
}

TEST_F(egress_proxy_test, connections_from_unknown_addresses_are_closed) {
  start();
  policy(egress_profile::open);
  auto socket = guest(http_upstream_.port(), "127.0.0.2");
  auto reply = raw_exchange(socket, "GET / HTTP/1.1\r\nHost: api.test\r\n\r\n");
  EXPECT_TRUE(reply.empty());
  airlock::test::wait_for([&] { return proxy_->stats().unknown_peers != 0; });
  EXPECT_EQ(proxy_->stats().unknown_peers, 1u);
  EXPECT_TRUE(http_upstream_.requests().empty());
}

TEST_F(egress_proxy_test, connections_past_the_per_sandbox_limit_are_closed_and_audited) {
  auto o = options();
  o.connection.connections_per_sandbox_max = 2;
  start(std::move(o));
  policy(egress_profile::open);
  auto first = guest(http_upstream_.port());
  auto second = guest(http_upstream_.port());
  airlock::test::wait_for([&] { return proxy_->stats().active_connections >= 2; });
  ASSERT_EQ(proxy_->stats().active_connections, 2u);
  auto third = guest(http_upstream_.port());
  EXPECT_TRUE(raw_exchange(third, "GET / HTTP/1.1\r\nHost: api.test\r\n\r\n").empty());
  EXPECT_TRUE(has_denial("too many open connections"));
  // The first two still work.
  EXPECT_EQ(exchange(first, "api.test").result_int(), 200);
}

TEST_F(egress_proxy_test, tls_is_refused_until_the_egress_ca_is_issued) {
  start(options(), false);
  policy(egress_profile::open);
  auto context = guest_tls(pki_.proxy_root.cert_pem);
  beast::error_code ec;
  auto stream = tls_guest(https_upstream_.port(), "api.test", *context, ec);
  EXPECT_TRUE(ec);
  EXPECT_TRUE(has_denial("egress CA not yet issued"));
}

TEST_F(egress_proxy_test, an_upstream_that_refuses_connections_gives_502) {
  start();
  policy(egress_profile::open);
  uint16_t closed_port = 0;
  {
    tcp::acceptor probe{io_, tcp::endpoint{net::ip::make_address_v4("127.0.0.1"), 0}};
    closed_port = probe.local_endpoint().port();
  }
  auto socket = guest(closed_port);
  auto response = exchange(socket, "api.test");
  EXPECT_EQ(response.result_int(), 502);
  EXPECT_NE(response.body().find("upstream failed"), std::string::npos);
  EXPECT_EQ(proxy_->stats().upstream_failures, 1u);
  EXPECT_TRUE(has_denial("upstream failed"));
}

TEST_F(egress_proxy_test, an_upstream_certificate_for_another_name_gives_502) {
  start();
  policy(egress_profile::open);
  auto context = guest_tls(pki_.proxy_root.cert_pem);
  beast::error_code ec;
  // wrong.test resolves to the HTTPS upstream, whose certificate names api.test.
  auto stream = tls_guest(https_upstream_.port(), "wrong.test", *context, ec);
  ASSERT_FALSE(ec) << ec.message();
  auto response = exchange(*stream, "wrong.test");
  EXPECT_EQ(response.result_int(), 502);
  EXPECT_NE(response.body().find("TLS handshake"), std::string::npos) << response.body();
  EXPECT_TRUE(https_upstream_.requests().empty());
}

TEST_F(egress_proxy_test, a_policy_change_applies_to_new_connections) {
  start();
  policy(egress_profile::open);
  auto socket = guest(http_upstream_.port());
  EXPECT_EQ(exchange(socket, "api.test").result_int(), 200);
  policy(egress_profile::none);
  auto later = guest(http_upstream_.port());
  EXPECT_EQ(exchange(later, "api.test").result_int(), 403);
  proxy_->detach("127.0.0.1");
  auto after_detach = guest(http_upstream_.port());
  EXPECT_TRUE(raw_exchange(after_detach, "GET / HTTP/1.1\r\nHost: api.test\r\n\r\n").empty());
}

// Bodies much larger than relay_chunk_bytes (16 KiB by default) go through
// the proxy's plain copy loop; chunked ones through Beast's parser.
TEST_F(egress_proxy_test, a_body_larger_than_the_relay_buffer_arrives_byte_exact_through_tls) {
  start();
  policy(egress_profile::allowlist, {"api.test"});
  auto context = guest_tls(pki_.proxy_root.cert_pem);
  beast::error_code ec;
  auto stream = tls_guest(https_upstream_.port(), "api.test", *context, ec);
  ASSERT_FALSE(ec) << ec.message();
  constexpr std::size_t size = 8u << 20;
  auto response = fetch(*stream, "/bytes/" + std::to_string(size), ec);
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(response.result_int(), 200);
  EXPECT_EQ(response[http::field::content_length], std::to_string(size));
  ASSERT_EQ(response.body().size(), size);
  EXPECT_TRUE(response.body() == pattern_bytes(size)); // not EXPECT_EQ: it would print 8 MiB
  // The connection carries on after the copy (framing and timeouts intact).
  EXPECT_EQ(exchange(*stream, "api.test", "/after").body(), "hello from api.test /after body=");
  EXPECT_EQ(https_upstream_.connections(), 1);
}

TEST_F(egress_proxy_test, a_large_request_body_reaches_the_upstream_byte_exact_through_tls) {
  start();
  policy(egress_profile::allowlist, {"api.test"});
  auto context = guest_tls(pki_.proxy_root.cert_pem);
  beast::error_code ec;
  auto stream = tls_guest(https_upstream_.port(), "api.test", *context, ec);
  ASSERT_FALSE(ec) << ec.message();
  const std::string body = pattern_bytes(1000000); // under the test upstream's 1 MiB request limit
  http::request<http::string_body> request{http::verb::post, "/upload", 11};
  request.set(http::field::host, "api.test");
  request.body() = body;
  request.prepare_payload();
  http::write(*stream, request);
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(std::numeric_limits<std::uint64_t>::max());
  http::read(*stream, buffer, parser, ec);
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(parser.get().result_int(), 200);
  auto seen = https_upstream_.requests();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].headers["content-length"], std::to_string(body.size()));
  EXPECT_TRUE(seen[0].body == body);
}

TEST_F(egress_proxy_test, a_chunked_response_is_relayed_intact_and_the_connection_stays_open) {
  start();
  policy(egress_profile::allowlist, {"api.test"});
  auto context = guest_tls(pki_.proxy_root.cert_pem);
  beast::error_code ec;
  auto stream = tls_guest(https_upstream_.port(), "api.test", *context, ec);
  ASSERT_FALSE(ec) << ec.message();
  constexpr std::size_t size = 2000000;
  auto response = fetch(*stream, "/chunked/" + std::to_string(size), ec);
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_TRUE(response.chunked());
  ASSERT_EQ(response.body().size(), size);
  EXPECT_TRUE(response.body() == pattern_bytes(size));
  EXPECT_EQ(exchange(*stream, "api.test", "/after").body(), "hello from api.test /after body=");
  EXPECT_EQ(https_upstream_.connections(), 1);
}

TEST_F(egress_proxy_test, a_body_ending_with_the_upstream_connection_reaches_a_tls_guest_whole) {
  start();
  policy(egress_profile::allowlist, {"api.test"});
  auto context = guest_tls(pki_.proxy_root.cert_pem);
  beast::error_code ec;
  auto stream = tls_guest(https_upstream_.port(), "api.test", *context, ec);
  ASSERT_FALSE(ec) << ec.message();
  constexpr std::size_t size = 300000;
  auto response = fetch(*stream, "/until-close/" + std::to_string(size), ec);
  // Without the proxy's close_notify the guest could not tell the end from a
  // cut (stream_truncated), or would wait for an end that never comes.
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(response.count(http::field::content_length), 0u);
  ASSERT_EQ(response.body().size(), size);
  EXPECT_TRUE(response.body() == pattern_bytes(size));
}

TEST_F(egress_proxy_test, a_body_that_stalls_is_cut_off_after_the_idle_timeout) {
  auto o = options();
  o.connection.idle_timeout_ms = 300;
  start(std::move(o));
  policy(egress_profile::open);
  auto socket = guest(http_upstream_.port()); // reads time out after 10 s (SO_RCVTIMEO)
  auto started = std::chrono::steady_clock::now();
  beast::error_code ec;
  auto response = fetch(socket, "/stall/1000000", ec);
  auto waited = std::chrono::steady_clock::now() - started;
  EXPECT_TRUE(ec); // the body never completed: the proxy closed the connection
  EXPECT_LT(response.body().size(), 1000000u);
  EXPECT_LT(waited, std::chrono::seconds(5));
}

} // namespace
} // namespace airlock::worker::egress
