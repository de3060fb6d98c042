#pragma once
// One request in flight and the way back to its client. Route handlers
// registered with route_table::add_async get a shared_ptr<exchange> and may
// answer from any thread, later (from an actor's continuation, a timer, ...).

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <functional>
#include <mutex>

#include "gateway/router.hpp"
#include "gateway/sse.hpp"
#include "schema/errc.hpp"

namespace airlock::gateway {

/// A piece of a request body (exchange::read_body_chunk).
struct body_chunk {
  /// Not ok: the body cannot be read any further. too_large (the server
  /// answered 413), invalid_argument (malformed; it answered 400), unavailable
  /// (the client went away or the request is over), wrong_state (a read is
  /// already pending).
  status outcome;
  std::string bytes;
  bool last = false; ///< the body ends with `bytes`
};

/// A body_chunk that says why the body cannot be read.
inline body_chunk body_failure(status why) {
  body_chunk out;
  out.outcome = std::move(why);
  return out;
}

/// Gets a body_chunk; runs on the connection's I/O thread (must not block).
using body_chunk_handler = std::function<void(body_chunk)>;

namespace detail {
/// Where an exchange's answer goes: the server's connection, or a test double.
/// Each method is called at most once per exchange, from any thread, and
/// must not block (the connection posts to its strand).
class exchange_transport {
public:
  virtual ~exchange_transport() = default;
  virtual void deliver(uint64_t sequence, http_response response) = 0;
  /// Starts the event stream: makes the stream (with the transport as its
  /// writer) and answers the 200 header.
  virtual std::shared_ptr<sse_stream> deliver_sse(uint64_t sequence,
                                                  const sse_options& options) = 0;
  /// Starts a byte body: makes the stream and answers `head` (status and
  /// fields; its body is ignored).
  virtual std::shared_ptr<sse_stream> deliver_body_stream(uint64_t sequence, http_response head,
                                                          const sse_options& options) = 0;
  /// Reads the next at most `max_bytes` of a streamed request body (a route
  /// with route_options::stream_body) and calls `then` with them.
  virtual void read_body_chunk(uint64_t sequence, size_t max_bytes, body_chunk_handler then) = 0;
};
} // namespace detail

/// One request in flight. Handlers get a shared_ptr and may answer later from any thread
/// (e.g. from a CAF actor's continuation); every method is thread-safe.
class exchange {
public:
  /// Made by the server for a matched request. `sequence` tells the
  /// transport which request of its connection this is.
  /// `body_streamed`: the body is not in `request` but read through the
  /// transport (route_options::stream_body).
  exchange(http_request request, std::string route_pattern,
           std::vector<std::pair<std::string, std::string>> path_params,
           std::weak_ptr<detail::exchange_transport> transport, uint64_t sequence,
           bool body_streamed = false);
  exchange(const exchange&) = delete;
  exchange& operator=(const exchange&) = delete;

  /// The request; its body is empty when the route streams it (read_body_chunk).
  const http_request& request() const { return request_; }
  /// A `{name}` segment of the route pattern, percent-decoded; "" if the pattern has none.
  std::string_view path_param(std::string_view name) const;
  /// The first query parameter `name`, percent-decoded ('+' is a space); nullopt if absent.
  std::optional<std::string> query(std::string_view name) const;
  /// Query parameter `name` as an unsigned number <= max; nullopt when absent
  /// or empty (a form's unset field); invalid_argument, naming the parameter
  /// and its range, otherwise.
  result<std::optional<uint64_t>> query_uint(std::string_view name, uint64_t max) const;
  /// All query parameters in order (for filters such as metadata.KEY=VALUE).
  const std::vector<std::pair<std::string, std::string>>& query_params() const { return query_; }
  /// The matched route pattern, e.g. "/v1/sandboxes/{id}" (a metrics label).
  const std::string& route_pattern() const { return pattern_; }

  /// Sends `response` (the server adds Server/keep-alive/Content-Length). Only the first
  /// respond() or open_sse() counts; later calls are ignored. Any thread.
  void respond(http_response response);
  /// Answers 200 text/event-stream (no-cache, keep-alive) and returns the stream. When the
  /// exchange was already answered the stream returned is closed (send() is false).
  std::shared_ptr<sse_stream> open_sse(const sse_options& options = {});
  /// Answers `head` (status and fields such as Content-Type and
  /// Content-Length; its body is ignored) and returns a byte stream that
  /// carries the body (sse_stream::send_bytes). The connection closes after
  /// it. Only the first answer counts, as for open_sse.
  std::shared_ptr<sse_stream> open_body_stream(http_response head, const sse_options& options = {});
  /// Reads the next at most `max_bytes` (> 0) of the request body and calls
  /// `then` with them, `last` set with the final bytes. For a route with
  /// route_options::stream_body the bytes are read from the socket now (and
  /// only now: the client waits meanwhile), `then` runs on the I/O thread and
  /// one read may be pending at a time; otherwise they are sliced from the
  /// buffered body and `then` runs before this returns. Any thread.
  void read_body_chunk(size_t max_bytes, body_chunk_handler then);
  /// True once the client has gone (or the server is stopping): producers may stop.
  /// A client that only closed its sending side may still read a response.
  bool client_gone() const { return gone_.load(); }
  /// True once respond() or open_sse() was called (or the server answered for
  /// the handler, e.g. 504 after handler_timeout_ms).
  bool answered() const { return answered_.load(); }

  // --- The server's side ---

  /// Takes the right to answer; true for the first caller only.
  bool claim() { return !answered_.exchange(true); }
  void mark_client_gone() { gone_.store(true); }
  uint64_t sequence() const { return sequence_; }

private:
  const http_request request_;
  const std::string pattern_;
  const std::vector<std::pair<std::string, std::string>> params_;
  const std::vector<std::pair<std::string, std::string>> query_;
  const std::weak_ptr<detail::exchange_transport> transport_;
  const uint64_t sequence_;
  const bool body_streamed_;
  std::mutex body_mutex_;  ///< guards body_offset_
  size_t body_offset_ = 0; ///< of a buffered body: bytes handed out
  std::atomic<bool> answered_{false};
  std::atomic<bool> gone_{false};
};

} // namespace airlock::gateway
