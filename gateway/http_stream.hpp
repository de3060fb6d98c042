#pragma once
// A server connection's byte stream, plain TCP or TLS over it (internal to
// gateway/'s HTTP server). One type for both so that the request, response,
// body and event-stream code is the same; timeouts always apply to the TCP
// stream underneath.

#include <memory>
#include <optional>
#include <utility>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>

namespace airlock::gateway::detail {

class server_stream {
public:
  using tls_stream = boost::beast::ssl_stream<boost::beast::tcp_stream>;
  using executor_type = boost::beast::tcp_stream::executor_type;

  /// TLS when `tls` is set; it is kept alive as long as the stream.
  server_stream(boost::asio::ip::tcp::socket socket, std::shared_ptr<boost::asio::ssl::context> tls)
      : context_(std::move(tls)) {
    if (context_)
      tls_.emplace(std::move(socket), *context_);
    else
      plain_.emplace(std::move(socket));
  }

  executor_type get_executor() { return tcp().get_executor(); }

  bool is_tls() const { return tls_.has_value(); }
  tls_stream& tls() { return *tls_; }
  boost::beast::tcp_stream& tcp() { return tls_ ? tls_->next_layer() : *plain_; }
  boost::asio::ip::tcp::socket& socket() { return tcp().socket(); }

  template <class Buffers, class Handler>
  auto async_read_some(const Buffers& buffers, Handler&& handler) {
    if (tls_)
      return tls_->async_read_some(buffers, std::forward<Handler>(handler));
    return plain_->async_read_some(buffers, std::forward<Handler>(handler));
  }

  template <class Buffers, class Handler>
  auto async_write_some(const Buffers& buffers, Handler&& handler) {
    if (tls_)
      return tls_->async_write_some(buffers, std::forward<Handler>(handler));
    return plain_->async_write_some(buffers, std::forward<Handler>(handler));
  }

private:
  std::shared_ptr<boost::asio::ssl::context> context_;
  std::optional<boost::beast::tcp_stream> plain_;
  std::optional<tls_stream> tls_;
};

} // namespace airlock::gateway::detail
