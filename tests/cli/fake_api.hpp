#pragma once
// A tiny HTTP/1.1 server for the CLI's integration tests: it plays airlockd's
// API with whatever the test's handler answers. One thread per connection
// (exec keeps an output stream open while it posts stdin), one request per
// connection, 127.0.0.1 on a port the kernel picks.

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

namespace airlock::cli::test {

using request_t = boost::beast::http::request<boost::beast::http::string_body>;
using socket_t = boost::asio::ip::tcp::socket;

/// What the server received, for assertions.
struct recorded_request {
  std::string method;
  std::string target;
  std::string authorization;
  std::string last_event_id;
  std::string body;
};

class fake_api {
public:
  /// The handler answers on the socket (write_json, write_raw) and may just
  /// return to drop the connection. It runs on the connection's thread.
  using handler = std::function<void(const request_t&, socket_t&)>;

  explicit fake_api(handler on_request);
  ~fake_api();
  fake_api(const fake_api&) = delete;
  fake_api& operator=(const fake_api&) = delete;

  /// http://127.0.0.1:PORT
  std::string url() const;
  std::vector<recorded_request> requests() const;

private:
  void accept_loop();
  void serve(socket_t socket);

  handler on_request_;
  boost::asio::io_context io_;
  boost::asio::ip::tcp::acceptor acceptor_;
  unsigned short port_ = 0;
  bool stopping_ = false; // guarded by mutex_
  mutable std::mutex mutex_;
  std::vector<recorded_request> requests_;
  std::vector<std::thread> connections_;
  std::thread acceptor_thread_;
};

/// A whole response with a JSON body; the connection closes after it.
void write_json(socket_t& socket, int status, const nlohmann::json& body);
/// A whole response with raw bytes as the body.
void write_bytes(socket_t& socket, int status, const std::string& body);
/// Bytes as they are: for SSE, the header block first, then events.
void write_raw(socket_t& socket, const std::string& bytes);
/// The header block of an SSE response (no Content-Length: it ends at close).
std::string sse_head();
/// One SSE event.
std::string sse_event(const std::string& event, const nlohmann::json& data, const std::string& id);

} // namespace airlock::cli::test
