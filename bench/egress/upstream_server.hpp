// egress_bench: the upstream, "the internet": a blocking OpenSSL HTTPS server
// on 127.0.0.1, one thread per connection, that counts what reached it.

#pragma once

#include <openssl/ssl.h>

#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "schema/errc.hpp"

namespace airlock::egress_bench {

/// Counts what reached the upstream; the injected header tells the paths apart.
struct upstream_counts {
  std::atomic<uint64_t> connections{0};
  std::atomic<uint64_t> requests{0};
  std::atomic<uint64_t> with_credential{0};     ///< Authorization equal to the grant's value
  std::atomic<uint64_t> other_authorization{0}; ///< an Authorization header with another value
  std::atomic<uint64_t> bad_requests{0};        ///< unparseable or unknown path (answered 4xx)
};

/// Serves GET /small (small_body()) and GET /large/<bytes> (that many 'y'
/// bytes) over HTTP/1.1 keep-alive on 127.0.0.1, port 0.
class upstream_server {
public:
  static result<std::unique_ptr<upstream_server>> start(SSL_CTX* ctx);
  ~upstream_server();
  upstream_server(const upstream_server&) = delete;
  upstream_server& operator=(const upstream_server&) = delete;

  uint16_t port() const { return port_; }
  const upstream_counts& counts() const { return counts_; }

  /// Shuts every socket down so that blocked threads return, then joins them.
  void stop();

private:
  struct worker {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };

  explicit upstream_server(SSL_CTX* ctx);

  status listen();
  void accept_loop();
  /// Joins connection threads that ended. Called with mutex_ held.
  void reap_finished();
  void finish(int fd);
  void serve(int fd);
  /// Answers one request; false when the connection should close.
  bool answer(SSL* ssl, const std::string& header);
  static bool parse_size(const std::string& text, uint64_t& value);
  static std::string response_header(const char* status_line, uint64_t length, bool keep_alive);
  static bool respond(SSL* ssl, const char* status_line, const std::string& body, bool keep_alive);
  bool respond_large(SSL* ssl, uint64_t bytes, bool keep_alive);

  SSL_CTX* ctx_;
  const std::string large_chunk_;
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::thread acceptor_;
  std::mutex mutex_;
  bool stopping_ = false;
  std::set<int> open_fds_;
  std::list<worker> workers_;
  upstream_counts counts_;
};

} // namespace airlock::egress_bench
