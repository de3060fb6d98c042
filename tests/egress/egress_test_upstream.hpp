#pragma once
// Test doubles for the egress proxy tests: "the internet" as an HTTP and an
// HTTPS server on loopback that record what reached them (headers included)
// and echo WebSocket messages; an audit sink and a credential source that
// record and answer from memory.

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>

#include "tests/support/wait.hpp"
#include "worker/egress/egress_types.hpp"

namespace airlock::worker::egress::test_doubles {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

/// `size` deterministic bytes for byte-exact body checks (not periodic in
/// any power of two, so a chunk relayed twice or skipped shows).
inline std::string pattern_bytes(std::size_t size) {
  std::string bytes(size, '\0');
  for (std::size_t i = 0; i < size; ++i)
    bytes[i] = static_cast<char>('a' + (i * 7 + i / 251) % 26);
  return bytes;
}

/// The number after `prefix` in `target` ("/bytes/123" -> 123), or nullopt.
inline std::optional<std::size_t> size_after(std::string_view target, std::string_view prefix) {
  if (!target.starts_with(prefix))
    return std::nullopt;
  std::size_t size = 0;
  for (char c : target.substr(prefix.size())) {
    if (c < '0' || c > '9')
      return std::nullopt;
    size = size * 10 + static_cast<std::size_t>(c - '0');
  }
  return size;
}

struct seen_request {
  std::string host;
  std::string target;
  std::map<std::string, std::string> headers; ///< lowercase names
  std::string body;
};

/// An HTTP/1.1 server (TLS when given a context) on 127.0.0.1, port 0.
/// Answers "hello from <host> <target> body=<request body>" with a
/// Content-Length, except for these targets (N a byte count):
///   /bytes/N        N pattern_bytes with a Content-Length
///   /chunked/N      N pattern_bytes in 50000-byte chunks
///   /until-close/N  N pattern_bytes, no length: the body ends with the
///                   connection (close_notify over TLS); no Connection: close
///   /stall/N        a Content-Length of N, N/2 bytes, then silence until the
///                   peer closes
///   /switch         101 with Upgrade: h2c, whatever was asked (a rogue
///                   switch), then echoes raw bytes
///   /bad-accept     101 with Upgrade: websocket and a Sec-WebSocket-Accept
///                   that answers no key, then echoes raw bytes
/// and WebSocket upgrades, whose messages it echoes.
class upstream_server {
public:
  explicit upstream_server(net::ssl::context* tls = nullptr);
  ~upstream_server();
  upstream_server(const upstream_server&) = delete;
  upstream_server& operator=(const upstream_server&) = delete;
  uint16_t port() const;
  int connections() const;
  /// Bytes that reached a rogue switch's echo after its 101.
  uint64_t echoed_after_switch() const;
  std::vector<seen_request> requests() const;

private:
  // The coroutine server lives in egress_test_upstream.cpp, compiled once.
  struct impl;
  std::unique_ptr<impl> impl_;
};

class recording_audit : public audit_sink {
public:
  void record(schema::audit_record record) override {
    {
      std::lock_guard lock{mutex_};
      records_.push_back(std::move(record));
    }
    recorded_.notify();
  }
  std::vector<schema::audit_record> records() const {
    std::lock_guard lock{mutex_};
    return records_;
  }

  /// Waits (bounded) until a record matching `predicate` exists; woken by
  /// each new record.
  template <class Predicate>
  bool wait_for_record(Predicate predicate) {
    return recorded_.wait_for(
      [&] {
        for (const auto& record : records())
          if (predicate(record))
            return true;
        return false;
      },
      std::chrono::seconds(5));
  }

private:
  mutable std::mutex mutex_;
  std::vector<schema::audit_record> records_;
  airlock::test::change_signal recorded_;
};

/// Answers fetch() from a settable list (or failure), counting calls.
class fixed_credentials : public credential_source {
public:
  void set(result<grants> answer) {
    std::lock_guard lock{mutex_};
    answer_ = std::move(answer);
  }
  void fetch(const sandbox_view&, std::function<void(result<grants>)> done) override {
    ++fetches;
    result<grants> answer = grants{};
    {
      std::lock_guard lock{mutex_};
      answer = answer_;
    }
    // From another thread, as the cluster link would.
    std::thread([done = std::move(done), answer = std::move(answer)]() mutable {
      done(std::move(answer));
    }).detach();
  }
  std::atomic<int> fetches{0};

private:
  std::mutex mutex_;
  result<grants> answer_ = grants{};
};

} // namespace airlock::worker::egress::test_doubles
