#include "guest/agent_state.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "guest/process.hpp"

namespace airlock::guest {

namespace {

bool has_nul(std::string_view text) { return text.find('\0') != std::string_view::npos; }

status validate_start(const schema::exec_spec& m, size_t path_bytes_max) {
  if (!m.cwd.empty())
    if (auto cwd = check_path(m.cwd, path_bytes_max); !cwd.is_ok())
      return cwd;
  if (m.cmd.empty() && m.argv.empty())
    return make_status(errc::invalid_argument, "start needs argv or a shell line");
  if (has_nul(m.cmd) || std::any_of(m.argv.begin(), m.argv.end(), has_nul))
    return make_status(errc::invalid_argument, "an argument contains a NUL byte");
  for (const auto& [key, value] : m.env)
    if (key.empty() || key.find('=') != std::string::npos || has_nul(key) || has_nul(value))
      return make_status(errc::invalid_argument, "bad environment variable name: " + key);
  return status::ok();
}

} // namespace

status guest_agent::state::admit_start(const start_request& m) const {
  if (m.stream_id == 0)
    return make_status(errc::invalid_argument, "stream id 0 is reserved");
  if (shutting_down)
    return make_status(errc::unavailable, "the guest is shutting down");
  if (open_streams() >= options.streams_max)
    return make_status(errc::resource_exhausted,
                       "too many open streams (limit " + std::to_string(options.streams_max) + ")");
  if (pid_streams.size() >= options.processes_max)
    return make_status(errc::resource_exhausted, "too many running processes (limit "
                                                   + std::to_string(options.processes_max) + ")");
  return validate_start(m.process, options.path_bytes_max);
}

void guest_agent::state::on(const start_request& m) {
  if (processes.count(m.stream_id) != 0)
    return send_error(m.stream_id, 0,
                      make_status(errc::already_exists, "stream id is already open"), false);
  if (auto admitted = admit_start(m); !admitted.is_ok())
    return send_error(m.stream_id, 0, admitted, true);
  auto spawned = spawn_process(m.process, spawn_settings{options.pipe_bytes});
  if (!spawned)
    return send_error(m.stream_id, 0, spawned.error(), true);
  auto& p = processes[m.stream_id];
  p.id = m.stream_id;
  p.serial = counters.processes_started + 1;
  p.pid = spawned->pid;
  p.pty = m.process.pty;
  p.window =
    m.window_bytes == 0 ? options.window_bytes : std::min(m.window_bytes, options.window_bytes_max);
  p.credit = p.window;
  p.stdin_open = m.process.stdin_open;
  if (m.process.pty) {
    p.out[0].fd = std::move(spawned->pty_master);
    if (m.process.stdin_open)
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

process_stream* guest_agent::state::find_process(uint32_t id, const char* what) {
  auto it = processes.find(id);
  if (it != processes.end())
    return &it->second;
  send_error(
    id, 0,
    make_status(errc::not_found, std::string(what) + ": no open stream " + std::to_string(id)),
    false);
  return nullptr;
}

void guest_agent::state::on(const stdin_data& m) {
  auto* p = find_process(m.stream_id, "stdin");
  if (p == nullptr)
    return;
  if (!p->stdin_open || p->stdin_close_requested)
    return send_error(m.stream_id, 0,
                      make_status(errc::wrong_state, "the process's stdin is not open"), false);
  if (p->stdin_pending.size() + m.bytes.size() > options.stdin_window_bytes) {
    return send_error(m.stream_id, 0,
                      make_status(errc::resource_exhausted, "stdin sent beyond its credit"), false);
  }
  if (!p->stdin_fd) // the process closed its stdin: discard, but keep the host going
    return send(credit_grant{m.stream_id, static_cast<uint32_t>(m.bytes.size())});
  p->stdin_pending += m.bytes;
  write_stdin(*p);
}

void guest_agent::state::on(const close_stdin& m) {
  auto* p = find_process(m.stream_id, "close stdin");
  if (p == nullptr || p->stdin_close_requested)
    return;
  p->stdin_close_requested = true;
  if (p->pty && p->stdin_fd)
    p->stdin_pending.push_back('\x04'); // a terminal has no EOF but its EOF character
  write_stdin(*p);
}

void guest_agent::state::write_stdin(process_stream& p) {
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

void guest_agent::state::on(const signal_request& m) {
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

void guest_agent::state::on(const resize_request& m) {
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

void guest_agent::state::on(const credit_grant& m) {
  auto it = processes.find(m.stream_id);
  if (it == processes.end())
    return; // credit for a stream that just ended is normal, not an error
  auto& p = it->second;
  // The exit drain deadline counts time the agent could read and got nothing:
  // a host that held credit back (a paced reader) must not lose the tail.
  if (p.reaped && p.credit == 0 && m.bytes > 0)
    p.drain_deadline_ms = now_ms() + options.exit_drain_ms;
  // Capped: a host that over-grants must not make the agent hold more than a window.
  p.credit = std::min<uint64_t>(p.credit + m.bytes, p.window);
}

void guest_agent::state::read_output(process_stream& p, int which) {
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
  if (p.reaped) // still draining what the process left in the pipe
    p.drain_deadline_ms = now_ms() + options.exit_drain_ms;
  p.buffered += bytes;
  p.buffered_max = std::max(p.buffered_max, p.buffered);
  counters.stream_buffered_bytes_max = std::max(counters.stream_buffered_bytes_max, p.buffered_max);
}

void guest_agent::state::maybe_finish(uint32_t id) {
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

} // namespace airlock::guest
