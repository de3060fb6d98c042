#include "guest/agent.hpp"
#include "guest/agent_state.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>

namespace airlock::guest {

namespace {

/// Bytes read from the channel per wake-up; frames larger than this arrive
/// over several wake-ups.
constexpr size_t channel_read_bytes = size_t{64} * 1024;
/// Compact the outbound buffer once this much has been sent from its front.
constexpr size_t outbound_compact_bytes = size_t{1024} * 1024;

} // namespace

status guest_agent::state::setup() {
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

hello guest_agent::state::make_hello() const {
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

void guest_agent::state::iterate() {
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

void guest_agent::state::add_poll(int fd, short events, poll_target target) {
  poll_fds.push_back(pollfd{fd, events, 0});
  poll_targets.push_back(target);
}

void guest_agent::state::build_poll_set() {
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
  // Like the channel: while the host does not take what is queued, changes
  // wait in the kernel's queue (which ends the watch when it overflows).
  if (outbound_bytes() <= options.outbound_pause_bytes)
    for (auto& [id, w] : watches)
      add_poll(w.fd.get(), POLLIN, {poll_kind::watch, id});
}

int guest_agent::state::poll_timeout_ms() const {
  if (!reads.empty() && outbound_bytes() < options.file_read_outbound_bytes)
    return 0;
  std::optional<int64_t> deadline;
  auto consider = [&deadline](int64_t at) { deadline = std::min(deadline.value_or(at), at); };
  if (shutting_down)
    consider(shutdown_deadline_ms);
  if (page_cache_trim_at_ms != 0)
    consider(page_cache_trim_at_ms);
  for (const auto& [id, p] : processes)
    if (p.reaped && p.outputs_open() && p.credit > 0)
      consider(p.drain_deadline_ms);
  if (!deadline)
    return -1;
  return static_cast<int>(std::clamp<int64_t>(*deadline - now_ms(), 0, 60'000));
}

void guest_agent::state::dispatch(const poll_target& target, short revents) {
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
    case poll_kind::watch: read_watch(target.stream); return;
  }
}

void guest_agent::state::ensure_scratch(size_t bytes) {
  if (scratch.size() < bytes)
    scratch.resize(bytes);
}

void guest_agent::state::note_appended(size_t before) {
  appended_total += outbound.size() - before;
  counters.frames_sent++;
  counters.outbound_bytes_max = std::max<uint64_t>(counters.outbound_bytes_max, outbound_bytes());
}

void guest_agent::state::send(const guest_message& message) {
  auto before = outbound.size();
  append_frame(outbound, message);
  note_appended(before);
}

void guest_agent::state::send_error(uint32_t stream, uint32_t request, const status& failure,
                                    bool ended) {
  send(error_reply{stream, request, failure.code, failure.message, ended});
}

void guest_agent::state::flush() {
  while (outbound_offset < outbound.size()) {
    auto n =
      ::write(channel.get(), outbound.data() + outbound_offset, outbound.size() - outbound_offset);
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

void guest_agent::state::release_marks() {
  while (!marks.empty() && marks.front().end <= written_total) {
    // A stream that ended may have been replaced by a new one with its id.
    auto it = processes.find(marks.front().stream);
    if (it != processes.end() && it->second.serial == marks.front().serial)
      it->second.buffered -= marks.front().bytes;
    marks.pop_front();
  }
}

void guest_agent::state::read_channel() {
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

void guest_agent::state::protocol_error(const status& failure) {
  send_error(0, 0, failure, true);
  exit_reason = agent_exit::protocol_error;
}

void guest_agent::state::on(const stats_request& m) {
  stats_reply s = counters;
  s.request_id = m.request_id;
  s.processes_running = static_cast<uint32_t>(pid_streams.size());
  s.open_streams = open_streams();
  s.outbound_bytes = outbound_bytes();
  send(s);
}

guest_agent::guest_agent(unique_fd channel, agent_options options)
    : state_(std::make_unique<state>(std::move(channel), std::move(options))) {}

guest_agent::~guest_agent() = default;

agent_exit guest_agent::run() {
  auto& s = *state_;
  if (auto ready = s.setup(); !ready.is_ok())
    return agent_exit::failed;
  s.send(s.make_hello());
  if (s.options.page_cache_trim_ms > 0)
    s.page_cache_trim_at_ms = now_ms() + s.options.page_cache_trim_ms;
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
      || o.stdin_window_bytes == 0 || o.streams_max == 0 || o.processes_max == 0
      || o.watches_max == 0 || o.watch_dirs_max == 0)
    return make_status(errc::invalid_argument, "limits must be positive");
  if (o.window_bytes > o.window_bytes_max)
    return make_status(errc::invalid_argument, "the default window exceeds the largest window");
  return status::ok();
}

} // namespace airlock::guest
