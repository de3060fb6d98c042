// The HTTP server in-process on port 0 with asynchronous routes: answers
// from other threads, keep-alive and pipelining, per-route body limits,
// server-sent events (heartbeats, pacing, slow consumers, disconnects,
// graceful stop), handler timeouts and request metrics.

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "actors/log.hpp"
#include "gateway/http_server.hpp"
#include "tests/support/http_client.hpp"
#include "tests/support/wait.hpp"

namespace airlock::gateway {
namespace {

using test::http_connection;
using test::milliseconds;
using test::request_text;
using test::wait_max;

/// Exchanges handed over by handlers to the test thread.
class exchange_queue {
public:
  void push(std::shared_ptr<exchange> request) {
    std::lock_guard<std::mutex> guard(mutex_);
    items_.push_back(std::move(request));
    ready_.notify_all();
  }
  std::shared_ptr<exchange> pop() {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!ready_.wait_for(lock, wait_max, [this] { return !items_.empty(); }))
      return nullptr;
    auto out = items_.front();
    items_.pop_front();
    return out;
  }
  async_route_handler handler() {
    return [this](std::shared_ptr<exchange> request) { push(std::move(request)); };
  }

private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::shared_ptr<exchange>> items_;
};

/// Waits (bounded) until `condition` holds.
template <class Condition>
bool eventually(Condition condition) {
  return test::wait_for(condition, wait_max, milliseconds(1));
}

class http_server_test : public ::testing::Test {
protected:
  std::unique_ptr<http_server> start(route_table routes, http_server_options options = {}) {
    auto server = http_server::start(options, {"127.0.0.1", 0}, std::move(routes), log_, &metrics_);
    EXPECT_TRUE(server.has_value()) << (server ? "" : server.error().message);
    if (!server)
      return nullptr;
    port_ = (*server)->local_endpoint().port;
    return std::move(*server);
  }

  std::unique_ptr<http_connection> connect(int receive_buffer_bytes = 0) {
    auto client = http_connection::open("127.0.0.1", port_, wait_max, receive_buffer_bytes);
    EXPECT_TRUE(client);
    if (!client)
      return nullptr;
    return std::make_unique<http_connection>(std::move(*client));
  }

  static http_response text(std::string body) {
    http_response response{http::status::ok, 11};
    response.set(http::field::content_type, "text/plain");
    response.body() = std::move(body);
    return response;
  }

  exchange_queue queue_;
  metrics::metrics_registry metrics_;
  uint16_t port_ = 0;
  std::ostringstream log_text_;
  actors::log_sink sink_{log_text_};
  actors::logger log_{"test", actors::log_level::error, sink_};
};

TEST_F(http_server_test, an_async_handler_answers_from_another_thread) {
  route_table routes;
  routes.add_async(http::verb::get, "/v1/sandboxes/{id}", queue_.handler());
  auto server = start(std::move(routes));
  ASSERT_TRUE(server);
  auto client = connect();
  ASSERT_TRUE(client->send(request_text("GET", "/v1/sandboxes/sb%201?x=a+b")));
  auto request = queue_.pop();
  ASSERT_TRUE(request);
  std::thread answerer([request] {
    request->respond(
      json_response(http::status::ok, nlohmann::json{{"id", std::string(request->path_param("id"))},
                                                     {"x", request->query("x").value_or("")},
                                                     {"route", request->route_pattern()}}));
  });
  answerer.join();
  auto reply = client->read_reply();
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 200);
  EXPECT_EQ(reply->headers["server"], "airlock");
  EXPECT_EQ(nlohmann::json::parse(reply->body),
            (nlohmann::json{{"id", "sb 1"}, {"x", "a b"}, {"route", "/v1/sandboxes/{id}"}}));
}

TEST_F(http_server_test, keeps_the_connection_across_async_answers_and_serialises_pipelining) {
  route_table routes;
  std::atomic<int> answered_before_next{0};
  std::shared_ptr<exchange> previous;
  routes.add_async(http::verb::get, "/v1/n/{n}",
                   [this, &previous, &answered_before_next](std::shared_ptr<exchange> request) {
                     // Runs on the connection's strand: one request at a time.
                     if (previous && previous->answered())
                       ++answered_before_next;
                     previous = request;
                     queue_.push(std::move(request));
                   });
  auto server = start(std::move(routes));
  ASSERT_TRUE(server);
  auto client = connect();
  ASSERT_TRUE(client->send(request_text("GET", "/v1/n/1") + request_text("GET", "/v1/n/2")));
  for (std::string n : {"1", "2"}) {
    auto request = queue_.pop();
    ASSERT_TRUE(request);
    EXPECT_EQ(request->path_param("n"), n);
    std::thread([request, n] { request->respond(text("answer " + n)); }).join();
    auto reply = client->read_reply();
    ASSERT_TRUE(reply);
    EXPECT_EQ(reply->body, "answer " + n);
    EXPECT_NE(reply->headers["connection"], "close"); // HTTP/1.1: open unless "close"
  }
  ASSERT_TRUE(client->send(request_text("GET", "/v1/n/3")));
  auto third = queue_.pop();
  ASSERT_TRUE(third);
  third->respond(text("answer 3"));
  auto reply = client->read_reply();
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->body, "answer 3");
  EXPECT_EQ(answered_before_next.load(), 2);
  EXPECT_EQ(server->stats().connections_accepted, 1u);
  EXPECT_EQ(server->stats().requests, 3u);
}

TEST_F(http_server_test, a_route_body_limit_refuses_a_large_body_before_reading_it) {
  route_table routes;
  std::atomic<int> calls{0};
  auto count = [&calls](std::shared_ptr<exchange> request) {
    ++calls;
    request->respond(text(std::to_string(request->request().body().size())));
  };
  routes.add_async(http::verb::post, "/small", count, route_options{10});
  routes.add_async(http::verb::post, "/large", count, route_options{1000});
  routes.add_async(http::verb::post, "/default", count);
  http_server_options options;
  options.body_bytes_max = 100;
  auto server = start(std::move(routes), options);
  ASSERT_TRUE(server);

  // Only the header is sent: the answer cannot depend on reading the body.
  auto client = connect();
  ASSERT_TRUE(client->send("POST /small HTTP/1.1\r\nHost: t\r\nContent-Length: 1000000\r\n\r\n"));
  auto reply = client->read_reply();
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 413);
  EXPECT_EQ(nlohmann::json::parse(reply->body)["error"]["code"], "too_large");
  EXPECT_TRUE(client->wait_closed());

  auto large = connect();
  ASSERT_TRUE(large->send(request_text("POST", "/large", {}, std::string(500, 'x'))));
  reply = large->read_reply();
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 200);
  EXPECT_EQ(reply->body, "500");

  auto fallback = connect();
  ASSERT_TRUE(fallback->send(request_text("POST", "/default", {}, std::string(500, 'x'))));
  reply = fallback->read_reply();
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 413);
  EXPECT_EQ(calls.load(), 1);
}

TEST_F(http_server_test, expect_continue_gets_100_before_the_body) {
  route_table routes;
  routes.add_async(http::verb::put, "/f", [](std::shared_ptr<exchange> request) {
    request->respond(text(request->request().body()));
  });
  auto server = start(std::move(routes));
  ASSERT_TRUE(server);
  auto client = connect();
  ASSERT_TRUE(client->send(
    "PUT /f HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n"));
  ASSERT_TRUE(client->read_until("HTTP/1.1 100 Continue\r\n\r\n"));
  ASSERT_TRUE(client->send("hello"));
  auto reply = client->read_reply();
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->body, "hello");
}

TEST_F(http_server_test, moves_a_100_mib_body_each_way) {
  constexpr size_t size = size_t{100} << 20;
  route_table routes;
  routes.add_async(
    http::verb::put, "/blob",
    [](std::shared_ptr<exchange> request) {
      const std::string& body = request->request().body();
      bool intact = body.size() == size && body.front() == 'a' && body.back() == 'z';
      request->respond(text(intact ? "intact" : "damaged"));
    },
    route_options{size});
  routes.add_async(http::verb::get, "/blob", [](std::shared_ptr<exchange> request) {
    std::string body(size, 'b');
    body.back() = 'y';
    request->respond(text(std::move(body)));
  });
  auto server = start(std::move(routes));
  ASSERT_TRUE(server);
  auto client = connect();
  std::string body(size, 'm');
  body.front() = 'a';
  body.back() = 'z';
  std::thread sender([&client, &body] {
    EXPECT_TRUE(client->send(request_text("PUT", "/blob", {}, body), milliseconds(60'000)));
  });
  auto reply = client->read_reply(milliseconds(60'000));
  sender.join();
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->body, "intact");
  ASSERT_TRUE(client->send(request_text("GET", "/blob")));
  reply = client->read_reply(milliseconds(60'000));
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->body.size(), size);
  EXPECT_EQ(reply->body.back(), 'y');
}

TEST_F(http_server_test, a_handler_that_never_answers_gets_504_and_its_late_answer_is_ignored) {
  route_table routes;
  routes.add_async(http::verb::get, "/hang", queue_.handler());
  routes.add(http::verb::get, "/ok", [](const http_request&) { return text("ok"); });
  http_server_options options;
  options.handler_timeout_ms = 50;
  auto server = start(std::move(routes), options);
  ASSERT_TRUE(server);
  auto client = connect();
  ASSERT_TRUE(client->send(request_text("GET", "/hang")));
  auto reply = client->read_reply();
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 504);
  EXPECT_EQ(nlohmann::json::parse(reply->body)["error"]["code"], "timeout");
  auto late = queue_.pop();
  ASSERT_TRUE(late);
  EXPECT_TRUE(late->answered());
  late->respond(text("too late"));
  // The connection still serves the next request, and only that answer comes.
  ASSERT_TRUE(client->send(request_text("GET", "/ok")));
  reply = client->read_reply();
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->body, "ok");
  EXPECT_EQ(server->stats().handler_timeouts, 1u);
}

TEST_F(http_server_test, a_throwing_handler_gets_a_json_500) {
  route_table routes;
  routes.add_async(http::verb::get, "/throw",
                   [](std::shared_ptr<exchange>) { throw std::runtime_error("boom"); });
  auto server = start(std::move(routes));
  ASSERT_TRUE(server);
  auto client = connect();
  ASSERT_TRUE(client->send(request_text("GET", "/throw")));
  auto reply = client->read_reply();
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 500);
  EXPECT_EQ(nlohmann::json::parse(reply->body)["error"]["code"], "internal");
}

TEST_F(http_server_test, a_client_that_disconnects_marks_its_exchange_gone) {
  route_table routes;
  routes.add_async(http::verb::get, "/wait", queue_.handler());
  auto server = start(std::move(routes));
  ASSERT_TRUE(server);
  auto client = connect();
  ASSERT_TRUE(client->send(request_text("GET", "/wait")));
  auto request = queue_.pop();
  ASSERT_TRUE(request);
  EXPECT_FALSE(request->client_gone());
  client->close();
  EXPECT_TRUE(eventually([&request] { return request->client_gone(); }));
  request->respond(text("nobody listens")); // harmless
  EXPECT_TRUE(eventually([&server] { return server->stats().connections_open == 0; }));
}

/// Opens a stream on GET /events and hands it to the test.
class sse_test : public http_server_test {
protected:
  std::unique_ptr<http_server> start_events(sse_options stream_options = {},
                                            http_server_options options = {}) {
    route_table routes;
    routes.add_async(http::verb::get, "/events",
                     [this, stream_options](std::shared_ptr<exchange> request) {
                       auto stream = request->open_sse(stream_options);
                       stream->on_close([this](std::string_view reason) {
                         std::lock_guard<std::mutex> guard(mutex_);
                         reasons_.emplace_back(reason);
                       });
                       std::lock_guard<std::mutex> guard(mutex_);
                       streams_.push_back(std::move(stream));
                       changed_.notify_all();
                     });
    return start(std::move(routes), options);
  }

  std::shared_ptr<sse_stream> next_stream() {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!changed_.wait_for(lock, wait_max, [this] { return streams_.size() > taken_; }))
      return nullptr;
    return streams_[taken_++];
  }

  std::vector<std::string> reasons() {
    std::lock_guard<std::mutex> guard(mutex_);
    return reasons_;
  }

  /// Connects, asks for /events and reads the response header.
  std::unique_ptr<http_connection> subscribe(int receive_buffer_bytes = 0) {
    auto client = connect(receive_buffer_bytes);
    if (!client || !client->send(request_text("GET", "/events")))
      return nullptr;
    auto head = client->read_until("\r\n\r\n");
    EXPECT_TRUE(head);
    if (!head)
      return nullptr;
    EXPECT_EQ(head->rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << *head;
    EXPECT_NE(head->find("Content-Type: text/event-stream\r\n"), std::string::npos);
    EXPECT_NE(head->find("Cache-Control: no-cache\r\n"), std::string::npos);
    return client;
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::shared_ptr<sse_stream>> streams_;
  size_t taken_ = 0;
  std::vector<std::string> reasons_;
};

TEST_F(sse_test, streams_events_with_ids_and_multi_line_data_then_closes) {
  auto server = start_events();
  ASSERT_TRUE(server);
  auto client = subscribe();
  ASSERT_TRUE(client);
  auto stream = next_stream();
  ASSERT_TRUE(stream);
  EXPECT_TRUE(stream->send("state", "{\"state\":\"running\"}", "1"));
  EXPECT_TRUE(stream->send("stdout", "line one\nline two"));
  stream->close();
  EXPECT_FALSE(stream->send("late", "x"));
  ASSERT_TRUE(client->wait_closed());
  EXPECT_EQ(client->unread(), "event: state\nid: 1\ndata: {\"state\":\"running\"}\n\n"
                              "event: stdout\ndata: line one\ndata: line two\n\n");
  EXPECT_TRUE(eventually([this] { return reasons().size() == 1; }));
  EXPECT_EQ(reasons(), std::vector<std::string>{"closed"});
}

TEST_F(sse_test, writes_heartbeats_while_no_event_comes) {
  sse_options options;
  options.heartbeat_ms = 10;
  auto server = start_events(options);
  ASSERT_TRUE(server);
  auto client = subscribe();
  ASSERT_TRUE(client);
  EXPECT_TRUE(client->read_until(": heartbeat\n\n"));
  EXPECT_TRUE(client->read_until(": heartbeat\n\n"));
}

TEST_F(sse_test, when_drained_paces_a_producer_through_a_small_queue) {
  sse_options options;
  options.queue_events_max = 2;
  auto server = start_events(options);
  ASSERT_TRUE(server);
  auto client = subscribe();
  ASSERT_TRUE(client);
  auto stream = next_stream();
  ASSERT_TRUE(stream);
  // A producer that sends one event per drain never overflows the queue.
  constexpr int events = 200;
  auto produce = std::make_shared<std::function<void(int)>>();
  *produce = [stream, weak = std::weak_ptr<std::function<void(int)>>(produce)](int n) {
    if (n == events)
      return stream->close();
    EXPECT_TRUE(stream->send("n", std::to_string(n), std::to_string(n)));
    stream->when_drained([weak, n] {
      if (auto next = weak.lock())
        (*next)(n + 1);
    });
  };
  (*produce)(0);
  ASSERT_TRUE(client->wait_closed());
  EXPECT_NE(client->unread().find("id: 199\ndata: 199\n\n"), std::string::npos);
  EXPECT_TRUE(eventually([this] { return !reasons().empty(); }));
  EXPECT_EQ(reasons(), std::vector<std::string>{"closed"});
  EXPECT_EQ(server->stats().sse_clients_dropped, 0u);
}

TEST_F(sse_test, drops_a_client_that_does_not_read_with_slow_consumer) {
  sse_options options;
  options.queue_events_max = 4;
  auto server = start_events(options);
  ASSERT_TRUE(server);
  auto client = subscribe(4096);
  ASSERT_TRUE(client);
  auto stream = next_stream();
  ASSERT_TRUE(stream);
  // The client reads nothing: socket buffers fill, then the queue.
  std::string chunk(64 * 1024, 'x');
  int sent = 0;
  while (sent < 100'000 && stream->send("data", chunk))
    ++sent;
  EXPECT_LT(sent, 100'000);
  EXPECT_TRUE(stream->closed());
  EXPECT_TRUE(eventually([this] { return !reasons().empty(); }));
  EXPECT_EQ(reasons(), std::vector<std::string>{"slow_consumer"});
  EXPECT_EQ(server->stats().sse_clients_dropped, 1u);
  // The server gives up on the connection within linger_timeout_ms.
  EXPECT_TRUE(client->wait_closed());
}

TEST_F(sse_test, a_client_that_disconnects_ends_the_stream_with_client_gone) {
  auto server = start_events();
  ASSERT_TRUE(server);
  auto client = subscribe();
  ASSERT_TRUE(client);
  auto stream = next_stream();
  ASSERT_TRUE(stream);
  client->close();
  EXPECT_TRUE(eventually([this] { return !reasons().empty(); }));
  EXPECT_EQ(reasons(), std::vector<std::string>{"client_gone"});
  EXPECT_TRUE(stream->closed());
  EXPECT_FALSE(stream->send("x", "y"));
}

TEST_F(sse_test, graceful_stop_ends_streams_with_server_stopping_after_their_queue) {
  auto server = start_events();
  ASSERT_TRUE(server);
  auto client = subscribe();
  ASSERT_TRUE(client);
  auto stream = next_stream();
  ASSERT_TRUE(stream);
  ASSERT_TRUE(stream->send("last", "words"));
  std::thread stopper([&server] { server->stop(); });
  EXPECT_TRUE(client->wait_closed());
  client->close();
  stopper.join();
  EXPECT_NE(client->unread().find("event: last\ndata: words\n\n"), std::string::npos);
  EXPECT_EQ(reasons(), std::vector<std::string>{"server_stopping"});
  EXPECT_EQ(server->stats().connections_open, 0u);
}

TEST_F(http_server_test, records_request_counts_durations_and_bytes_per_route) {
  route_table routes;
  routes.add_async(http::verb::get, "/v1/things/{id}",
                   [](std::shared_ptr<exchange> request) { request->respond(text("12345")); });
  add_metrics_route(routes, metrics_);
  auto server = start(std::move(routes));
  ASSERT_TRUE(server);
  auto client = connect();
  for (std::string target : {"/v1/things/a", "/v1/things/b", "/nope"}) {
    ASSERT_TRUE(client->send(request_text("GET", target)));
    ASSERT_TRUE(client->read_reply());
  }
  ASSERT_TRUE(client->send(request_text("GET", "/metrics")));
  auto reply = client->read_reply();
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->headers["content-type"], "text/plain; version=0.0.4; charset=utf-8");
  const std::string& text = reply->body;
  EXPECT_NE(text.find("# TYPE airlock_http_requests_total counter\n"), std::string::npos);
  EXPECT_NE(text.find("airlock_http_requests_total{route=\"/v1/things/{id}\",method=\"GET\","
                      "status=\"200\"} 2\n"),
            std::string::npos)
    << text;
  EXPECT_NE(
    text.find("airlock_http_requests_total{route=\"unmatched\",method=\"GET\",status=\"404\"} 1\n"),
    std::string::npos)
    << text;
  EXPECT_NE(text.find("airlock_http_request_duration_seconds_count{route=\"/v1/things/{id}\"} 2\n"),
            std::string::npos)
    << text;
  EXPECT_NE(text.find("airlock_http_response_bytes_total{route=\"/v1/things/{id}\"} 10\n"),
            std::string::npos)
    << text;
}

TEST_F(sse_test, counts_streamed_bytes_in_the_response_bytes_metric) {
  auto server = start_events();
  ASSERT_TRUE(server);
  auto client = subscribe();
  ASSERT_TRUE(client);
  auto stream = next_stream();
  ASSERT_TRUE(stream);
  std::string event = format_sse_event("e", "12345", "");
  ASSERT_TRUE(stream->send("e", "12345"));
  stream->close();
  ASSERT_TRUE(client->wait_closed());
  EXPECT_TRUE(eventually([this, &event] {
    return metrics_.value("airlock_http_response_bytes_total", {{"route", "/events"}})
           == static_cast<double>(event.size());
  }));
  EXPECT_EQ(metrics_.value("airlock_http_requests_total",
                           {{"route", "/events"}, {"method", "GET"}, {"status", "200"}}),
            1);
}

} // namespace
} // namespace airlock::gateway
