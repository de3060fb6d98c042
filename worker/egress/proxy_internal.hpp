#pragma once
// Internals shared by the egress proxy's translation units (connection
// handling in connection_proxy.cpp, HTTP in egress_http.cpp). Not a public header.

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/ssl.hpp>

#include "worker/egress/connection_proxy.hpp"
#include "worker/egress/credentials.hpp"

namespace airlock::worker::egress {

namespace net = boost::asio;
namespace beast = boost::beast;
using net::awaitable;
using net::use_awaitable;
using tcp_stream = beast::tcp_stream;
using tls_stream = beast::ssl_stream<beast::tcp_stream>;
using std::chrono::milliseconds;

/// The bytes a buffer holds, as text.
inline std::string_view buffered(const beast::flat_buffer& buffer) {
  return {static_cast<const char*>(buffer.data().data()), buffer.size()};
}

/// Gate for callbacks arriving from threads we do not own (credential
/// sources): once closed, nothing more is posted to our executors.
class lifeline {
public:
  template <class Executor, class Function>
  void post(const Executor& executor, Function&& function) {
    std::lock_guard lock{mutex_};
    if (open_)
      net::post(executor, std::forward<Function>(function));
  }
  void close() {
    std::lock_guard lock{mutex_};
    open_ = false;
  }

private:
  std::mutex mutex_;
  bool open_ = true;
};

struct proxy_counters {
  std::atomic<uint64_t> connections{0}, unknown_peers{0}, active_connections{0}, denied{0},
    allowed_requests{0}, tls_terminated{0}, passthrough{0}, credential_uses{0}, rate_limited{0},
    upstream_failures{0}, upgrades{0}, switches_refused{0};
};

/// Everything every connection reads; owned by connection_proxy via shared_ptr.
struct proxy_state {
  proxy_state(connection_proxy_options opts, connection_proxy::parts p);

  connection_proxy_options options;
  connection_proxy::parts parts;
  net::ssl::context server_tls{net::ssl::context::tls_server};
  net::ssl::context client_tls{net::ssl::context::tls_client};
  credential_cache credentials;
  std::shared_ptr<lifeline> life = std::make_shared<lifeline>();
  proxy_counters counters;

  std::shared_ptr<crypto::leaf_minter> minter() const;
  void set_minter(std::shared_ptr<crypto::leaf_minter> minter);
  /// Counts a connection for a sandbox; false when it is at its limit.
  bool acquire_slot(const std::string& sandbox_id);
  void release_slot(const std::string& sandbox_id);

private:
  mutable std::mutex mutex_;
  std::shared_ptr<crypto::leaf_minter> minter_;
  std::unordered_map<std::string, uint32_t> open_per_sandbox_;
};

/// One guest connection's facts, decided before any HTTP is read.
struct connection {
  proxy_state& state;
  std::shared_ptr<const sandbox_view> sandbox;
  uint32_t original_address = 0;
  uint16_t original_port = 0;
  bool tls = false;
  std::string sni; ///< normalized; set when tls

  /// Writes an audit record of kind `kind` for this sandbox.
  void audit(std::string_view kind, bool allowed, std::string reason, std::string target,
             std::string detail = {}) const;
  /// Writes an egress/tunnel record: from here on the connection's bytes
  /// are relayed without being judged (WebSocket, TLS pass-through).
  void audit_tunnel(std::string reason, std::string target, std::string detail) const;
  void record_audit(std::string_view kind, std::string_view decision, std::string reason,
                    std::string target, std::string detail) const;
  /// "host:port" with the connection's original port.
  std::string target(std::string_view host) const;
};

/// Runs `start(callback)` and waits on the current strand until the callback
/// delivers a value (from any thread) or `timeout` passes (nullopt).
template <class T, class Start>
awaitable<std::optional<T>> await_callback(std::shared_ptr<lifeline> life, milliseconds timeout,
                                           const Start& start) {
  auto executor = co_await net::this_coro::executor;
  struct waiter {
    explicit waiter(net::any_io_executor ex) : timer(std::move(ex)) {}
    net::steady_timer timer;
    std::optional<T> value;
  };
  auto shared = std::make_shared<waiter>(executor);
  shared->timer.expires_after(timeout);
  start([shared, life, executor](T value) {
    life->post(executor, [shared, value = std::move(value)]() mutable {
      shared->value.emplace(std::move(value));
      shared->timer.cancel();
    });
  });
  if (!shared->value) {
    boost::system::error_code ec;
    co_await shared->timer.async_wait(net::redirect_error(use_awaitable, ec));
  }
  co_return std::move(shared->value);
}

/// Resolves `host` with the pool and drops refused addresses. On failure the
/// status says what failed; permission_denied when only refused addresses remain.
awaitable<result<std::vector<uint32_t>>> resolve_allowed(const connection& conn,
                                                         const std::string& host);

/// Connects a TCP stream to the first reachable address at `port`.
awaitable<result<tcp_stream>> connect_tcp(const connection& conn,
                                          const std::vector<uint32_t>& addresses, uint16_t port);

/// Copies bytes both ways until both directions end (or one fails, which
/// closes both). `a_pending` goes to b first, `b_pending` to a.
template <class A, class B>
awaitable<void> tunnel(A& a, B& b, beast::flat_buffer& a_pending, beast::flat_buffer& b_pending,
                       milliseconds idle, std::size_t chunk);

/// Serves HTTP/1.1 on a plain connection; `buffer` holds bytes already read.
awaitable<void> serve_http(connection& conn, tcp_stream& guest, beast::flat_buffer& buffer);
/// Serves HTTP/1.1 on a terminated TLS connection (Host must equal conn.sni).
awaitable<void> serve_https(connection& conn, tls_stream& guest, beast::flat_buffer& buffer);

} // namespace airlock::worker::egress

#include "worker/egress/proxy_tunnel.ipp"
