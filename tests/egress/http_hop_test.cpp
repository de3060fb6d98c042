// What the egress proxy changes in a request before it leaves, and how it
// checks a 101: hop-by-hop fields (RFC 9110 section 7.6.1), protocol
// switches other than a well-formed WebSocket, and the WebSocket accept.

#include "worker/egress/http_hop.hpp"

#include <gtest/gtest.h>

namespace airlock::worker::egress {
namespace {

using field_list = std::vector<std::pair<std::string, std::string>>;

http::request_header<> request(http::verb verb, const field_list& fields, unsigned version = 11) {
  http::request_header<> req;
  req.method(verb);
  req.target("/");
  req.version(version);
  for (const auto& [name, value] : fields)
    req.insert(name, value);
  return req;
}

std::string field(const http::request_header<>& req, const std::string& name) {
  auto it = req.find(name);
  return it == req.end() ? "<absent>" : std::string{it->value()};
}

const field_list h2c_upgrade = {{"Host", "cdn.wild.test"},
                                {"Connection", "Upgrade, HTTP2-Settings"},
                                {"Upgrade", "h2c"},
                                {"HTTP2-Settings", "AAMAAABkAAQAAP__"}};

TEST(http_hop, an_h2c_upgrade_is_stripped_and_named_as_refused) {
  auto req = request(http::verb::get, h2c_upgrade);
  protocol_switch asked;
  EXPECT_EQ(prepare_upstream_request(req, "cdn.wild.test", asked), std::nullopt);
  EXPECT_FALSE(asked.websocket);
  EXPECT_EQ(asked.refused, "h2c");
  EXPECT_EQ(field(req, "Upgrade"), "<absent>");
  EXPECT_EQ(field(req, "HTTP2-Settings"), "<absent>");
  EXPECT_EQ(field(req, "Connection"), "<absent>") << "HTTP/1.1 keeps alive without saying so";
  EXPECT_EQ(field(req, "Host"), "cdn.wild.test");
}

TEST(http_hop, http2_settings_goes_even_when_connection_does_not_name_it) {
  auto req = request(http::verb::get, {{"Host", "a.test"}, {"HTTP2-Settings", "AAMAAABkAAQAAP__"}});
  protocol_switch asked;
  EXPECT_EQ(prepare_upstream_request(req, "a.test", asked), std::nullopt);
  EXPECT_EQ(field(req, "HTTP2-Settings"), "<absent>");
  EXPECT_TRUE(asked.refused.empty());
}

const field_list websocket = {{"Host", "api.test"},
                              {"Connection", "keep-alive, Upgrade"},
                              {"Upgrade", "websocket"},
                              {"Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="},
                              {"Sec-WebSocket-Version", "13"}};

TEST(http_hop, a_well_formed_websocket_upgrade_is_forwarded) {
  auto req = request(http::verb::get, websocket);
  protocol_switch asked;
  EXPECT_EQ(prepare_upstream_request(req, "api.test", asked), std::nullopt);
  EXPECT_TRUE(asked.websocket);
  EXPECT_TRUE(asked.refused.empty());
  EXPECT_EQ(asked.websocket_key, "dGhlIHNhbXBsZSBub25jZQ==");
  EXPECT_EQ(field(req, "Upgrade"), "websocket");
  EXPECT_EQ(field(req, "Connection"), "Upgrade");
  EXPECT_EQ(field(req, "Sec-WebSocket-Version"), "13");
}

TEST(http_hop, a_websocket_upgrade_missing_a_part_or_not_a_get_is_stripped) {
  for (const char* missing : {"Sec-WebSocket-Key", "Sec-WebSocket-Version", "Connection"}) {
    field_list fields;
    for (const auto& f : websocket)
      if (f.first != missing)
        fields.push_back(f);
    auto req = request(http::verb::get, fields);
    protocol_switch asked;
    EXPECT_EQ(prepare_upstream_request(req, "api.test", asked), std::nullopt);
    EXPECT_FALSE(asked.websocket) << missing;
    EXPECT_EQ(asked.refused, "websocket") << missing;
    EXPECT_EQ(field(req, "Upgrade"), "<absent>") << missing;
  }
  auto post = request(http::verb::post, websocket);
  protocol_switch asked;
  EXPECT_EQ(prepare_upstream_request(post, "api.test", asked), std::nullopt);
  EXPECT_FALSE(asked.websocket);
  EXPECT_EQ(field(post, "Upgrade"), "<absent>");
}

TEST(http_hop, an_upgrade_offering_websocket_beside_another_protocol_is_stripped) {
  field_list fields = websocket;
  fields[2].second = "websocket, h2c";
  auto req = request(http::verb::get, fields);
  protocol_switch asked;
  EXPECT_EQ(prepare_upstream_request(req, "api.test", asked), std::nullopt);
  EXPECT_FALSE(asked.websocket);
  EXPECT_EQ(asked.refused, "websocket, h2c");
  EXPECT_EQ(field(req, "Upgrade"), "<absent>");
}

TEST(http_hop, fields_named_in_connection_and_hop_by_hop_fields_are_removed) {
  auto req = request(http::verb::get, {{"Host", "api.test"},
                                       {"Connection", "X-Hop, close"},
                                       {"X-Hop", "secret routing hint"},
                                       {"Keep-Alive", "timeout=5"},
                                       {"Proxy-Connection", "keep-alive"},
                                       {"Proxy-Authorization", "Basic Z3Vlc3Q="},
                                       {"X-End-To-End", "kept"}});
  protocol_switch asked;
  EXPECT_EQ(prepare_upstream_request(req, "api.test", asked), std::nullopt);
  EXPECT_EQ(field(req, "X-Hop"), "<absent>");
  EXPECT_EQ(field(req, "Keep-Alive"), "<absent>");
  EXPECT_EQ(field(req, "Proxy-Connection"), "<absent>");
  EXPECT_EQ(field(req, "Proxy-Authorization"), "<absent>");
  EXPECT_EQ(field(req, "X-End-To-End"), "kept");
  EXPECT_EQ(field(req, "Connection"), "close") << "the guest's close still reaches the upstream";
}

TEST(http_hop, te_is_forwarded_only_as_trailers) {
  auto mixed = request(http::verb::get, {{"Host", "a.test"}, {"TE", "trailers, deflate;q=0.5"}});
  protocol_switch asked;
  EXPECT_EQ(prepare_upstream_request(mixed, "a.test", asked), std::nullopt);
  EXPECT_EQ(field(mixed, "TE"), "trailers");
  EXPECT_EQ(field(mixed, "Connection"), "TE");
  auto other = request(http::verb::get, {{"Host", "a.test"}, {"TE", "gzip"}});
  EXPECT_EQ(prepare_upstream_request(other, "a.test", asked), std::nullopt);
  EXPECT_EQ(field(other, "TE"), "<absent>");
  EXPECT_EQ(field(other, "Connection"), "<absent>");
}

TEST(http_hop, connection_naming_a_framing_or_routing_field_is_refused) {
  for (const char* name : {"Content-Length", "Host", "transfer-encoding"}) {
    auto req = request(http::verb::post,
                       {{"Host", "a.test"}, {"Connection", name}, {"Content-Length", "5"}});
    protocol_switch asked;
    auto refused = prepare_upstream_request(req, "a.test", asked);
    ASSERT_TRUE(refused.has_value()) << name;
    EXPECT_NE(refused->find("framing or routing"), std::string::npos) << *refused;
  }
}

TEST(http_hop, host_is_the_judged_name_and_claims_of_another_host_are_removed) {
  auto req = request(http::verb::get, {{"Host", "API.Test."},
                                       {"Forwarded", "host=evil.test"},
                                       {"X-Forwarded-Host", "evil.test"},
                                       {"X-Original-URL", "/admin"},
                                       {"X-Rewrite-URL", "/admin"},
                                       {"X-Host", "evil.test"}});
  protocol_switch asked;
  EXPECT_EQ(prepare_upstream_request(req, "api.test:8080", asked), std::nullopt);
  EXPECT_EQ(field(req, "Host"), "api.test:8080");
  for (const char* name :
       {"Forwarded", "X-Forwarded-Host", "X-Original-URL", "X-Rewrite-URL", "X-Host"})
    EXPECT_EQ(field(req, name), "<absent>") << name;
}

TEST(http_hop, an_http_1_0_keep_alive_is_said_to_the_upstream) {
  auto req = request(http::verb::get, {{"Host", "a.test"}, {"Connection", "keep-alive"}}, 10);
  protocol_switch asked;
  EXPECT_EQ(prepare_upstream_request(req, "a.test", asked), std::nullopt);
  EXPECT_EQ(field(req, "Connection"), "keep-alive");
  auto closing = request(http::verb::get, {{"Host", "a.test"}}, 10);
  EXPECT_EQ(prepare_upstream_request(closing, "a.test", asked), std::nullopt);
  EXPECT_EQ(field(closing, "Connection"), "close");
}

TEST(http_hop, the_websocket_accept_is_the_rfc_6455_example) {
  EXPECT_EQ(websocket_accept("dGhlIHNhbXBsZSBub25jZQ=="), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
}

http::response_header<> switching(const field_list& fields) {
  http::response_header<> res;
  res.result(http::status::switching_protocols);
  for (const auto& [name, value] : fields)
    res.insert(name, value);
  return res;
}

TEST(http_hop, only_a_101_that_answers_the_websocket_asked_for_is_accepted) {
  protocol_switch asked;
  asked.websocket = true;
  asked.websocket_key = "dGhlIHNhbXBsZSBub25jZQ==";
  const field_list good = {{"Upgrade", "websocket"},
                           {"Connection", "Upgrade"},
                           {"Sec-WebSocket-Accept", "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="}};
  EXPECT_TRUE(answers_websocket(switching(good), asked));
  field_list wrong_accept = good;
  wrong_accept[2].second = "AAAAAAAAAAAAAAAAAAAAAAAAAAA=";
  EXPECT_FALSE(answers_websocket(switching(wrong_accept), asked));
  field_list h2c = good;
  h2c[0].second = "h2c";
  EXPECT_FALSE(answers_websocket(switching(h2c), asked));
  EXPECT_EQ(switched_protocol(switching(h2c)), "h2c");
  field_list no_connection = {good[0], good[2]};
  EXPECT_FALSE(answers_websocket(switching(no_connection), asked));
  protocol_switch nothing_asked;
  EXPECT_FALSE(answers_websocket(switching(good), nothing_asked));
  EXPECT_EQ(switched_protocol(switching({})), "none");
}

} // namespace
} // namespace airlock::worker::egress
