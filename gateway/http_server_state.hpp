#pragma once
// The HTTP server's state, shared by the files that implement it (internal to
// gateway/: http_server.cpp the public class and the metrics route,
// http_listener.cpp binding, the accept loop and the graceful stop,
// http_connection.cpp a connection's requests, handlers, responses and close,
// http_body_reader.cpp a request body read as its handler asks,
// http_sse_writer.cpp a connection's event stream). Not a public header:
// http_server.hpp is the contract.

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
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
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/parser.hpp>

#include "gateway/http_server.hpp"
#include "gateway/http_stream.hpp"

namespace airlock::gateway {

namespace net = boost::asio;
namespace beast = boost::beast;
using tcp = net::ip::tcp;
using std::chrono::milliseconds;
using steady = std::chrono::steady_clock;

namespace detail {

class connection;

inline constexpr std::string_view metric_requests = "airlock_http_requests_total";
inline constexpr std::string_view metric_duration = "airlock_http_request_duration_seconds";
inline constexpr std::string_view metric_bytes = "airlock_http_response_bytes_total";
inline constexpr std::string_view unmatched_route = "unmatched";

} // namespace detail

/// A server TLS context (TLS 1.2 or later) from `files`; invalid_argument
/// naming the file that cannot be used.
result<std::shared_ptr<net::ssl::context>> load_tls_context(const http_tls_files& files);

struct http_server::impl {
  impl(const http_server_options& opts, route_table table, const actors::logger& logger,
       metrics::metrics_registry* registry)
      : options(opts), routes(std::move(table)), log(logger.with_component("gateway")),
        metrics(registry), io(std::make_unique<net::io_context>(static_cast<int>(opts.threads))) {}

  ~impl() {
    // Connections unregister themselves when destroyed; destroying the
    // io_context destroys the last of them, so it must go while the registry
    // below is still alive.
    accept_retry.reset();
    acceptor.reset();
    io.reset();
  }

  const http_server_options options;
  const route_table routes;
  const actors::logger log;
  metrics::metrics_registry* const metrics; ///< may be null; not owned
  endpoint bound;

  std::mutex mutex;                   ///< guards the fields below up to `stopping`
  std::condition_variable all_closed; ///< signalled when `connections` becomes empty
  std::map<uint64_t, std::weak_ptr<detail::connection>> connections;
  uint64_t next_connection_id = 0;
  bool stopping = false;
  std::atomic<bool> stopping_flag{false}; ///< lock-free copy of `stopping` for I/O threads

  std::atomic<uint64_t> accepted{0};
  std::atomic<uint64_t> refused{0};
  std::atomic<uint64_t> requests{0};
  std::atomic<uint64_t> rejected{0};
  std::atomic<uint64_t> handler_timeouts{0};
  std::atomic<uint64_t> sse_opened{0};
  std::atomic<uint64_t> sse_dropped{0};
  std::atomic<uint64_t> refusing{0}; ///< refusal answers being written right now
  std::atomic<uint64_t> tls_handshakes_failed{0};
  std::atomic<uint64_t> tls_reloads{0};

  /// The TLS context new connections get (null: plain HTTP), and what the
  /// files looked like when it was read. Touched on the acceptor's strand only.
  std::shared_ptr<net::ssl::context> tls_context;
  std::string tls_files_stamp;
  steady::time_point tls_checked_at{};

  std::unique_ptr<net::io_context> io;
  std::unique_ptr<tcp::acceptor> acceptor;         ///< runs on its own strand
  std::unique_ptr<net::steady_timer> accept_retry; ///< same strand as the acceptor
  std::vector<std::thread> threads;

  void accept_next();
  void on_accept(const beast::error_code& ec, tcp::socket socket);
  void admit(tcp::socket socket);
  /// The TLS context for a new connection: re-read when the files changed
  /// (at most one look a second); a replacement that does not load is logged
  /// and the one in use kept.
  std::shared_ptr<net::ssl::context> tls_for_next_connection();
  /// Reads options.tls, if any, before the first connection.
  status start_tls();
  void run_io();
  void stop();
  void notify_all_connections(void (detail::connection::*what)());
};

namespace detail {

/// One client connection. All of its handlers run on its own strand; the
/// exchange and the event stream reach it from other threads only through
/// deliver(), deliver_sse() and wake(), which post to that strand.
class connection : public std::enable_shared_from_this<connection>,
                   public detail::exchange_transport,
                   public detail::sse_writer {
public:
  using server_state = http_server::impl;

  /// `id` 0 marks a connection that is refused (not registered).
  connection(tcp::socket socket, std::shared_ptr<net::ssl::context> tls, server_state& server,
             uint64_t id)
      : stream_(std::move(socket), std::move(tls)), handler_timer_(stream_.get_executor()),
        heartbeat_timer_(stream_.get_executor()), linger_timer_(stream_.get_executor()),
        server_(server), id_(id) {}

  ~connection() override;

  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;

  void start();

  /// Answers 503 and closes: the server is at connections_max.
  void refuse();

  /// The server is stopping: an idle connection closes now; a busy one closes
  /// after its current response (send_response() sees the stopping flag); an
  /// event stream ends after what is queued.
  void on_server_stop();

  void force_close() { close_now(); }

  /// The strand every handler of this connection runs on.
  net::any_io_executor executor() { return stream_.get_executor(); }

  // detail::exchange_transport: any thread.
  void deliver(uint64_t sequence, http_response response) override;

  std::shared_ptr<sse_stream> deliver_sse(uint64_t sequence, const sse_options& options) override;

  std::shared_ptr<sse_stream> deliver_body_stream(uint64_t sequence, http_response head,
                                                  const sse_options& options) override;

  void read_body_chunk(uint64_t sequence, size_t max_bytes, body_chunk_handler then) override;

  // detail::sse_writer: any thread.
  void wake() override;

private:
  enum class phase { waiting, reading, handling, writing, streaming, ending, closed };

  const http_server_options& options() const { return server_.options; }

  /// TLS: the handshake (bounded by request_timeout_ms), then `next`; a
  /// failed handshake closes the connection. Plain: `next` at once.
  void handshake_then(void (connection::*next)());

  void answer_unavailable();

  // --- Reading a request ---

  void wait_for_request();

  void on_first_bytes(const beast::error_code& ec, size_t n);

  void read_request();

  /// True when `ec` ended the request read; answers or closes.
  bool read_failed(const beast::error_code& ec);

  void on_header(const beast::error_code& ec);

  /// Reads the body whole, or starts the handler of a route that streams it.
  void after_header(bool streamed);

  void read_body();

  void on_request(const beast::error_code& ec);

  // --- A body read as the handler asks (http_body_reader.cpp) ---

  /// Starts the handler with the header only; it reads the body through
  /// read_body_chunk().
  void start_streamed();

  void on_body_wanted(uint64_t sequence, size_t max_bytes, body_chunk_handler then);

  void on_body_read(beast::error_code ec);

  /// What a failed body read means to the handler; answers the client (413,
  /// 400) or closes when the handler has not answered yet.
  status body_read_failed(const beast::error_code& ec);

  // --- Handlers ---

  http_response run_sync(const http_request& request);

  http_response handler_failed(const std::string& what);

  void start_async(http_request request, bool body_streamed);

  /// (Re)starts the handler_timeout_ms clock of the exchange in flight.
  void arm_handler_timer();

  void on_answer(uint64_t sequence, http_response response);

  void on_handler_timeout(uint64_t sequence);

  // --- Watching the socket while a handler works or events stream ---

  /// Keeps one read pending so that a client that goes away is noticed.
  /// Bytes of pipelined requests collect in buffer_ (at most
  /// header_bytes_max); while streaming, what the client sends is discarded.
  void start_watch();

  void on_watch(const beast::error_code& ec, size_t n, bool into_drain);

  void on_client_gone(const beast::error_code& ec);

  // --- Writing a response ---

  void send_response(http_response response);

  void on_sent(const beast::error_code& ec, bool keep);

  void reject(http::status code, std::string_view error_code, const std::string& message);

  void record(unsigned status_code, size_t body_bytes);

  // --- Server-sent events ---

  /// Starts a stream: `header` is the response header to write first (empty:
  /// the event-stream header).
  void on_sse_open(uint64_t sequence, const std::shared_ptr<sse_stream>& stream,
                   std::string header);

  /// Moves the stream forward: finishes a dropped client, writes what is
  /// queued, ends the response, or tells the producer the queue is empty.
  void pump_sse();

  void on_sse_written(const beast::error_code& ec, size_t n);

  void fail_sse(const beast::error_code& ec);

  void arm_heartbeat();

  /// Ends a close-delimited event stream: half-close, then wait (bounded) for
  /// the client to close so that it reads everything before a reset could.
  void end_stream();

  /// TLS: ends the session with close_notify (a TLS client takes a bare TCP
  /// close for a truncation) once no read is pending, bounded by
  /// linger_timeout_ms, then closes.
  void close_tls();

  void arm_linger();

  // --- Closing ---

  /// Half-closes and reads what the client still sends until it closes or
  /// linger_timeout_ms passes: closing with unread bytes would send a reset
  /// that can destroy the response before the client reads it.
  void linger();

  void drain();

  void close_now();

  /// Tells a producer still holding the exchange that nobody listens.
  void release_exchange();

  /// Ends the event stream, if any, because the connection ends (idempotent).
  void end_sse_with_connection();

  server_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  /// A route with route_options::stream_body: the parser after the header.
  std::optional<http::request_parser<http::buffer_body>> body_parser_;
  bool body_streamed_ = false;     ///< the request in flight streams its body
  bool body_done_ = false;         ///< its body is read to the end
  bool body_read_pending_ = false; ///< a read for the handler is on the socket
  std::string body_piece_;         ///< what that read fills
  body_chunk_handler body_then_;   ///< who gets it
  http_response response_;
  std::array<char, 4096> drain_buffer_{};
  net::steady_timer handler_timer_;   ///< handler_timeout_ms of the exchange in flight
  net::steady_timer heartbeat_timer_; ///< SSE heartbeat
  net::steady_timer linger_timer_;    ///< bounds the end of a stream or a drop
  server_state& server_;
  uint64_t id_;

  phase phase_ = phase::waiting;
  size_t requests_served_ = 0;
  bool idle_ = false; ///< waiting for the first byte of a request
  bool keep_ = true;  ///< the request in flight allows keep-alive
  unsigned version_ = 11;
  bool record_metrics_ = true;
  route_match match_;
  uint64_t body_limit_ = 0;
  std::string route_label_{unmatched_route};
  std::string method_;
  steady::time_point started_ = steady::now();

  uint64_t sequence_ = 0;             ///< of the exchange in flight
  std::shared_ptr<exchange> current_; ///< the async exchange in flight
  bool watch_pending_ = false;
  bool watch_cancelled_ = false; ///< cancelled to read the next request
  bool client_eof_ = false;

  std::shared_ptr<sse_stream> sse_;
  std::string sse_header_;
  std::string sse_batch_; ///< the bytes being written
  bool header_pending_ = false;
  bool closing_tls_ = false;          ///< close_tls() waits for the pending read to end
  bool tls_shutdown_started_ = false; ///< close_notify is on its way
};

} // namespace detail

} // namespace airlock::gateway
