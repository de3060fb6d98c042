#pragma once
// One server-sent-events response (text/event-stream). A producer on any
// thread queues events; the server's connection writes them on its strand.
// The queue is bounded: a client that falls behind is dropped with a reason
// instead of growing memory.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

namespace airlock::gateway {

struct sse_options {
  /// Events queued but not yet written; one more drops the client (see send). Default: 256.
  size_t queue_events_max = 256;
  /// Bytes queued but not yet written; past it the client is dropped. Default: 4 MiB.
  size_t queue_bytes_max = size_t{4} << 20;
  /// A `: heartbeat` comment line is written after this long without an event. Default: 15000.
  uint32_t heartbeat_ms = 15'000;
  /// A byte stream's heartbeat: written as it is after heartbeat_ms without
  /// bytes (a protocol's own keepalive message, whole). Empty: none.
  std::string heartbeat_bytes;
};

namespace detail {
/// The writer of a stream (the server's connection). wake() may be called
/// from any thread, with no lock held; the writer then looks at the stream
/// on its own strand (see sse_stream's server side).
class sse_writer {
public:
  virtual ~sse_writer() = default;
  virtual void wake() = 0;
};
} // namespace detail

/// What a stream's body is: server-sent events (open_sse), or plain bytes
/// of a response whose header the handler chose (open_body_stream: a file
/// download sent chunk by chunk). A byte stream gets no error event (a
/// producer that overflows it just ends it) and no heartbeats unless its
/// options give heartbeat_bytes.
enum class stream_body { events, bytes };

/// One streamed response: server-sent events, or a byte body. Thread-safe.
class sse_stream {
public:
  /// Made by the server (exchange::open_sse or open_body_stream); `writer`
  /// is the connection.
  sse_stream(const sse_options& options, std::weak_ptr<detail::sse_writer> writer,
             stream_body body = stream_body::events);
  sse_stream(const sse_stream&) = delete;
  sse_stream& operator=(const sse_stream&) = delete;

  /// Queues `event:`/`id:`/`data:` lines (data split on '\n' into several data: lines; id
  /// omitted when empty). False once the stream is closed. When the queue would exceed its
  /// bounds the client is dropped: a final `event: error` with data
  /// {"code":"slow_consumer","message":"..."} is written (best effort) and the stream closes.
  /// CR and CRLF in `data` also end a line; line breaks in `event` and `id` are removed.
  bool send(std::string_view event, std::string_view data, std::string_view id = {});

  /// Queues `bytes` as they are, for a byte stream (events: false, nothing
  /// queued). Past the queue's bounds the stream ends ("slow_consumer"):
  /// pace the producer with when_drained. False once the stream is closed.
  bool send_bytes(std::string_view bytes);

  /// Calls `ready` once (on an I/O thread) as soon as the queue is empty — at once if it is
  /// already — so a producer can pace itself instead of overflowing. Not called if the
  /// stream closes first (on_close is). A second call before the first fired replaces it.
  void when_drained(std::function<void()> ready);

  /// Writes what is queued, then ends the response (the connection is then closed).
  void close();

  /// Called once (any thread) when the stream ends for any reason: "closed", "client_gone",
  /// "slow_consumer", "server_stopping". Set it right after open_sse; if the stream has
  /// already ended, `done` runs at once on the calling thread.
  void on_close(std::function<void(std::string_view reason)> done);

  bool closed() const;

  // --- The server's side (gateway internals; route handlers do not call these) ---

  /// What the writer should do next, decided under the stream's lock.
  struct writer_step {
    std::string bytes;                 ///< to write now (empty: nothing)
    size_t events = 0;                 ///< events in `bytes`
    bool finish_slow_consumer = false; ///< the producer overflowed: finish("slow_consumer")
    bool end = false;                  ///< closed and nothing left: end the response
    std::string end_reason;            ///< with `end`: finish(end_reason) if not finished
    std::function<void()> drained;     ///< call it: the queue is empty
  };
  /// Takes the queued bytes when no write is in flight (then one is), and the
  /// drained callback when the queue is empty. Called on the writer's strand.
  writer_step next_step();
  /// The write of the bytes from next_step() completed.
  void write_done();
  /// Queues a heartbeat comment if nothing is queued or being written; true if it did.
  bool queue_heartbeat();
  /// Ends the stream: no more sends, on_close(reason) runs once (on this
  /// thread; the first reason wins). Queued bytes stay for the writer, which
  /// then ends the response. Idempotent.
  void finish(std::string_view reason);
  const sse_options& options() const { return options_; }

private:
  void wake() const;

  /// Queues `bytes` (one item) or drops the client; the lock is not held.
  bool enqueue(std::string bytes);

  const sse_options options_;
  const std::weak_ptr<detail::sse_writer> writer_;
  const stream_body body_;

  mutable std::mutex mutex_;
  std::string queued_; ///< formatted, not yet handed to the writer
  size_t queued_events_ = 0;
  size_t inflight_bytes_ = 0; ///< handed to the writer, not yet written
  size_t inflight_events_ = 0;
  bool writing_ = false;
  bool closed_ = false;        ///< no more send()
  bool end_requested_ = false; ///< end the response once the queue is written
  bool dropped_ = false;       ///< overflowed; the writer has not finished it yet
  bool finished_ = false;      ///< on_close has been taken
  std::string end_reason_;     ///< reason when the writer ends it
  std::function<void()> drained_;
  std::function<void(std::string_view)> on_close_;
};

/// Formats one event: `event:`, `id:` (when not empty) and one `data:` line
/// per line of `data`, then a blank line. Exposed for tests.
std::string format_sse_event(std::string_view event, std::string_view data, std::string_view id);

} // namespace airlock::gateway
