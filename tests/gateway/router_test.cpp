// The route table without a socket: pattern matching and precedence, 404 and
// 405, percent-decoding of path parameters and query strings.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "gateway/exchange.hpp"
#include "gateway/router.hpp"
#include "tests/gateway/recording_transport.hpp"

namespace airlock::gateway {
namespace {

void ignore(std::shared_ptr<exchange>) {}

http_request get(std::string target, http::verb method = http::verb::get) {
  return http_request{method, target, 11};
}

TEST(route_table, matches_a_pattern_and_decodes_its_parameters) {
  route_table routes;
  routes.add_async(http::verb::get, "/v1/sandboxes/{id}/processes/{pid}", ignore);
  auto found = routes.match(http::verb::get, "/v1/sandboxes/sb_1/processes/proc%2F2");
  ASSERT_EQ(found.result, route_match::outcome::found);
  EXPECT_EQ(found.route->pattern, "/v1/sandboxes/{id}/processes/{pid}");
  ASSERT_EQ(found.params.size(), 2u);
  EXPECT_EQ(found.params[0], (std::pair<std::string, std::string>{"id", "sb_1"}));
  EXPECT_EQ(found.params[1], (std::pair<std::string, std::string>{"pid", "proc/2"}));
}

TEST(route_table, a_parameter_takes_exactly_one_non_empty_segment) {
  route_table routes;
  routes.add_async(http::verb::get, "/v1/sandboxes/{id}", ignore);
  EXPECT_EQ(routes.match(http::verb::get, "/v1/sandboxes/a/b").result,
            route_match::outcome::not_found);
  EXPECT_EQ(routes.match(http::verb::get, "/v1/sandboxes/").result,
            route_match::outcome::not_found);
  EXPECT_EQ(routes.match(http::verb::get, "/v1/sandboxes").result, route_match::outcome::not_found);
}

TEST(route_table, exact_segments_win_over_parameters_in_any_registration_order) {
  route_table routes;
  routes.add_async(http::verb::get, "/v1/sandboxes/{id}/files", ignore);
  routes.add_async(http::verb::get, "/v1/sandboxes/{id}/{what}", ignore);
  routes.add_async(http::verb::get, "/v1/{kind}/x/files", ignore);
  routes.add_async(http::verb::get, "/v1/sandboxes/list", ignore);
  routes.add_async(http::verb::get, "/v1/sandboxes/{id}", ignore);

  EXPECT_EQ(routes.match(http::verb::get, "/v1/sandboxes/list").route->pattern,
            "/v1/sandboxes/list");
  EXPECT_EQ(routes.match(http::verb::get, "/v1/sandboxes/sb_1").route->pattern,
            "/v1/sandboxes/{id}");
  EXPECT_EQ(routes.match(http::verb::get, "/v1/sandboxes/sb_1/files").route->pattern,
            "/v1/sandboxes/{id}/files");
  EXPECT_EQ(routes.match(http::verb::get, "/v1/sandboxes/sb_1/stat").route->pattern,
            "/v1/sandboxes/{id}/{what}");
  // The leftmost differing segment decides: "sandboxes" (exact) beats {kind}.
  EXPECT_EQ(routes.match(http::verb::get, "/v1/sandboxes/x/files").route->pattern,
            "/v1/sandboxes/{id}/files");
  EXPECT_EQ(routes.match(http::verb::get, "/v1/other/x/files").route->pattern,
            "/v1/{kind}/x/files");
}

TEST(route_table, a_less_specific_route_with_the_method_beats_a_specific_one_without) {
  route_table routes;
  routes.add_async(http::verb::post, "/v1/sandboxes/list", ignore);
  routes.add_async(http::verb::get, "/v1/sandboxes/{id}", ignore);
  auto found = routes.match(http::verb::get, "/v1/sandboxes/list");
  ASSERT_EQ(found.result, route_match::outcome::found);
  EXPECT_EQ(found.route->pattern, "/v1/sandboxes/{id}");
  auto refused = routes.match(http::verb::delete_, "/v1/sandboxes/list");
  EXPECT_EQ(refused.result, route_match::outcome::method_not_allowed);
  EXPECT_EQ(refused.allow, "GET, POST");
}

TEST(route_table, synchronous_dispatch_answers_404_and_405_as_json) {
  route_table routes;
  routes.add(http::verb::get, "/healthz", [](const http_request&) {
    return json_response(http::status::ok, nlohmann::json{{"ok", true}});
  });
  routes.add_async(http::verb::get, "/v1/async", ignore);
  EXPECT_EQ(routes.dispatch(get("/healthz?x=1")).result(), http::status::ok);
  auto missing = routes.dispatch(get("/nope"));
  EXPECT_EQ(missing.result(), http::status::not_found);
  EXPECT_EQ(nlohmann::json::parse(missing.body())["error"]["code"], "not_found");
  auto wrong = routes.dispatch(get("/healthz", http::verb::put));
  EXPECT_EQ(wrong.result(), http::status::method_not_allowed);
  EXPECT_EQ(wrong[http::field::allow], "GET");
  EXPECT_EQ(routes.dispatch(get("/v1/async")).result(), http::status::internal_server_error);
}

TEST(route_table, lists_every_route_and_replaces_a_repeated_registration) {
  route_table routes;
  routes.add(http::verb::get, "/healthz", [](const http_request&) { return http_response{}; });
  routes.add_async(http::verb::get, "/v1/sandboxes/{id}", ignore);
  routes.add_async(http::verb::delete_, "/v1/sandboxes/{id}", ignore);
  routes.add_async(http::verb::get, "/v1/sandboxes/{id}", ignore, route_options{42});
  auto all = routes.routes();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[1], (std::pair<http::verb, std::string>{http::verb::get, "/v1/sandboxes/{id}"}));
  EXPECT_EQ(routes.match(http::verb::get, "/v1/sandboxes/x").route->options.body_bytes_max, 42u);
}

TEST(query, decodes_percent_escapes_and_plus_and_keeps_order) {
  auto params =
    parse_query("/v1/x?path=%2Ftmp%2Fa+b&metadata.team=a%3Db&flag&metadata.team=2&bad=%zz%4");
  ASSERT_EQ(params.size(), 5u);
  EXPECT_EQ(params[0], (std::pair<std::string, std::string>{"path", "/tmp/a b"}));
  EXPECT_EQ(params[1], (std::pair<std::string, std::string>{"metadata.team", "a=b"}));
  EXPECT_EQ(params[2], (std::pair<std::string, std::string>{"flag", ""}));
  EXPECT_EQ(params[3], (std::pair<std::string, std::string>{"metadata.team", "2"}));
  EXPECT_EQ(params[4], (std::pair<std::string, std::string>{"bad", "%zz%4"}));
  EXPECT_TRUE(parse_query("/v1/x").empty());
  EXPECT_EQ(percent_decode("a+b%20c", false), "a+b c");
}

TEST(exchange, exposes_parameters_and_query_and_answers_only_once) {
  auto transport = std::make_shared<test::recording_transport>();
  auto request = std::make_shared<exchange>(
    get("/v1/sandboxes/sb_1/files?path=%2Fetc%2Fhosts&x=1&x=2"), "/v1/sandboxes/{id}/files",
    std::vector<std::pair<std::string, std::string>>{{"id", "sb_1"}}, transport, 7);
  EXPECT_EQ(request->path_param("id"), "sb_1");
  EXPECT_EQ(request->path_param("pid"), "");
  EXPECT_EQ(request->query("path"), "/etc/hosts");
  EXPECT_EQ(request->query("x"), "1");
  EXPECT_EQ(request->query("missing"), std::nullopt);
  EXPECT_EQ(request->query_params().size(), 3u);
  EXPECT_EQ(request->route_pattern(), "/v1/sandboxes/{id}/files");

  request->respond(json_response(http::status::created, nlohmann::json::object()));
  request->respond(json_response(http::status::ok, nlohmann::json::object()));
  auto late = request->open_sse();
  EXPECT_EQ(transport->delivered(), 1);
  EXPECT_EQ(transport->last_sequence(), 7u);
  EXPECT_EQ(transport->last().result(), http::status::created);
  EXPECT_TRUE(late->closed());
  EXPECT_FALSE(late->send("x", "y"));
}

TEST(exchange, query_uint_reads_a_bounded_number_and_takes_empty_as_absent) {
  auto transport = std::make_shared<test::recording_transport>();
  exchange request(get("/v1/x?limit=42&empty=&big=101&word=ten&neg=-1&huge=99999999999999999999"),
                   "/v1/x", {}, transport, 1);
  auto limit = request.query_uint("limit", 100);
  ASSERT_TRUE(limit);
  EXPECT_EQ(*limit, std::optional<uint64_t>(42));
  for (const char* absent : {"missing", "empty"}) {
    auto none = request.query_uint(absent, 100);
    ASSERT_TRUE(none) << absent;
    EXPECT_EQ(*none, std::nullopt) << absent;
  }
  for (const char* bad : {"big", "word", "neg", "huge"}) {
    auto refused = request.query_uint(bad, 100);
    ASSERT_FALSE(refused) << bad;
    EXPECT_EQ(refused.error().code, errc::invalid_argument);
    EXPECT_NE(refused.error().message.find(std::string("?") + bad + "="), std::string::npos)
      << refused.error().message;
  }
}

TEST(exchange, an_answer_after_the_connection_is_gone_is_dropped) {
  auto transport = std::make_shared<test::recording_transport>();
  auto request = std::make_shared<exchange>(
    get("/x"), "/x", std::vector<std::pair<std::string, std::string>>{}, transport, 1);
  transport.reset();
  request->respond(http_response{});
  EXPECT_TRUE(request->answered());
  std::string reason;
  auto stream =
    std::make_shared<exchange>(get("/x"), "/x", std::vector<std::pair<std::string, std::string>>{},
                               std::weak_ptr<detail::exchange_transport>{}, 2)
      ->open_sse();
  stream->on_close([&reason](std::string_view why) { reason = why; });
  EXPECT_EQ(reason, "client_gone");
}

} // namespace
} // namespace airlock::gateway
