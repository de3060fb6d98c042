#pragma once
// The agent's state, shared by the files that implement it (internal to
// guest/: agent.cpp runs the loop and the channel, agent_processes.cpp the
// process streams, agent_files.cpp the file requests, agent_signals.cpp
// signals, reaping and shutdown). Not a public header.

#include <poll.h>
#include <sys/types.h>
#include <time.h>

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "guest/agent.hpp"
#include "guest/files.hpp"
#include "guest/protocol.hpp"
#include "schema/unique_fd.hpp"

namespace airlock::guest {

/// CLOCK_MONOTONIC in milliseconds: deadlines inside the agent.
inline int64_t now_ms() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

struct output_pipe {
  unique_fd fd;
  uint8_t number = 1;
  uint64_t offset = 0;
};

/// One started process and everything the agent holds for it.
struct process_stream {
  uint32_t id = 0;
  uint64_t serial = 0; ///< unique per agent: ids are reused, serials never
  pid_t pid = -1;
  bool pty = false;
  output_pipe out[2];
  unique_fd stdin_fd;
  bool stdin_open = false;
  bool stdin_close_requested = false;
  std::string stdin_pending; ///< at most stdin_window_bytes
  uint64_t credit = 0;
  uint32_t window = 0;
  uint64_t sequence = 0;
  uint64_t buffered = 0; ///< output read from the pipe, not yet written to the host
  uint64_t buffered_max = 0;
  bool reaped = false;
  int wait_status = 0;
  int64_t drain_deadline_ms = 0;
  bool outputs_open() const { return out[0].fd.valid() || out[1].fd.valid(); }
};

struct file_read_stream {
  unique_fd fd;
  uint64_t offset = 0;
  uint64_t remaining = 0;
};

/// Where an output frame ends in the outbound byte count, so that a stream's
/// buffered bytes drop when that frame has been written.
struct output_mark {
  uint64_t end = 0;
  uint64_t serial = 0;
  uint32_t stream = 0;
  uint32_t bytes = 0;
};

/// One directory watch (agent_watches.cpp). Each has its own inotify
/// descriptor, so that stopping it is one close and a queue overflow ends
/// it alone.
struct dir_watch {
  unique_fd fd;
  std::string root; ///< the watched directory, absolute
  bool recursive = false;
  int root_wd = -1;
  std::unordered_map<int, std::string> dirs; ///< watch descriptor -> path under root ("" is root)
};

enum class poll_kind : uint8_t { channel, signals, output, stdin_pipe, watch };

struct poll_target {
  poll_kind kind = poll_kind::channel;
  uint32_t stream = 0;
  int which = 0;
};

struct guest_agent::state {
  agent_options options;
  unique_fd channel;
  unique_fd signals;
  frame_reader inbound;
  std::string outbound;
  size_t outbound_offset = 0;
  uint64_t appended_total = 0;
  uint64_t written_total = 0;
  std::deque<output_mark> marks;
  std::map<uint32_t, process_stream> processes;
  std::unordered_map<pid_t, uint32_t> pid_streams; ///< started, not yet reaped
  std::map<uint32_t, file_read_stream> reads;
  std::map<uint32_t, atomic_writer> writes;
  std::deque<uint32_t> failed_writes;
  std::map<uint32_t, dir_watch> watches;
  std::string scratch;
  uint64_t write_counter = 0;
  stats_reply counters;
  bool shutting_down = false;
  bool killed = false;
  int64_t shutdown_deadline_ms = 0;
  int64_t page_cache_trim_at_ms = 0; ///< 0: done or never
  std::optional<agent_exit> exit_reason;
  std::vector<pollfd> poll_fds;
  std::vector<poll_target> poll_targets;

  // ---- setup, the loop and the channel (agent.cpp) ------------------------

  state(unique_fd fd, agent_options opts)
      : options(std::move(opts)), channel(std::move(fd)), inbound(options.frame_bytes_max) {}

  status setup();
  hello make_hello() const;
  void iterate();
  void add_poll(int fd, short events, poll_target target);
  void build_poll_set();
  int poll_timeout_ms() const;
  void dispatch(const poll_target& target, short revents);
  size_t outbound_bytes() const { return outbound.size() - outbound_offset; }

  /// Grown on first use: an idle agent should not hold a chunk's worth of memory.
  void ensure_scratch(size_t bytes);
  void note_appended(size_t before);
  void send(const guest_message& message);
  void send_error(uint32_t stream, uint32_t request, const status& failure, bool ended);
  void flush();
  void release_marks();
  void read_channel();

  /// The host broke the protocol: say why, then close the channel.
  void protocol_error(const status& failure);
  uint32_t open_streams() const {
    return static_cast<uint32_t>(processes.size() + reads.size() + writes.size());
  }

  void on(const ping_request& m) { send(pong{m.nonce}); }

  void on(const stats_request& m);
  /// Entropy, clock and hostname after a restore (agent_refresh.cpp).
  void on(const refresh_request& m);

  // ---- process streams (agent_processes.cpp) --------------------------------

  status admit_start(const start_request& m) const;
  void on(const start_request& m);
  process_stream* find_process(uint32_t id, const char* what);
  void on(const stdin_data& m);
  void on(const close_stdin& m);
  void write_stdin(process_stream& p);
  void on(const signal_request& m);
  void on(const resize_request& m);
  void on(const credit_grant& m);
  void read_output(process_stream& p, int which);

  /// Reports the exit once the process is reaped and its output has ended.
  void maybe_finish(uint32_t id);

  // ---- file requests (agent_files.cpp) --------------------------------------

  /// invalid_argument for a bad path, resource_exhausted when streams are full.
  status admit_request(uint32_t id, const std::string& path, bool opens_stream) const;
  void reply(uint32_t id, const status& outcome, uint64_t bytes = 0);
  void on(const file_read_request& m);

  /// Sends file chunks while the outbound buffer has room, round robin.
  void pump_reads();

  /// One chunk of a read; true when the read is over (eof or error).
  bool send_read_chunk(uint32_t id, file_read_stream& r);
  void on(const write_begin& m);
  void fail_write(uint32_t id, const status& failure);
  atomic_writer* find_write(uint32_t id);
  void on(const write_chunk& m);
  void on(const write_end& m);
  void on(const list_request& m);
  void on(const stat_request& m);
  void on(const mkdir_request& m);
  void on(const remove_request& m);
  void on(const rename_request& m);

  // ---- directory watches (agent_watches.cpp) --------------------------------

  void on(const watch_start& m);
  void on(const watch_stop& m);
  /// Reads what the kernel queued for watch `id` and reports it.
  void read_watch(uint32_t id);
  /// Reports why watch `id` ended and forgets it (its descriptor closes).
  void end_watch(uint32_t id, const status& why);
  /// Watches `rel` (under the watch's root) and, for a recursive watch, every
  /// directory below it; resource_exhausted past watch_dirs_max.
  status watch_tree(dir_watch& w, const std::string& rel);

  // ---- signals, reaping and shutdown (agent_signals.cpp) --------------------

  /// Kills what is left, reaps it and delivers the last messages, each bounded.
  void finish();
  void signal_all(int signo);
  void check_deadlines();
  void check_shutdown(int64_t now);
  void drain_signals();
  void begin_shutdown();
  void reap_children();
};

} // namespace airlock::guest
