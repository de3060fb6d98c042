#include "guest/agent.hpp"

#include <csignal>
#include <ctime>
#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <deque>
#include <map>
#include <optional>
#include <unordered_map>
#include <vector>

#include "guest/files.hpp"
#include "guest/process.hpp"
#include "guest/protocol.hpp"

namespace airlock::guest {

namespace {

/// Bytes read from the channel per wake-up; frames larger than this arrive
/// over several wake-ups.
constexpr size_t channel_read_bytes = size_t{64} * 1024;
/// Request ids of writes that failed at begin, whose later chunks are dropped
/// silently; older ones are forgotten.
constexpr size_t failed_writes_remembered = 64;
/// How long the agent tries to deliver its last messages, and to reap what it
/// killed, before it returns from run().
constexpr int final_flush_ms = 1000;
constexpr int final_reap_ms = 1000;
/// Compact the outbound buffer once this much has been sent from its front.
constexpr size_t outbound_compact_bytes = size_t{1024} * 1024;

int64_t now_ms() {
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

enum class poll_kind : uint8_t { channel, signals, output, stdin_pipe };

struct poll_target {
  poll_kind kind = poll_kind::channel;
  uint32_t stream = 0;
  int which = 0;
};

bool has_nul(std::string_view text) { return text.find('\0') != std::string_view::npos; }

status validate_start(const start_request& m, size_t path_bytes_max) {
  if (!m.cwd.empty())
    if (auto cwd = check_path(m.cwd, path_bytes_max); !cwd.is_ok())
      return cwd;
  if (m.shell.empty() && m.argv.empty())
    return make_status(errc::invalid_argument, "start needs argv or a shell line");
  if (has_nul(m.shell) || std::any_of(m.argv.begin(), m.argv.end(), has_nul))
    return make_status(errc::invalid_argument, "an argument contains a NUL byte");
  for (const auto& [key, value] : m.env)
    if (key.empty() || key.find('=') != std::string::npos || has_nul(key) || has_nul(value))
      return make_status(errc::invalid_argument, "bad environment variable name: " + key);
  return status::ok();
}

} // namespace

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
  std::string scratch;
  uint64_t write_counter = 0;
  stats_reply counters;
  bool shutting_down = false;
  bool killed = false;
  int64_t shutdown_deadline_ms = 0;
  std::optional<agent_exit> exit_reason;
  std::vector<pollfd> poll_fds;
  std::vector<poll_target> poll_targets;

  state(unique_fd fd, agent_options opts)
      : options(std::move(opts)), channel(std::move(fd)), inbound(options.frame_bytes_max) {}

  // ---- setup and teardown ----------------------------------------------------

  status setup() {
    ::signal(SIGPIPE, SIG_IGN);
    sigset_t mask;
    sigemptyset(&mask);
    for (int signo : {SIGCHLD, SIGTERM, SIGINT, SIGHUP})
      sigaddset(&mask, signo);
    if (::sigprocmask(SIG_BLOCK, &mask, nullptr) != 0)
      return errno_status(errno, "block signals");
    signals.reset(::signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC));
    if (!signals)
      return errno_status(errno, "create a signalfd");
    // Outside a sandbox the agent is not PID 1; becoming a subreaper gives it
    // the orphans all the same, so reaping behaves as it will in production.
    if (::getpid() != 1)
      ::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    int flags = ::fcntl(channel.get(), F_GETFL);
    if (flags < 0 || ::fcntl(channel.get(), F_SETFL, flags | O_NONBLOCK) != 0)
      return errno_status(errno, "make the channel non-blocking");
    ::fcntl(channel.get(), F_SETFD, FD_CLOEXEC);
    return status::ok();
  }

  hello make_hello() const {
    limits_info l;
    l.frame_bytes_max = static_cast<uint32_t>(options.frame_bytes_max);
    l.streams_max = options.streams_max;
    l.processes_max = options.processes_max;
    l.path_bytes_max = static_cast<uint32_t>(options.path_bytes_max);
    l.file_chunk_bytes = static_cast<uint32_t>(options.file_chunk_bytes);
    l.output_chunk_bytes = static_cast<uint32_t>(options.output_chunk_bytes);
    l.window_bytes = options.window_bytes;
    l.window_bytes_max = options.window_bytes_max;
    l.stdin_window_bytes = options.stdin_window_bytes;
    l.list_entries_max = options.list_entries_max;
    return hello{protocol_version, l, ::getpid(), options.agent_version};
  }

  /// Kills what is left, reaps it and delivers the last messages, each bounded.
  void finish() {
    if (exit_reason != agent_exit::terminated)
      signal_all(SIGKILL);
    auto deadline = now_ms() + final_reap_ms;
    while (!pid_streams.empty() && now_ms() < deadline) {
      pollfd p{signals.get(), POLLIN, 0};
      ::poll(&p, 1, static_cast<int>(std::max<int64_t>(1, deadline - now_ms())));
      drain_signals();
    }
    writes.clear();
    if (exit_reason == agent_exit::host_closed)
      return;
    deadline = now_ms() + final_flush_ms;
    while (channel && outbound_bytes() > 0 && now_ms() < deadline) {
      pollfd p{channel.get(), POLLOUT, 0};
      ::poll(&p, 1, static_cast<int>(std::max<int64_t>(1, deadline - now_ms())));
      flush();
    }
  }

  void signal_all(int signo) {
    for (const auto& [pid, stream] : pid_streams)
      if (::kill(-pid, signo) != 0)
        ::kill(pid, signo);
  }

  // ---- the loop --------------------------------------------------------------

  void iterate() {
    pump_reads();
    flush();
    build_poll_set();
    int ready = ::poll(poll_fds.data(), poll_fds.size(), poll_timeout_ms());
    if (ready < 0 && errno != EINTR) {
      exit_reason = agent_exit::failed;
      return;
    }
    for (size_t i = 0; i < poll_fds.size() && !exit_reason; ++i)
      if (poll_fds[i].revents != 0)
        dispatch(poll_targets[i], poll_fds[i].revents);
    check_deadlines();
  }

  void add_poll(int fd, short events, poll_target target) {
    poll_fds.push_back(pollfd{fd, events, 0});
    poll_targets.push_back(target);
  }

  void build_poll_set() {
    poll_fds.clear();
    poll_targets.clear();
    short channel_events = 0;
    if (outbound_bytes() <= options.outbound_pause_bytes)
      channel_events |= POLLIN;
    if (outbound_bytes() > 0)
      channel_events |= POLLOUT;
    add_poll(channel.get(), channel_events, {poll_kind::channel});
    add_poll(signals.get(), POLLIN, {poll_kind::signals});
    for (auto& [id, p] : processes) {
      // No credit, no read: the process blocks on a full pipe instead of the
      // agent buffering for it.
      for (int which = 0; which < 2; ++which)
        if (p.out[which].fd && p.credit > 0)
          add_poll(p.out[which].fd.get(), POLLIN, {poll_kind::output, id, which});
      if (p.stdin_fd && !p.stdin_pending.empty())
        add_poll(p.stdin_fd.get(), POLLOUT, {poll_kind::stdin_pipe, id});
    }
  }

  int poll_timeout_ms() const {
    if (!reads.empty() && outbound_bytes() < options.file_read_outbound_bytes)
      return 0;
    std::optional<int64_t> deadline;
    auto consider = [&deadline](int64_t at) { deadline = std::min(deadline.value_or(at), at); };
    if (shutting_down)
      consider(shutdown_deadline_ms);
    for (const auto& [id, p] : processes)
      if (p.reaped && p.outputs_open() && p.credit > 0)
        consider(p.drain_deadline_ms);
    if (!deadline)
      return -1;
    return static_cast<int>(std::clamp<int64_t>(*deadline - now_ms(), 0, 60'000));
  }

  void dispatch(const poll_target& target, short revents) {
    switch (target.kind) {
      case poll_kind::channel:
        if (revents & POLLOUT)
          flush();
        if (revents & (POLLIN | POLLHUP | POLLERR))
          read_channel();
        return;
      case poll_kind::signals: drain_signals(); return;
      case poll_kind::output: {
        auto it = processes.find(target.stream);
        if (it != processes.end())
          read_output(it->second, target.which);
        return;
      }
      case poll_kind::stdin_pipe: {
        auto it = processes.find(target.stream);
        if (it != processes.end())
          write_stdin(it->second);
        return;
      }
    }
  }

  void check_deadlines() {
    auto now = now_ms();
    if (shutting_down)
      check_shutdown(now);
    std::vector<uint32_t> due;
    for (const auto& [id, p] : processes)
      if (p.reaped && p.outputs_open() && p.credit > 0 && now >= p.drain_deadline_ms)
        due.push_back(id);
    // A descendant still holds the output open: stop waiting for it.
    for (auto id : due) {
      auto& p = processes.at(id);
      p.out[0].fd.reset();
      p.out[1].fd.reset();
      maybe_finish(id);
    }
  }

  void check_shutdown(int64_t now) {
    if (pid_streams.empty() && processes.empty()) {
      exit_reason = agent_exit::terminated;
      return;
    }
    if (now < shutdown_deadline_ms)
      return;
    if (killed) {
      exit_reason = agent_exit::terminated; // what is still alive ignores SIGKILL; give up
      return;
    }
    signal_all(SIGKILL);
    if (::getpid() == 1)
      ::kill(-1, SIGKILL);
    killed = true;
    shutdown_deadline_ms = now + options.shutdown_grace_ms;
  }

  // ---- the channel -------------------------------------------------------------

  size_t outbound_bytes() const { return outbound.size() - outbound_offset; }

  /// Grown on first use: an idle agent should not hold a chunk's worth of memory.
  void ensure_scratch(size_t bytes) {
    if (scratch.size() < bytes)
      scratch.resize(bytes);
  }

  void note_appended(size_t before) {
    appended_total += outbound.size() - before;
    counters.frames_sent++;
    counters.outbound_bytes_max = std::max<uint64_t>(counters.outbound_bytes_max, outbound_bytes());
  }

  void send(const guest_message& message) {
    auto before = outbound.size();
    append_frame(outbound, message);
    note_appended(before);
  }

  void send_error(uint32_t stream, uint32_t request, const status& failure, bool ended) {
    send(error_reply{stream, request, failure.code, failure.message, ended});
  }

  void flush() {
    while (outbound_offset < outbound.size()) {
      auto n = ::write(channel.get(), outbound.data() + outbound_offset,
                       outbound.size() - outbound_offset);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        break;
      if (n <= 0) {
        exit_reason = exit_reason.value_or(agent_exit::host_closed);
        outbound.clear();
        outbound_offset = 0;
        return;
      }
      outbound_offset += static_cast<size_t>(n);
      written_total += static_cast<uint64_t>(n);
    }
    release_marks();
    if (outbound_offset == outbound.size()) {
      outbound.clear();
      outbound_offset = 0;
    } else if (outbound_offset >= outbound_compact_bytes && outbound_offset > outbound.size() / 2) {
      outbound.erase(0, outbound_offset);
      outbound_offset = 0;
    }
  }

  void release_marks() {
    while (!marks.empty() && marks.front().end <= written_total) {
      // A stream that ended may have been replaced by a new one with its id.
      auto it = processes.find(marks.front().stream);
      if (it != processes.end() && it->second.serial == marks.front().serial)
        it->second.buffered -= marks.front().bytes;
      marks.pop_front();
    }
  }

  void read_channel() {
    char buffer[channel_read_bytes];
    ssize_t n;
    do {
      n = ::read(channel.get(), buffer, sizeof buffer);
    } while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      return;
    if (n <= 0) {
      exit_reason = agent_exit::host_closed;
      return;
    }
    if (auto fed = inbound.feed({buffer, static_cast<size_t>(n)}); !fed.is_ok())
      return protocol_error(fed);
    while (!exit_reason) {
      auto frame = inbound.next();
      if (!frame)
        break;
      counters.frames_received++;
      auto message = decode_host_message(*frame);
      if (message.code() == errc::unsupported_version) {
        send_error(0, 0, message.error(), false);
        continue;
      }
      if (!message)
        return protocol_error(message.error());
      std::visit([this](const auto& m) { on(m); }, *message);
    }
  }

  /// The host broke the protocol: say why, then close the channel.
  void protocol_error(const status& failure) {
    send_error(0, 0, failure, true);
    exit_reason = agent_exit::protocol_error;
  }

  // ---- processes ---------------------------------------------------------------

  uint32_t open_streams() const {
    return static_cast<uint32_t>(processes.size() + reads.size() + writes.size());
  }

  status admit_start(const start_request& m) const {
    if (m.stream_id == 0)
      return make_status(errc::invalid_argument, "stream id 0 is reserved");
    if (shutting_down)
      return make_status(errc::unavailable, "the guest is shutting down");
    if (open_streams() >= options.streams_max)
      return make_status(errc::resource_exhausted, "too many open streams (limit "
                                                     + std::to_string(options.streams_max) + ")");
    if (pid_streams.size() >= options.processes_max)
      return make_status(errc::resource_exhausted, "too many running processes (limit "
                                                     + std::to_string(options.processes_max) + ")");
    return validate_start(m, options.path_bytes_max);
  }

  void on(const start_request& m) {
    if (processes.count(m.stream_id) != 0)
      return send_error(m.stream_id, 0,
                        make_status(errc::already_exists, "stream id is already open"), false);
    if (auto admitted = admit_start(m); !admitted.is_ok())
      return send_error(m.stream_id, 0, admitted, true);
    auto spawned = spawn_process(m, spawn_settings{options.pipe_bytes});
    if (!spawned)
      return send_error(m.stream_id, 0, spawned.error(), true);
    auto& p = processes[m.stream_id];
    p.id = m.stream_id;
    p.serial = counters.processes_started + 1;
    p.pid = spawned->pid;
    p.pty = m.pty;
    p.window = m.window_bytes == 0 ? options.window_bytes
                                   : std::min(m.window_bytes, options.window_bytes_max);
    p.credit = p.window;
    p.stdin_open = m.stdin_open;
    if (m.pty) {
      p.out[0].fd = std::move(spawned->pty_master);
      if (m.stdin_open)
        p.stdin_fd.reset(::fcntl(p.out[0].fd.get(), F_DUPFD_CLOEXEC, 0));
    } else {
      p.out[0].fd = std::move(spawned->stdout_fd);
      p.out[1].fd = std::move(spawned->stderr_fd);
      p.stdin_fd = std::move(spawned->stdin_fd);
    }
    p.out[1].number = 2;
    pid_streams[p.pid] = p.id;
    counters.processes_started++;
    send(started{p.id, p.pid, spawned->pty_path});
  }

  process_stream* find_process(uint32_t id, const char* what) {
    auto it = processes.find(id);
    if (it != processes.end())
      return &it->second;
    send_error(
      id, 0,
      make_status(errc::not_found, std::string(what) + ": no open stream " + std::to_string(id)),
      false);
    return nullptr;
  }

  void on(const stdin_data& m) {
    auto* p = find_process(m.stream_id, "stdin");
    if (p == nullptr)
      return;
    if (!p->stdin_open || p->stdin_close_requested)
      return send_error(m.stream_id, 0,
                        make_status(errc::wrong_state, "the process's stdin is not open"), false);
    if (p->stdin_pending.size() + m.bytes.size() > options.stdin_window_bytes) {
      return send_error(m.stream_id, 0,
                        make_status(errc::resource_exhausted, "stdin sent beyond its credit"),
                        false);
    }
    if (!p->stdin_fd) // the process closed its stdin: discard, but keep the host going
      return send(credit_grant{m.stream_id, static_cast<uint32_t>(m.bytes.size())});
    p->stdin_pending += m.bytes;
    write_stdin(*p);
  }

  void on(const close_stdin& m) {
    auto* p = find_process(m.stream_id, "close stdin");
    if (p == nullptr || p->stdin_close_requested)
      return;
    p->stdin_close_requested = true;
    if (p->pty && p->stdin_fd)
      p->stdin_pending.push_back('\x04'); // a terminal has no EOF but its EOF character
    write_stdin(*p);
  }

  void write_stdin(process_stream& p) {
    uint64_t written = 0;
    while (p.stdin_fd && !p.stdin_pending.empty()) {
      auto n = ::write(p.stdin_fd.get(), p.stdin_pending.data(), p.stdin_pending.size());
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        break;
      if (n < 0) { // EPIPE: the reader is gone; what is pending can never be delivered
        written += p.stdin_pending.size();
        p.stdin_pending.clear();
        p.stdin_fd.reset();
        break;
      }
      p.stdin_pending.erase(0, static_cast<size_t>(n));
      written += static_cast<uint64_t>(n);
    }
    if (p.pty && written > 0 && p.stdin_close_requested && p.stdin_pending.empty())
      written -= 1; // the EOF character was ours, not the host's
    if (written > 0)
      send(credit_grant{p.id, static_cast<uint32_t>(written)});
    if (p.stdin_close_requested && p.stdin_pending.empty())
      p.stdin_fd.reset();
  }

  void on(const signal_request& m) {
    auto* p = find_process(m.stream_id, "signal");
    if (p == nullptr)
      return;
    if (m.signo <= 0 || m.signo >= NSIG) {
      return send_error(
        m.stream_id, 0,
        make_status(errc::invalid_argument, "no such signal: " + std::to_string(m.signo)), false);
    }
    if (p->reaped)
      return; // its pid may already belong to someone else
    ::kill(m.group ? -p->pid : p->pid, m.signo);
  }

  void on(const resize_request& m) {
    auto* p = find_process(m.stream_id, "resize");
    if (p == nullptr)
      return;
    if (!p->pty)
      return send_error(m.stream_id, 0,
                        make_status(errc::invalid_argument, "the process has no terminal"), false);
    if (p->out[0].fd)
      if (auto sized = set_window_size(p->out[0].fd.get(), m.rows, m.cols); !sized.is_ok())
        send_error(m.stream_id, 0, sized, false);
  }

  void on(const credit_grant& m) {
    auto it = processes.find(m.stream_id);
    if (it == processes.end())
      return; // credit for a stream that just ended is normal, not an error
    auto& p = it->second;
    // Capped: a host that over-grants must not make the agent hold more than a window.
    p.credit = std::min<uint64_t>(p.credit + m.bytes, p.window);
  }

  void read_output(process_stream& p, int which) {
    auto& pipe = p.out[which];
    auto want = std::min<uint64_t>(p.credit, options.output_chunk_bytes);
    if (!pipe.fd || want == 0)
      return;
    ensure_scratch(options.output_chunk_bytes);
    ssize_t n;
    do {
      n = ::read(pipe.fd.get(), scratch.data(), want);
    } while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      return;
    if (n <= 0) { // EOF, or EIO from a terminal whose last slave closed
      pipe.fd.reset();
      return maybe_finish(p.id);
    }
    auto bytes = static_cast<uint64_t>(n);
    auto before = outbound.size();
    append_output_frame(outbound, p.id, pipe.number, p.sequence++, pipe.offset,
                        {scratch.data(), static_cast<size_t>(n)});
    note_appended(before);
    marks.push_back(output_mark{appended_total, p.serial, p.id, static_cast<uint32_t>(bytes)});
    pipe.offset += bytes;
    p.credit -= bytes;
    p.buffered += bytes;
    p.buffered_max = std::max(p.buffered_max, p.buffered);
    counters.stream_buffered_bytes_max =
      std::max(counters.stream_buffered_bytes_max, p.buffered_max);
  }

  /// Reports the exit once the process is reaped and its output has ended.
  void maybe_finish(uint32_t id) {
    auto it = processes.find(id);
    if (it == processes.end() || !it->second.reaped || it->second.outputs_open())
      return;
    auto& p = it->second;
    exited e;
    e.stream_id = id;
    if (WIFSIGNALED(p.wait_status)) {
      e.exit_code = -1;
      e.signal = WTERMSIG(p.wait_status);
    } else {
      e.exit_code = WEXITSTATUS(p.wait_status);
    }
    e.stdout_bytes = p.out[0].offset;
    e.stderr_bytes = p.out[1].offset;
    e.buffered_bytes_max = p.buffered_max;
    processes.erase(it);
    send(e);
  }

  void drain_signals() {
    signalfd_siginfo info{};
    while (::read(signals.get(), &info, sizeof info) == sizeof info) {
      if ((info.ssi_signo == SIGTERM || info.ssi_signo == SIGINT) && !shutting_down)
        begin_shutdown();
    }
    reap_children();
  }

  void begin_shutdown() {
    shutting_down = true;
    shutdown_deadline_ms = now_ms() + options.shutdown_grace_ms;
    signal_all(SIGTERM);
  }

  void reap_children() {
    for (;;) {
      int wait_status = 0;
      pid_t pid = ::waitpid(-1, &wait_status, WNOHANG);
      if (pid <= 0)
        return;
      counters.reaped_total++;
      auto it = pid_streams.find(pid);
      if (it == pid_streams.end()) {
        counters.orphans_reaped++;
        continue;
      }
      auto id = it->second;
      pid_streams.erase(it);
      auto& p = processes.at(id);
      p.reaped = true;
      p.wait_status = wait_status;
      p.drain_deadline_ms = now_ms() + options.exit_drain_ms;
      maybe_finish(id);
    }
  }

  // ---- files -------------------------------------------------------------------

  /// invalid_argument for a bad path, resource_exhausted when streams are full.
  status admit_request(uint32_t id, const std::string& path, bool opens_stream) const {
    if (id == 0)
      return make_status(errc::invalid_argument, "request id 0 is reserved");
    if (opens_stream && (reads.count(id) != 0 || writes.count(id) != 0))
      return make_status(errc::already_exists, "request id is already open");
    if (opens_stream && open_streams() >= options.streams_max)
      return make_status(errc::resource_exhausted, "too many open streams (limit "
                                                     + std::to_string(options.streams_max) + ")");
    return check_path(path, options.path_bytes_max);
  }

  void reply(uint32_t id, const status& outcome, uint64_t bytes = 0) {
    if (outcome.is_ok())
      send(file_done{id, bytes});
    else
      send_error(0, id, outcome, true);
  }

  void on(const file_read_request& m) {
    if (auto ok = admit_request(m.request_id, m.path, true); !ok.is_ok())
      return send_error(0, m.request_id, ok, true);
    auto fd = open_for_read(m.path);
    if (!fd)
      return send_error(0, m.request_id, fd.error(), true);
    struct stat st {};
    uint64_t file_bytes = ::fstat(fd->get(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
    uint64_t available = file_bytes > m.offset ? file_bytes - m.offset : 0;
    auto& r = reads[m.request_id];
    r.fd = std::move(*fd);
    r.offset = m.offset;
    r.remaining = m.length == 0 ? available : std::min(m.length, available);
  }

  /// Sends file chunks while the outbound buffer has room, round robin.
  void pump_reads() {
    bool progress = true;
    while (progress && !reads.empty() && outbound_bytes() < options.file_read_outbound_bytes) {
      progress = false;
      for (auto it = reads.begin(); it != reads.end();) {
        if (outbound_bytes() >= options.file_read_outbound_bytes)
          return;
        bool done = send_read_chunk(it->first, it->second);
        it = done ? reads.erase(it) : std::next(it);
        progress = true;
      }
    }
  }

  /// One chunk of a read; true when the read is over (eof or error).
  bool send_read_chunk(uint32_t id, file_read_stream& r) {
    auto want = static_cast<size_t>(std::min<uint64_t>(options.file_chunk_bytes, r.remaining));
    ensure_scratch(want);
    ssize_t n = 0;
    if (want > 0) {
      do {
        n = ::pread(r.fd.get(), scratch.data(), want, static_cast<off_t>(r.offset));
      } while (n < 0 && errno == EINTR);
    }
    if (n < 0) {
      send_error(0, id, errno_status(errno, "read"), true);
      return true;
    }
    auto got = static_cast<uint64_t>(n);
    bool eof = n == 0 || got >= r.remaining; // a file that shrank ends early
    send(file_data{id, r.offset, std::string(scratch.data(), got), eof});
    r.offset += got;
    r.remaining -= std::min(got, r.remaining);
    return eof;
  }

  void on(const write_begin& m) {
    if (auto ok = admit_request(m.request_id, m.path, true); !ok.is_ok())
      return fail_write(m.request_id, ok);
    auto writer = atomic_writer::begin(m.path, m.mode, m.create_parents, ++write_counter);
    if (!writer)
      return fail_write(m.request_id, writer.error());
    writes.emplace(m.request_id, std::move(*writer));
  }

  void fail_write(uint32_t id, const status& failure) {
    send_error(0, id, failure, true);
    failed_writes.push_back(id);
    if (failed_writes.size() > failed_writes_remembered)
      failed_writes.pop_front();
  }

  atomic_writer* find_write(uint32_t id) {
    auto it = writes.find(id);
    if (it != writes.end())
      return &it->second;
    if (std::find(failed_writes.begin(), failed_writes.end(), id) == failed_writes.end())
      send_error(0, id, make_status(errc::not_found, "no write in progress with this id"), true);
    return nullptr;
  }

  void on(const write_chunk& m) {
    auto* writer = find_write(m.request_id);
    if (writer == nullptr)
      return;
    if (auto wrote = writer->write(m.bytes); !wrote.is_ok()) {
      writes.erase(m.request_id);
      fail_write(m.request_id, wrote);
    }
  }

  void on(const write_end& m) {
    auto* writer = find_write(m.request_id);
    if (writer == nullptr)
      return;
    auto outcome = m.abort ? (writer->abort(), status::ok()) : writer->commit();
    auto bytes = writer->bytes_written();
    writes.erase(m.request_id);
    if (outcome.is_ok())
      return reply(m.request_id, outcome, bytes);
    fail_write(m.request_id, outcome);
  }

  void on(const list_request& m) {
    if (auto ok = admit_request(m.request_id, m.path, false); !ok.is_ok())
      return send_error(0, m.request_id, ok, true);
    // Names are most of a reply; half a frame leaves room for the rest.
    auto listing = list_dir(m.path, options.list_entries_max, options.frame_bytes_max / 2);
    if (!listing)
      return send_error(0, m.request_id, listing.error(), true);
    send(file_list{m.request_id, std::move(listing->entries), listing->truncated});
  }

  void on(const stat_request& m) {
    if (auto ok = admit_request(m.request_id, m.path, false); !ok.is_ok())
      return send_error(0, m.request_id, ok, true);
    auto info = stat_path(m.path, m.follow_symlinks);
    if (!info)
      return send_error(0, m.request_id, info.error(), true);
    send(file_stat{m.request_id, std::move(*info)});
  }

  void on(const mkdir_request& m) {
    if (auto ok = admit_request(m.request_id, m.path, false); !ok.is_ok())
      return send_error(0, m.request_id, ok, true);
    reply(m.request_id, make_dirs(m.path, m.mode, m.parents));
  }

  void on(const remove_request& m) {
    if (auto ok = admit_request(m.request_id, m.path, false); !ok.is_ok())
      return send_error(0, m.request_id, ok, true);
    reply(m.request_id, remove_path(m.path, m.recursive, options.remove_depth_max));
  }

  void on(const rename_request& m) {
    if (auto ok = admit_request(m.request_id, m.from, false); !ok.is_ok())
      return send_error(0, m.request_id, ok, true);
    if (auto ok = check_path(m.to, options.path_bytes_max); !ok.is_ok())
      return send_error(0, m.request_id, ok, true);
    reply(m.request_id, rename_path(m.from, m.to));
  }

  void on(const ping_request& m) { send(pong{m.nonce}); }

  void on(const stats_request& m) {
    stats_reply s = counters;
    s.request_id = m.request_id;
    s.processes_running = static_cast<uint32_t>(pid_streams.size());
    s.open_streams = open_streams();
    s.outbound_bytes = outbound_bytes();
    send(s);
  }
};

guest_agent::guest_agent(unique_fd channel, agent_options options)
    : state_(std::make_unique<state>(std::move(channel), std::move(options))) {}

guest_agent::~guest_agent() = default;

agent_exit guest_agent::run() {
  auto& s = *state_;
  if (auto ready = s.setup(); !ready.is_ok())
    return agent_exit::failed;
  s.send(s.make_hello());
  while (!s.exit_reason)
    s.iterate();
  s.finish();
  return *s.exit_reason;
}

status check_options(const agent_options& o) {
  // Room for the envelope around a chunk's bytes.
  constexpr size_t envelope_bytes = 1024;
  if (o.frame_bytes_max < 4096 || o.frame_bytes_max > (64u << 20))
    return make_status(errc::invalid_argument, "frame limit must be within 4 KiB..64 MiB");
  if (o.output_chunk_bytes + envelope_bytes > o.frame_bytes_max
      || o.file_chunk_bytes + envelope_bytes > o.frame_bytes_max)
    return make_status(errc::invalid_argument, "a chunk must fit in a frame");
  if (o.output_chunk_bytes == 0 || o.file_chunk_bytes == 0 || o.window_bytes == 0
      || o.stdin_window_bytes == 0 || o.streams_max == 0 || o.processes_max == 0)
    return make_status(errc::invalid_argument, "limits must be positive");
  if (o.window_bytes > o.window_bytes_max)
    return make_status(errc::invalid_argument, "the default window exceeds the largest window");
  return status::ok();
}

} // namespace airlock::guest
