#pragma once
// guest_client: the host's side of the guest channel over a connected fd,
// with a blocking, poll-based API. The worker wraps the codec in Asio; this
// class serves tests, benchmarks and tools. Single-threaded: one thread owns
// a client and calls it.
//
// Events the caller has not asked for yet (output of other streams while a
// file operation waits for its reply) are queued, bounded by
// client_options::pending_events_max; output can only pile up to each
// stream's credit window because credit is granted only when an output event
// is handed to the caller.

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <string_view>

#include "guest/frame.hpp"
#include "guest/protocol.hpp"
#include "schema/errc.hpp"
#include "schema/unique_fd.hpp"

namespace airlock::guest {

struct client_options {
  /// Largest frame accepted from the guest. Default: 1 MiB + 64 KiB, above the
  /// guest's default frame limit so that any legal guest frame passes.
  size_t frame_bytes_max = frame_bytes_max_default + size_t{64} * 1024;
  /// Events held while a blocking call waits for its own reply. Default: 4096.
  size_t pending_events_max = 4096;
  /// Grant output credit as output events are handed out. Off: the caller
  /// grants with grant(). Default: on.
  bool auto_credit = true;
};

/// What run() collected from one process.
struct run_result {
  int32_t exit_code = 0; ///< -1 when killed by a signal
  int32_t signal = 0;
  std::string out;
  std::string err;
};

class guest_client {
public:
  /// Takes the connected channel and makes it non-blocking.
  explicit guest_client(unique_fd channel, client_options options = {});

  /// Waits for the guest's hello. Must be called first.
  result<hello> handshake(int timeout_ms);
  const hello& peer() const noexcept { return hello_; }

  /// Sends a start; assigns a stream id when request.stream_id is 0. The
  /// outcome (started, or an error that ends the stream) arrives as an event.
  result<uint32_t> start(start_request request, int timeout_ms = 5000);

  /// Sends stdin as credit allows, waiting for stdin credit up to the timeout.
  status write_stdin(uint32_t stream, std::string_view bytes, int timeout_ms);
  status close_stdin(uint32_t stream, int timeout_ms = 5000);
  status signal(uint32_t stream, int signo, bool group = false, int timeout_ms = 5000);
  status resize(uint32_t stream, uint16_t rows, uint16_t cols, int timeout_ms = 5000);
  /// Grants output credit explicitly (needed only with auto_credit off).
  status grant(uint32_t stream, uint32_t bytes, int timeout_ms = 5000);
  /// With auto_credit: caps the output credit of `stream` so that the guest
  /// can never have sent more than `end_max` bytes of it in total (its window
  /// included); output handed out beyond the cap is granted back once a
  /// later call raises it. no_output_limit lifts the cap (the default). Lets
  /// a reader pace a process: the guest blocks the process, nothing is lost.
  /// Unknown (ended) streams are ignored.
  status limit_output(uint32_t stream, uint64_t end_max);
  static constexpr uint64_t no_output_limit = ~uint64_t{0};

  /// The next event: started, output, exited, error, file replies, pong,
  /// stats. Stdin credit is consumed internally. Fails with timeout when
  /// nothing arrived in time, unavailable when the guest closed the channel.
  result<guest_message> next_event(int timeout_ms);

  /// Starts `request`, sends `input` (then closes stdin when request.stdin_open)
  /// and collects output until the process exits. Output is taken only after
  /// all input was sent: for inputs larger than the stdin window plus what the
  /// process's pipes hold, drive the stream with write_stdin/next_event instead.
  result<run_result> run(start_request request, std::string_view input, int timeout_ms);

  /// Like run() without stdin, but counts output instead of keeping it: for
  /// throughput measurements. The exited event carries the byte counts.
  result<exited> run_discarding(start_request request, int timeout_ms);

  result<std::string> read_file(const std::string& path, int timeout_ms, uint64_t offset = 0,
                                uint64_t length = 0);
  /// Atomic write; returns the bytes written.
  result<uint64_t> write_file(const std::string& path, std::string_view data, int timeout_ms,
                              uint32_t mode = 0, bool create_parents = false);
  /// A write in parts: the guest writes a temporary file beside `path` and
  /// renames it over `path` only at write_close(commit), so a write that
  /// fails or is abandoned leaves the old file. Returns the write's id once
  /// the guest has opened the temporary file (a ping fences write_begin, so
  /// a path it refuses fails here, not at the end).
  result<uint32_t> write_open(const std::string& path, int timeout_ms, uint32_t mode = 0,
                              bool create_parents = false);
  /// Sends `data` to write `id` (in frames of the guest's chunk size). Fails
  /// with the guest's error when the write has already failed (the guest
  /// then forgets it: do not close it).
  status write_part(uint32_t id, std::string_view data, int timeout_ms);
  /// Ends write `id`: commits (returns the bytes written) or aborts (removes
  /// the temporary file).
  result<uint64_t> write_close(uint32_t id, bool abort, int timeout_ms);
  result<file_list> list(const std::string& path, int timeout_ms);
  result<file_info> stat(const std::string& path, int timeout_ms, bool follow = false);
  status mkdir(const std::string& path, int timeout_ms, uint32_t mode = 0, bool parents = false);
  status remove(const std::string& path, int timeout_ms, bool recursive = false);
  status rename(const std::string& from, const std::string& to, int timeout_ms);
  result<stats_reply> stats(int timeout_ms);
  /// Starts watching directory `path`; returns the watch's id once the guest
  /// watches it (its changes then arrive as watch_events from next_event,
  /// and an error_reply naming the watch when it ends). `watch_id` 0: one
  /// is chosen. Errors: the guest's (not_found, invalid_argument for a file,
  /// resource_exhausted at its limits).
  result<uint32_t> watch(const std::string& path, bool recursive, int timeout_ms,
                         uint32_t watch_id = 0);
  /// Stops a watch (no reply; events already sent may still arrive).
  status unwatch(uint32_t watch_id, int timeout_ms = 5000);
  /// After a restore from a memory snapshot (a new session on a new host
  /// socket; the agent said hello to the old one): hands the guest
  /// `entropy`, the wall clock `realtime_ns` (0: leave it) and `hostname`
  /// ("": keep), and `network`, eth0's new "ADDRESS/PREFIX,GATEWAY" ("":
  /// keep), and waits for its answer and its new hello (peer() then holds
  /// it; no handshake() needed). New streams get ids above those still open
  /// in the guest.
  result<refreshed> refresh(std::string entropy, int64_t realtime_ns, std::string hostname,
                            std::string network, int timeout_ms);
  /// Round trip of a ping, in microseconds.
  result<int64_t> ping(int timeout_ms);

  /// Sends one message / raw bytes (tests use it to break the protocol).
  status send(const host_message& message, int timeout_ms = 5000);
  status send_raw(std::string_view bytes, int timeout_ms = 5000);

  /// Total output bytes handed out to the caller, for benchmarks.
  uint64_t output_bytes_delivered() const noexcept { return output_delivered_; }

private:
  struct stream_credit {
    uint32_t window = 0;
    uint64_t consumed = 0; ///< output handed out, not yet granted back
    uint64_t stdin_credit = 0;
    uint64_t granted = 0;                   ///< output credit granted in total
    uint64_t granted_max = no_output_limit; ///< limit_output's cap on `granted`
  };

  status write_all(std::string_view bytes, int64_t deadline_ms);
  /// Reads whatever has arrived (waiting until the deadline for something)
  /// and queues decoded messages. Fails on timeout, close or a bad frame.
  status receive(int64_t deadline_ms);
  status read_available();
  void account(const guest_message& message);
  void consume(const guest_message& message);
  /// Grants what `s` has consumed, within its cap, a quarter window at a time.
  void grant_consumed(uint32_t stream, stream_credit& s);
  /// Waits for the first queued message that `match` accepts and removes it.
  template <class Match>
  result<guest_message> wait_for(Match&& match, int64_t deadline_ms);
  /// Waits for the message that answers request `request_id`; an error_reply
  /// comes back as its status.
  result<guest_message> reply_to(uint32_t request_id, int64_t deadline_ms);
  /// Sends `data` to open write `id` in chunks the guest accepts.
  status send_chunks(uint32_t id, std::string_view data, int64_t deadline_ms);
  /// Waits for file_done or an error answering request `id`.
  status await_done(uint32_t id, int64_t deadline_ms);
  /// Removes and returns an error answering request `id` that has already
  /// arrived; ok when none has.
  status take_error(uint32_t id);
  uint32_t next_request_id() { return ++last_request_id_; }

  unique_fd channel_;
  client_options options_;
  frame_reader inbound_;
  hello hello_;
  std::deque<guest_message> pending_;
  std::map<uint32_t, stream_credit> streams_;
  uint32_t last_stream_id_ = 0;
  uint32_t last_request_id_ = 0;
  uint32_t last_watch_id_ = 0;
  uint64_t last_nonce_ = 0;
  uint64_t output_delivered_ = 0;
  bool closed_ = false;
  std::string encode_buffer_;
  std::string read_buffer_;
};

} // namespace airlock::guest
