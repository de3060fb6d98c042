// Request bodies a handler reads a chunk at a time (route_options::
// stream_body, as a file upload does): chunks of the asked size, chunked
// transfer encoding, the route's limit, and a handler that does not read
// leaving the body with the client instead of in the server's memory.

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "actors/log.hpp"
#include "gateway/exchange.hpp"
#include "gateway/http_server.hpp"
#include "tests/support/http_client.hpp"
#include "tests/support/wait.hpp"

namespace airlock::gateway {
namespace {

using test::http_connection;
using test::request_text;

/// What a reading handler saw: the sizes of its chunks and how it ended.
struct reading {
  std::vector<size_t> sizes;
  std::string body;
  status outcome;
  std::atomic<bool> ended{false};
};

/// Reads the whole body `max_bytes` at a time into `seen`, then answers 200
/// with the byte count; a failed read is recorded and not answered.
void read_all(std::shared_ptr<exchange> ex, size_t max_bytes, std::shared_ptr<reading> seen,
              test::change_signal* changed) {
  ex->read_body_chunk(max_bytes, [ex, max_bytes, seen, changed](body_chunk chunk) {
    if (!chunk.outcome.is_ok()) {
      seen->outcome = chunk.outcome;
      seen->ended = true;
      return changed->notify();
    }
    EXPECT_LE(chunk.bytes.size(), max_bytes);
    seen->sizes.push_back(chunk.bytes.size());
    seen->body += chunk.bytes;
    if (!chunk.last)
      return read_all(ex, max_bytes, seen, changed);
    seen->ended = true;
    ex->respond(json_response(http::status::ok, {{"bytes", seen->body.size()}}));
    changed->notify();
  });
}

class body_reader_test : public ::testing::Test {
protected:
  void start(uint64_t limit, size_t chunk_bytes) {
    route_table routes;
    route_options streamed{limit, true};
    routes.add_async(
      http::verb::put, "/upload",
      [this, chunk_bytes](std::shared_ptr<exchange> ex) {
        read_all(ex, chunk_bytes, seen_, &changed_);
      },
      streamed);
    routes.add_async(
      http::verb::put, "/later",
      [this](std::shared_ptr<exchange> ex) {
        std::lock_guard<std::mutex> guard(mutex_);
        held_ = std::move(ex);
        changed_.notify();
      },
      streamed);
    auto server = http_server::start({}, {"127.0.0.1", 0}, std::move(routes), log_, nullptr);
    ASSERT_TRUE(server.has_value());
    server_ = std::move(*server);
  }

  uint16_t port() const { return server_->local_endpoint().port; }

  std::shared_ptr<reading> seen_ = std::make_shared<reading>();
  test::change_signal changed_;
  std::mutex mutex_;
  std::shared_ptr<exchange> held_;
  std::ostringstream log_text_;
  actors::log_sink sink_{log_text_};
  actors::logger log_{"test", actors::log_level::error, sink_};
  std::unique_ptr<http_server> server_;
};

TEST_F(body_reader_test, hands_a_content_length_body_to_the_handler_in_chunks_of_the_asked_size) {
  start(1 << 20, 4);
  auto client = http_connection::open("127.0.0.1", port());
  ASSERT_TRUE(client);
  ASSERT_TRUE(client->send(request_text("PUT", "/upload", "", "hello world!!")));
  auto reply = client->read_reply();
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 200);
  EXPECT_EQ(seen_->body, "hello world!!");
  EXPECT_EQ(seen_->sizes, (std::vector<size_t>{4, 4, 4, 1}));
  // The connection stays usable: the body was read to its end.
  ASSERT_TRUE(client->send(request_text("PUT", "/upload", "", "")));
  auto again = client->read_reply();
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 200);
}

TEST_F(body_reader_test, reads_a_chunked_transfer_encoding_body) {
  start(1 << 20, 1000);
  auto client = http_connection::open("127.0.0.1", port());
  ASSERT_TRUE(client);
  std::string head = "PUT /upload HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n";
  ASSERT_TRUE(client->send(head + "5\r\nhello\r\n"));
  ASSERT_TRUE(client->send("7\r\n, world\r\n"));
  ASSERT_TRUE(client->send("0\r\n\r\n"));
  auto reply = client->read_reply();
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 200);
  EXPECT_EQ(seen_->body, "hello, world");
  EXPECT_EQ(nlohmann::json::parse(reply->body)["bytes"], 12);
}

TEST_F(body_reader_test, a_chunked_body_past_the_route_limit_gets_413_and_the_handler_an_error) {
  start(16, 8);
  auto client = http_connection::open("127.0.0.1", port());
  ASSERT_TRUE(client);
  std::string head = "PUT /upload HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n";
  ASSERT_TRUE(client->send(head + "20\r\n" + std::string(32, 'x') + "\r\n0\r\n\r\n"));
  auto reply = client->read_reply();
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 413);
  auto error = nlohmann::json::parse(reply->body)["error"];
  EXPECT_EQ(error["code"], "too_large");
  EXPECT_FALSE(error["message"].get<std::string>().empty());
  ASSERT_TRUE(changed_.wait_for([this] { return seen_->ended.load(); }, test::wait_max));
  EXPECT_EQ(seen_->outcome.code, errc::too_large);
  EXPECT_LE(seen_->body.size(), 16u);
}

TEST_F(body_reader_test, an_announced_body_past_the_route_limit_gets_413_before_the_handler) {
  start(16, 8);
  auto client = http_connection::open("127.0.0.1", port());
  ASSERT_TRUE(client);
  ASSERT_TRUE(client->send(request_text("PUT", "/upload", "", std::string(17, 'x'))));
  auto reply = client->read_reply();
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 413);
  EXPECT_EQ(nlohmann::json::parse(reply->body)["error"]["code"], "too_large");
  EXPECT_TRUE(seen_->sizes.empty());
  EXPECT_FALSE(seen_->ended);
}

/// A raw non-blocking socket: how many bytes the server lets in.
class raw_sender {
public:
  explicit raw_sender(uint16_t port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(port);
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0;
    ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) | O_NONBLOCK);
  }
  ~raw_sender() { ::close(fd_); }
  bool connected() const { return connected_; }
  int fd() const { return fd_; }

  /// Sends from `bytes` at `offset` until everything is sent or nothing
  /// more is taken for `stall_ms`; returns the new offset.
  size_t send_until_stalled(const std::string& bytes, size_t offset, int stall_ms) {
    while (offset < bytes.size()) {
      auto n = ::send(fd_, bytes.data() + offset, bytes.size() - offset, MSG_NOSIGNAL);
      if (n > 0) {
        offset += static_cast<size_t>(n);
        continue;
      }
      pollfd p{fd_, POLLOUT, 0};
      if (::poll(&p, 1, stall_ms) <= 0)
        break;
    }
    return offset;
  }

private:
  int fd_;
  bool connected_ = false;
};

TEST_F(body_reader_test, a_handler_that_has_not_read_yet_leaves_the_body_with_the_client) {
  constexpr size_t body_bytes = size_t{64} << 20;
  start(body_bytes, 1 << 20);
  raw_sender sender(port());
  ASSERT_TRUE(sender.connected());
  std::string request =
    "PUT /later HTTP/1.1\r\nHost: t\r\nContent-Length: " + std::to_string(body_bytes) + "\r\n\r\n";
  const size_t head_bytes = request.size();
  ASSERT_EQ(sender.send_until_stalled(request, 0, 5000), head_bytes);
  ASSERT_TRUE(changed_.wait_for(
    [&] {
      std::lock_guard<std::mutex> guard(mutex_);
      return held_ != nullptr;
    },
    test::wait_max));
  request.append(body_bytes, 'b');
  // Nobody reads the body: only the kernel's socket buffers take bytes (a
  // few MiB on loopback), far from the whole body.
  size_t offset = sender.send_until_stalled(request, head_bytes, 500);
  EXPECT_LT(offset - head_bytes, body_bytes / 2) << "the server read a body nobody asked for";
  std::shared_ptr<exchange> ex;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    ex = held_;
  }
  // Now the handler reads: the rest goes through, a chunk at a time.
  read_all(ex, 1 << 20, seen_, &changed_);
  while (offset < request.size()) {
    size_t sent = sender.send_until_stalled(request, offset, 5000);
    ASSERT_GT(sent, offset) << "the server stopped taking the body";
    offset = sent;
  }
  ASSERT_TRUE(changed_.wait_for([this] { return seen_->ended.load(); }, test::wait_max));
  EXPECT_TRUE(seen_->outcome.is_ok()) << seen_->outcome.message;
  EXPECT_EQ(seen_->body.size(), body_bytes);
  for (size_t size : seen_->sizes)
    EXPECT_LE(size, size_t{1} << 20);
  EXPECT_GE(seen_->sizes.size(), 64u);
}

TEST_F(body_reader_test, a_buffered_route_hands_out_its_body_through_the_same_call) {
  route_table routes;
  routes.add_async(http::verb::put, "/buffered",
                   [this](std::shared_ptr<exchange> ex) { read_all(ex, 3, seen_, &changed_); });
  auto server = http_server::start({}, {"127.0.0.1", 0}, std::move(routes), log_, nullptr);
  ASSERT_TRUE(server.has_value());
  server_ = std::move(*server);
  auto client = http_connection::open("127.0.0.1", port());
  ASSERT_TRUE(client);
  ASSERT_TRUE(client->send(request_text("PUT", "/buffered", "", "abcdefg")));
  auto reply = client->read_reply();
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 200);
  EXPECT_EQ(seen_->body, "abcdefg");
  EXPECT_EQ(seen_->sizes, (std::vector<size_t>{3, 3, 1}));
}

} // namespace
} // namespace airlock::gateway
