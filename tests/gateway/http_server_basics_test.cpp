// The bounded HTTP server in-process: operator routes, JSON errors, limits,
// keep-alive, connection refusal and graceful stop.

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <sstream>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "actors/log.hpp"
#include "gateway/http_server.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/host.hpp"
#include "tests/support/http_client.hpp"
#include "tests/support/wait.hpp"

namespace airlock::gateway {
namespace {

using test::http_connection;
using test::http_get;

class http_server_basics : public ::testing::Test {
protected:
  std::unique_ptr<http_server> start(http_server_options options = {}, route_table routes = {}) {
    add_operator_routes(routes, [this] {
      return ready_ ? status::ok() : make_status(errc::unavailable, "warming up");
    });
    auto server = http_server::start(options, {"127.0.0.1", 0}, std::move(routes), log_);
    EXPECT_TRUE(server.has_value()) << (server ? "" : server.error().message);
    return server ? std::move(*server) : nullptr;
  }

  static std::string get_request(const std::string& path, bool close = false) {
    return "GET " + path + " HTTP/1.1\r\nHost: t\r\n" + (close ? "Connection: close\r\n" : "")
           + "\r\n";
  }

  std::atomic<bool> ready_{true};
  std::ostringstream log_text_;
  actors::log_sink sink_{log_text_};
  actors::logger log_{"test", actors::log_level::warn, sink_};
};

TEST_F(http_server_basics, binds_port_zero_to_a_real_port) {
  auto server = start();
  ASSERT_TRUE(server);
  EXPECT_EQ(server->local_endpoint().host, "127.0.0.1");
  EXPECT_NE(server->local_endpoint().port, 0);
}

TEST_F(http_server_basics, healthz_answers_ok_json) {
  auto server = start();
  ASSERT_TRUE(server);
  auto reply = http_get("127.0.0.1", server->local_endpoint().port, "/healthz");
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 200);
  EXPECT_EQ(reply->headers["content-type"], "application/json");
  EXPECT_EQ(nlohmann::json::parse(reply->body), (nlohmann::json{{"status", "ok"}}));
}

TEST_F(http_server_basics, readyz_follows_the_readiness_check) {
  auto server = start();
  ASSERT_TRUE(server);
  uint16_t port = server->local_endpoint().port;
  ready_ = false;
  auto reply = http_get("127.0.0.1", port, "/readyz");
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 503);
  auto body = nlohmann::json::parse(reply->body);
  EXPECT_EQ(body["error"]["code"], "not_ready");
  EXPECT_EQ(body["error"]["message"], "warming up");
  ready_ = true;
  reply = http_get("127.0.0.1", port, "/readyz");
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 200);
  EXPECT_EQ(nlohmann::json::parse(reply->body), (nlohmann::json{{"status", "ready"}}));
}

TEST_F(http_server_basics, unknown_routes_get_a_json_404_and_wrong_methods_a_405) {
  auto server = start();
  ASSERT_TRUE(server);
  uint16_t port = server->local_endpoint().port;
  auto reply = http_get("127.0.0.1", port, "/x?y=1");
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 404);
  auto body = nlohmann::json::parse(reply->body);
  EXPECT_EQ(body["error"]["code"], "not_found");
  EXPECT_EQ(body["error"]["message"], "no route GET /x; see /v1/openapi.json");

  reply = http_get("127.0.0.1", port, "/healthz", "DELETE");
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 405);
  EXPECT_EQ(reply->headers["allow"], "GET");
  EXPECT_EQ(nlohmann::json::parse(reply->body)["error"]["code"], "method_not_allowed");
}

TEST_F(http_server_basics, keeps_a_connection_open_for_several_requests) {
  auto server = start();
  ASSERT_TRUE(server);
  auto conn = http_connection::open("127.0.0.1", server->local_endpoint().port);
  ASSERT_TRUE(conn);
  // Two pipelined requests, then a third after the answers.
  ASSERT_TRUE(conn->send(get_request("/healthz") + get_request("/readyz")));
  auto first = conn->read_reply();
  auto second = conn->read_reply();
  ASSERT_TRUE(first && second);
  EXPECT_EQ(first->body, "{\"status\":\"ok\"}\n");
  EXPECT_EQ(second->body, "{\"status\":\"ready\"}\n");
  ASSERT_TRUE(conn->send(get_request("/healthz", true)));
  auto third = conn->read_reply();
  ASSERT_TRUE(third);
  EXPECT_EQ(third->status, 200);
  EXPECT_TRUE(conn->wait_closed());
  EXPECT_EQ(server->stats().connections_accepted, 1u);
  EXPECT_EQ(server->stats().requests, 3u);
}

TEST_F(http_server_basics, oversized_headers_get_431_and_oversized_bodies_413) {
  http_server_options options;
  options.header_bytes_max = 1024;
  options.body_bytes_max = 100;
  auto server = start(options);
  ASSERT_TRUE(server);
  uint16_t port = server->local_endpoint().port;

  auto conn = http_connection::open("127.0.0.1", port);
  ASSERT_TRUE(conn);
  ASSERT_TRUE(conn->send("GET /healthz HTTP/1.1\r\nHost: t\r\nX-Big: " + std::string(2000, 'a')
                         + "\r\n\r\n"));
  auto reply = conn->read_reply();
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 431);
  EXPECT_EQ(nlohmann::json::parse(reply->body)["error"]["code"], "headers_too_large");
  EXPECT_TRUE(conn->wait_closed());

  auto post = http_connection::open("127.0.0.1", port);
  ASSERT_TRUE(post);
  ASSERT_TRUE(post->send("POST /healthz HTTP/1.1\r\nHost: t\r\nContent-Length: 500\r\n\r\n"
                         + std::string(500, 'b')));
  reply = post->read_reply();
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 413);
  EXPECT_EQ(nlohmann::json::parse(reply->body)["error"]["code"], "too_large");
  EXPECT_EQ(server->stats().requests_rejected, 2u);
}

TEST_F(http_server_basics, malformed_requests_get_a_json_400) {
  auto server = start();
  ASSERT_TRUE(server);
  auto conn = http_connection::open("127.0.0.1", server->local_endpoint().port);
  ASSERT_TRUE(conn);
  ASSERT_TRUE(conn->send("NOT HTTP AT ALL\r\n\r\n"));
  auto reply = conn->read_reply();
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 400);
  EXPECT_EQ(nlohmann::json::parse(reply->body)["error"]["code"], "bad_request");
}

TEST_F(http_server_basics, refuses_connections_over_the_limit_with_503) {
  http_server_options options;
  options.connections_max = 1;
  auto server = start(options);
  ASSERT_TRUE(server);
  uint16_t port = server->local_endpoint().port;
  auto held = http_connection::open("127.0.0.1", port);
  ASSERT_TRUE(held);
  // A request on the first connection proves the server registered it.
  ASSERT_TRUE(held->send(get_request("/healthz")));
  ASSERT_TRUE(held->read_reply());

  auto extra = http_get("127.0.0.1", port, "/healthz");
  ASSERT_TRUE(extra);
  EXPECT_EQ(extra->status, 503);
  EXPECT_EQ(extra->headers["connection"], "close");
  EXPECT_EQ(nlohmann::json::parse(extra->body)["error"]["code"], "unavailable");
  EXPECT_EQ(server->stats().connections_refused, 1u);
  EXPECT_EQ(server->stats().connections_open, 1u);
}

TEST_F(http_server_basics, closes_connections_that_stay_idle) {
  http_server_options options;
  options.idle_timeout_ms = 100;
  auto server = start(options);
  ASSERT_TRUE(server);
  auto conn = http_connection::open("127.0.0.1", server->local_endpoint().port);
  ASSERT_TRUE(conn);
  EXPECT_TRUE(conn->wait_closed());
}

TEST_F(http_server_basics, stop_lets_a_request_in_flight_finish) {
  std::promise<void> entered;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  route_table routes;
  // Blocking an I/O thread is what real handlers must never do; here it
  // holds one request in flight on purpose.
  routes.add(http::verb::get, "/slow", [&entered, released](const http_request&) {
    entered.set_value();
    released.wait();
    return json_response(http::status::ok, nlohmann::json{{"slow", true}});
  });
  auto server = start({}, std::move(routes));
  ASSERT_TRUE(server);
  uint16_t port = server->local_endpoint().port;
  auto conn = http_connection::open("127.0.0.1", port);
  ASSERT_TRUE(conn);
  ASSERT_TRUE(conn->send(get_request("/slow")));
  ASSERT_EQ(entered.get_future().wait_for(test::wait_max), std::future_status::ready);

  std::thread stopper([&server] { server->stop(); });
  // Once the acceptor is closed, new connections are refused by the kernel.
  test::wait_for(
    [port] { return !http_connection::open("127.0.0.1", port, test::milliseconds(100)); },
    test::wait_max, test::milliseconds(1));
  release.set_value();
  auto reply = conn->read_reply();
  conn.reset(); // the server lingers until the client closes
  stopper.join();
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 200);
  EXPECT_EQ(reply->headers["connection"], "close");
  EXPECT_EQ(server->stats().connections_open, 0u);
}

TEST_F(http_server_basics, stop_closes_idle_connections_without_waiting_for_the_deadline) {
  http_server_options options;
  options.shutdown_timeout_ms = 60'000;
  auto server = start(options);
  ASSERT_TRUE(server);
  auto conn = http_connection::open("127.0.0.1", server->local_endpoint().port);
  ASSERT_TRUE(conn);
  ASSERT_TRUE(conn->send(get_request("/healthz")));
  ASSERT_TRUE(conn->read_reply());
  auto begun = std::chrono::steady_clock::now();
  server->stop();
  EXPECT_LT(std::chrono::steady_clock::now() - begun, std::chrono::seconds(10));
  EXPECT_TRUE(conn->wait_closed());
  server->stop(); // idempotent
}

TEST_F(http_server_basics, a_taken_port_is_an_io_error) {
  auto first = start();
  ASSERT_TRUE(first);
  auto second = http_server::start({}, first->local_endpoint(), route_table{}, log_);
  ASSERT_FALSE(second.has_value());
  EXPECT_EQ(second.code(), errc::io_error);
  EXPECT_NE(second.error().message.find(to_string(first->local_endpoint())), std::string::npos);
}

TEST_F(http_server_basics, rejects_options_out_of_range) {
  http_server_options options;
  options.threads = 0;
  auto server = http_server::start(options, {"127.0.0.1", 0}, route_table{}, log_);
  ASSERT_FALSE(server.has_value());
  EXPECT_EQ(server.code(), errc::invalid_argument);
}

} // namespace
} // namespace airlock::gateway
