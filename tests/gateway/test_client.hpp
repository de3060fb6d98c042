#pragma once
// A raw-socket HTTP/1.1 client for the server tests: it can send pipelined or
// partial requests, read event streams as they arrive, stop reading (a slow
// consumer) and read very large bodies. Every wait has a deadline.

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace airlock::gateway::test {

using std::chrono::milliseconds;

/// How long a test waits for anything before it fails.
inline constexpr milliseconds wait_max{20'000};

struct reply {
  int status = 0;
  std::map<std::string, std::string> headers; ///< names in lower case
  std::string body;
};

class raw_client {
public:
  /// Connects to 127.0.0.1:`port`; `receive_buffer_bytes` > 0 shrinks SO_RCVBUF
  /// first. nullptr when the connection fails.
  static std::unique_ptr<raw_client> connect(uint16_t port, int receive_buffer_bytes = 0);
  ~raw_client();
  raw_client(const raw_client&) = delete;
  raw_client& operator=(const raw_client&) = delete;

  bool send(std::string_view bytes, milliseconds timeout = wait_max);
  /// Reads until `needle` is among the bytes not yet consumed; returns them up
  /// to and including it (and consumes them). nullopt on EOF or timeout.
  std::optional<std::string> read_until(std::string_view needle, milliseconds timeout = wait_max);
  /// One Content-Length framed response.
  std::optional<reply> read_reply(milliseconds timeout = wait_max);
  /// Reads until the server closes; true on EOF (or reset) within `timeout`.
  /// What was read stays in unread().
  bool wait_closed(milliseconds timeout = wait_max);
  const std::string& unread() const { return buffer_; }
  void close();

private:
  explicit raw_client(int fd) : fd_(fd) {}
  /// Reads once; false on EOF, error or timeout.
  bool fill(std::chrono::steady_clock::time_point deadline);
  int fd_ = -1;
  std::string buffer_;
};

/// "GET `target` HTTP/1.1" with a Host header and optional extra header lines.
std::string request_text(std::string_view method, std::string_view target,
                         std::string_view extra_headers = {}, std::string_view body = {});

} // namespace airlock::gateway::test
