#pragma once
// The one HTTP/1.1 test client, on raw sockets so that a test can send
// pipelined or partial requests, read event streams as they arrive, stop
// reading (a slow consumer) and read very large bodies. Every wait has a
// deadline.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tests/support/wait.hpp"

namespace airlock::test {

struct http_reply {
  int status = 0;
  std::map<std::string, std::string> headers; ///< names in lower case
  std::string body;
};

/// One server-sent event; `event` is "message" when the server named none.
struct sse_event {
  std::string event;
  std::string id;
  std::string data; ///< data: lines joined with '\n'
};

/// One client connection to 127.0.0.x or another IPv4 address.
class http_connection {
public:
  /// Connects; nullopt (after the deadline at most) when nothing accepts.
  /// `receive_buffer_bytes` > 0 shrinks SO_RCVBUF first (a slow consumer).
  static std::optional<http_connection> open(const std::string& host, uint16_t port,
                                             milliseconds timeout = wait_max,
                                             int receive_buffer_bytes = 0);
  http_connection(http_connection&& other) noexcept;
  http_connection& operator=(http_connection&&) = delete;
  ~http_connection();

  /// Sends all of `bytes` within `timeout`; false on error or timeout.
  bool send(std::string_view bytes, milliseconds timeout = wait_max);
  /// Reads until `needle` is among the bytes not yet consumed; returns them up
  /// to and including it (and consumes them). nullopt on EOF or timeout.
  std::optional<std::string> read_until(std::string_view needle, milliseconds timeout = wait_max);
  /// The next response (Content-Length framed); nullopt on timeout, a closed
  /// connection or bytes that are not a response.
  std::optional<http_reply> read_reply(milliseconds timeout = wait_max);
  /// The status line and headers of the next response only (body empty); the
  /// body's bytes stay buffered for read_body or next_event.
  std::optional<http_reply> read_head(milliseconds timeout = wait_max);
  /// The body of a response whose head read_head returned: Content-Length
  /// bytes, else everything up to EOF. False on timeout.
  bool read_body(http_reply& head, milliseconds timeout = wait_max);
  /// The next event of a text/event-stream body (after read_head); comments
  /// (heartbeats) are skipped. nullopt at EOF or on timeout (see eof()).
  std::optional<sse_event> next_event(milliseconds timeout = wait_max);
  /// True once the server closed the connection.
  bool eof() const { return eof_; }
  /// True when the server closes the connection (EOF or reset) within `timeout`.
  /// What was read until then stays in unread().
  bool wait_closed(milliseconds timeout = wait_max);
  /// Bytes received and not yet consumed.
  const std::string& unread() const { return buffer_; }
  /// Closes the socket now (a client that goes away).
  void close();

private:
  explicit http_connection(int fd) : fd_(fd) {}
  /// Reads more bytes into buffer_; false on EOF, error or timeout.
  bool fill(std::chrono::steady_clock::time_point deadline);
  int fd_ = -1;
  std::string buffer_;
  bool eof_ = false;
};

/// GET `path` on a fresh connection with "Connection: close".
std::optional<http_reply> http_get(const std::string& host, uint16_t port, const std::string& path,
                                   const std::string& method = "GET");

/// A request with any method, headers and body on a fresh connection with
/// "Connection: close"; Content-Length is added for a non-empty body or a
/// method that carries one.
struct http_request {
  std::string method = "GET";
  std::string target; ///< path and query
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
};

/// Sends `request` and reads the whole response; nullopt when nothing answers
/// within `timeout`.
std::optional<http_reply> http_call(const std::string& host, uint16_t port,
                                    const http_request& request, milliseconds timeout = wait_max);

/// Sends `request` on a new connection and reads the response head; the
/// caller reads the body or events from the returned connection.
std::optional<std::pair<http_connection, http_reply>> http_open(const std::string& host,
                                                                uint16_t port,
                                                                const http_request& request,
                                                                milliseconds timeout = wait_max);

/// "METHOD `target` HTTP/1.1" with a Host header, optional extra header lines
/// (each ending in \r\n) and a Content-Length for a non-empty body: the
/// bytes of one request on a kept-alive connection.
std::string request_text(std::string_view method, std::string_view target,
                         std::string_view extra_headers = {}, std::string_view body = {});

} // namespace airlock::test
