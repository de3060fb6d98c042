// Byte bodies streamed by a handler (exchange::open_body_stream, as a large
// file download uses): the handler's own header, bytes exactly as sent, a
// producer paced by when_drained through a small queue, and what happens to
// one that ignores the pacing or sends events.

#include <gtest/gtest.h>

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>

#include "actors/log.hpp"
#include "gateway/http_server.hpp"
#include "tests/support/http_client.hpp"

namespace airlock::gateway {
namespace {

using test::http_connection;
using test::request_text;
using test::wait_max;

/// A handler that opens a byte body and hands the stream to the test.
class body_stream_test : public ::testing::Test {
protected:
  void SetUp() override {
    route_table routes;
    routes.add_async(http::verb::get, "/file", [this](std::shared_ptr<exchange> ex) {
      http_response head{http::status::ok, 11};
      head.set(http::field::content_type, "application/octet-stream");
      head.set(http::field::content_length, std::to_string(announced_));
      auto stream = ex->open_body_stream(std::move(head), options_);
      std::lock_guard<std::mutex> guard(mutex_);
      stream_ = std::move(stream);
      changed_.notify_all();
    });
    auto server = http_server::start({}, {"127.0.0.1", 0}, std::move(routes), log_, nullptr);
    ASSERT_TRUE(server.has_value());
    server_ = std::move(*server);
  }

  /// Asks for /file and waits for the handler's stream.
  std::optional<http_connection> ask(std::shared_ptr<sse_stream>& stream) {
    auto client = http_connection::open("127.0.0.1", server_->local_endpoint().port);
    EXPECT_TRUE(client && client->send(request_text("GET", "/file")));
    std::unique_lock<std::mutex> lock(mutex_);
    EXPECT_TRUE(changed_.wait_for(lock, wait_max, [this] { return stream_ != nullptr; }));
    stream = stream_;
    return client;
  }

  /// A deterministic body of `size` bytes with no repeating short pattern.
  static std::string pattern(size_t size) {
    std::string out(size, '\0');
    uint32_t x = 2463534242u;
    for (auto& c : out) {
      x ^= x << 13;
      x ^= x >> 17;
      x ^= x << 5;
      c = static_cast<char>(x);
    }
    return out;
  }

  uint64_t announced_ = 0;
  sse_options options_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::shared_ptr<sse_stream> stream_;
  std::ostringstream log_text_;
  actors::log_sink sink_{log_text_};
  actors::logger log_{"test", actors::log_level::error, sink_};
  std::unique_ptr<http_server> server_;
};

TEST_F(body_stream_test, a_paced_producer_sends_a_body_larger_than_its_queue_byte_for_byte) {
  constexpr size_t chunk = 64 * 1024;
  const std::string body = pattern(50 * chunk + 123);
  announced_ = body.size();
  options_.queue_events_max = 2;
  options_.queue_bytes_max = 2 * chunk;
  options_.heartbeat_ms = 0;
  std::shared_ptr<sse_stream> stream;
  auto client = ask(stream);
  ASSERT_TRUE(client && stream);
  // One chunk per drain, as a download does: never more than the queue holds.
  auto produce = std::make_shared<std::function<void(size_t)>>();
  *produce = [stream, &body,
              weak = std::weak_ptr<std::function<void(size_t)>>(produce)](size_t offset) {
    if (offset >= body.size())
      return stream->close();
    auto piece = std::string_view(body).substr(offset, chunk);
    EXPECT_TRUE(stream->send_bytes(piece));
    stream->when_drained([weak, next = offset + piece.size()] {
      if (auto self = weak.lock())
        (*self)(next);
    });
  };
  (*produce)(0);
  auto reply = client->read_reply();
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 200);
  EXPECT_EQ(reply->headers["content-type"], "application/octet-stream");
  EXPECT_EQ(reply->headers["content-length"], std::to_string(body.size()));
  EXPECT_EQ(reply->headers["connection"], "close");
  EXPECT_EQ(reply->headers["server"], "airlock");
  ASSERT_EQ(reply->body.size(), body.size());
  EXPECT_TRUE(reply->body == body) << "the body differs from what was sent";
  EXPECT_TRUE(client->wait_closed());
}

TEST_F(body_stream_test, a_byte_body_takes_no_events_and_gets_no_heartbeats) {
  announced_ = 5;
  options_.heartbeat_ms = 1; // ignored by a byte body
  std::shared_ptr<sse_stream> stream;
  auto client = ask(stream);
  ASSERT_TRUE(client && stream);
  EXPECT_FALSE(stream->send("event", "data"));
  EXPECT_TRUE(stream->send_bytes("hello"));
  stream->close();
  ASSERT_TRUE(client->wait_closed());
  auto head_end = client->unread().find("\r\n\r\n");
  ASSERT_NE(head_end, std::string::npos);
  EXPECT_EQ(client->unread().substr(head_end + 4), "hello");
}

TEST_F(body_stream_test, a_byte_body_with_heartbeat_bytes_writes_them_while_it_is_quiet) {
  announced_ = 1000; // more than is sent: the client reads until the close
  options_.heartbeat_ms = 1;
  options_.heartbeat_bytes = "<keepalive>";
  std::shared_ptr<sse_stream> stream;
  auto client = ask(stream);
  ASSERT_TRUE(client && stream);
  EXPECT_TRUE(stream->send_bytes("hello"));
  EXPECT_TRUE(client->read_until("hello<keepalive><keepalive>"))
    << "a quiet byte body gets its heartbeat, whole, again and again: " << client->unread();
  stream->close();
  ASSERT_TRUE(client->wait_closed());
}

TEST_F(body_stream_test, a_producer_that_overflows_ends_the_body_short_without_an_error_event) {
  announced_ = 1 << 20;
  options_.queue_events_max = 1;
  options_.queue_bytes_max = 16;
  std::shared_ptr<sse_stream> stream;
  auto client = ask(stream);
  ASSERT_TRUE(client && stream);
  // Sends without waiting for drains: the queue holds one, so the stream
  // ends long before the thousandth send.
  int accepted = 0;
  while (accepted < 1000 && stream->send_bytes("0123456789"))
    ++accepted;
  EXPECT_LT(accepted, 1000);
  EXPECT_TRUE(stream->closed());
  ASSERT_TRUE(client->wait_closed());
  auto head_end = client->unread().find("\r\n\r\n");
  ASSERT_NE(head_end, std::string::npos);
  auto got = client->unread().substr(head_end + 4);
  EXPECT_LT(got.size(), announced_) << "the client must see a short body";
  EXPECT_EQ(got.find("slow_consumer"), std::string::npos) << got;
}

} // namespace
} // namespace airlock::gateway
