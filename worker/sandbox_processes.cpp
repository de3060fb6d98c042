// The sandbox actor's process table: exec, the guest's events about its
// processes, stream-directed calls (stdin, signal, resize), exec timeouts and
// output pacing (the guest's credit follows the combined-stream reader).

#include <caf/send.hpp>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "actors/errors.hpp"
#include "worker/sandbox_state.hpp"

namespace airlock::worker::sandbox_detail {

process_entry* find_process(self_ptr self, const std::string& id) {
  auto it = self->state.processes.find(id);
  return it == self->state.processes.end() ? nullptr : &it->second;
}

status unknown_process(const std::string& id) {
  return make_status(errc::not_found, "no process " + id
                                        + " in this sandbox (finished processes are forgotten "
                                          "oldest first beyond the table's bound)");
}

bool has_ended(const process_entry& proc) {
  return proc.info.state == process_state::exited || proc.info.state == process_state::failed;
}

namespace {

/// Makes room in the process table: forgets the oldest finished process.
bool make_room(self_ptr self) {
  auto& st = self->state;
  if (st.processes.size() < st.options.processes_max)
    return true;
  for (auto it = st.process_order.begin(); it != st.process_order.end(); ++it) {
    auto found = st.processes.find(*it);
    if (found == st.processes.end()) {
      st.process_order.erase(it);
      return make_room(self);
    }
    const auto state = found->second.info.state;
    if (state == process_state::exited || state == process_state::failed) {
      st.by_stream.erase(found->second.stream);
      st.processes.erase(found);
      st.process_order.erase(it);
      return true;
    }
  }
  return false;
}

void on_started(self_ptr self, const guest::started& msg) {
  auto& st = self->state;
  auto id = st.by_stream.find(msg.stream_id);
  if (id == st.by_stream.end())
    return;
  if (auto* proc = find_process(self, id->second)) {
    proc->info.state = process_state::running;
    proc->info.pid = msg.pid;
    if (proc->timeout_ms > 0)
      self->delayed_send(self, std::chrono::milliseconds(proc->timeout_ms), sbx_kill_atom::value,
                         id->second);
  }
  if (auto pending = st.pending_exec.find(msg.stream_id); pending != st.pending_exec.end()) {
    pending->second.promise.deliver(id->second);
    st.pending_exec.erase(pending);
  }
}

void on_exited(self_ptr self, const guest::exited& msg) {
  auto& st = self->state;
  auto id = st.by_stream.find(msg.stream_id);
  if (id == st.by_stream.end())
    return;
  if (auto* proc = find_process(self, id->second)) {
    proc->info.state = process_state::exited;
    proc->info.exit_code = msg.exit_code;
    proc->info.signal = msg.signal;
    proc->info.ended_at_ms = now_ms(self);
  }
  wake_readers(self, id->second);
}

void on_output(self_ptr self, const guest::output_chunk& msg) {
  auto& st = self->state;
  if (st.link)
    st.link->consumed(msg.bytes.size());
  auto id = st.by_stream.find(msg.stream_id);
  if (id == st.by_stream.end())
    return;
  if (auto* proc = find_process(self, id->second)) {
    proc->log.append(msg.fd, msg.bytes);
    if (msg.fd == 2)
      proc->info.stderr_bytes += msg.bytes.size();
    else
      proc->info.stdout_bytes += msg.bytes.size();
  }
  wake_readers(self, id->second);
}

void on_error(self_ptr self, const guest::error_reply& msg) {
  auto& st = self->state;
  const status failure = make_status(msg.code, msg.message);
  if (msg.stream_id == 0 && msg.request_id == 0) { // the channel itself
    if (msg.code == errc::unavailable) {
      st.channel_closed = true;
      for (auto& [stream, pending] : st.pending_exec)
        deliver_status(pending.promise, failure);
      st.pending_exec.clear();
      for (auto& [pid, proc] : st.processes) {
        if (has_ended(proc))
          continue;
        // The guest kills what it started when it goes (docs/guest-protocol.md).
        const bool started = proc.info.state == process_state::running;
        proc.info.state = process_state::failed;
        proc.info.exit_code = started ? -1 : 127;
        proc.info.signal = started ? SIGKILL : 0;
        proc.info.error = failure.message;
        proc.info.ended_at_ms = now_ms(self);
      }
      std::vector<std::string> ids;
      for (const auto& [pid, proc] : st.processes)
        ids.push_back(pid);
      for (const auto& pid : ids)
        wake_readers(self, pid);
      fail_all_readers(self, failure);
    }
    return;
  }
  if (msg.stream_id == 0 && on_write_error(self, msg))
    return;
  auto id = st.by_stream.find(msg.stream_id);
  if (id == st.by_stream.end() || !msg.ended)
    return;
  if (auto* proc = find_process(self, id->second);
      proc != nullptr && proc->info.state != process_state::exited) {
    if (proc->info.state == process_state::starting)
      proc->info.exit_code = 127; // what a shell reports for a program it cannot run
    proc->info.state = process_state::failed;
    proc->info.error = msg.message;
    proc->info.ended_at_ms = now_ms(self);
  }
  if (auto pending = st.pending_exec.find(msg.stream_id); pending != st.pending_exec.end()) {
    const bool cannot_run = msg.code == errc::not_found || msg.code == errc::permission_denied
                            || msg.code == errc::io_error;
    if (pending->second.report_start_failure && cannot_run)
      pending->second.promise.deliver(pending->second.process_id);
    else
      deliver_status(pending->second.promise, failure);
    st.pending_exec.erase(pending);
  }
  wake_readers(self, id->second);
}

/// Posts the output cap of `proc` to the link (a cap of no_output_limit lifts
/// it). Remembered only once posted, so a full job queue is retried later.
void post_output_cap(self_ptr self, process_entry& proc, uint64_t cap) {
  auto& st = self->state;
  if (!st.link || st.channel_closed)
    return;
  const uint32_t stream = proc.stream;
  auto posted = st.link->post([stream, cap](guest::guest_client& client) {
    (void)client.limit_output(stream, cap); // never fails: a gone stream is ignored
  });
  if (!posted)
    return;
  proc.paced = cap != guest::guest_client::no_output_limit;
  proc.output_cap = cap;
}

void arm_pace_timer(self_ptr self, process_entry& proc, int64_t delay_ms) {
  if (proc.pace_timer)
    return;
  proc.pace_timer = true;
  self->delayed_send(self, std::chrono::milliseconds(std::max<int64_t>(delay_ms, 1)),
                     sbx_pace_atom::value, proc.info.process_id);
}

} // namespace

/// A combined-stream read of `proc` from `offset` arrived: the reader is
/// active; raise the cap as it advances, in steps of a sixteenth of the buffer
/// (64 KiB, one SSE read, at the default) so that a reader taking small reads
/// does not post a job per read. Quarter-buffer steps made the producer wait
/// in larger bursts: SSE throughput was about 25 % lower (api_bench).
void on_reader(self_ptr self, process_entry& proc, uint64_t offset) {
  const auto& options = self->state.options;
  if (options.reader_idle_ms == 0 || has_ended(proc))
    return;
  proc.reader_until_ms = now_ms(self) + options.reader_idle_ms;
  proc.read_offset = std::max(proc.read_offset, std::min(offset, proc.log.end_offset()));
  const uint64_t cap = proc.read_offset + options.output_buffer_bytes;
  if (!proc.paced || cap >= proc.output_cap + options.output_buffer_bytes / 16)
    post_output_cap(self, proc, cap);
  arm_pace_timer(self, proc, options.reader_idle_ms);
}

/// The pace timer of process `id` fired: lifts the cap once its reader went
/// away (no read for reader_idle_ms and none waiting), else checks again.
void on_pace_check(self_ptr self, const std::string& id) {
  auto* proc = find_process(self, id);
  if (proc == nullptr)
    return;
  proc->pace_timer = false;
  if (!proc->paced || has_ended(*proc))
    return;
  const bool waiting =
    std::any_of(self->state.outputs.begin(), self->state.outputs.end(),
                [&id](const auto& w) { return w.second.request.process_id == id; });
  const int64_t now = now_ms(self);
  if (waiting)
    proc->reader_until_ms = now + self->state.options.reader_idle_ms;
  if (now < proc->reader_until_ms) {
    arm_pace_timer(self, *proc, proc->reader_until_ms - now);
    return;
  }
  post_output_cap(self, *proc, guest::guest_client::no_output_limit);
  if (proc->paced) // the link's queue was full: try again soon
    arm_pace_timer(self, *proc, 100);
}

caf::result<std::string> handle_exec(self_ptr self, const exec_spec& request) {
  auto& st = self->state;
  if (st.paused)
    return make_error(errc::wrong_state, "sandbox " + st.parts.id + " is paused; resume it first");
  if (request.argv.empty() == request.cmd.empty())
    return make_error(errc::invalid_argument, "give exactly one of argv and cmd");
  if (!make_room(self)) {
    return make_error(errc::resource_exhausted,
                      "all " + std::to_string(st.options.processes_max)
                        + " processes of the table are running; wait for one to end");
  }
  const std::string id = "proc_" + std::to_string(++st.next_process);
  auto promise = self->make_response_promise<std::string>();
  const int timeout = st.options.guest_call_timeout_ms;
  guest::start_request start;
  start.process = request;
  // Paced from the start (first_reader_wait_ms), set in the same job so that
  // no output is granted credit before the cap is in place.
  const bool paced = st.options.reader_idle_ms > 0 && st.options.first_reader_wait_ms > 0;
  const uint64_t cap = st.options.output_buffer_bytes;
  auto posted = post_guest(
    self,
    [start, timeout, paced, cap](guest::guest_client& client) {
      job_result out;
      auto stream = client.start(start, timeout);
      if (stream) {
        out.stream = *stream;
        if (paced)
          (void)client.limit_output(*stream, cap);
      } else {
        out.outcome = stream.error();
      }
      return out;
    },
    [self, id, promise, request, paced, cap](job_result& done) mutable {
      auto& state = self->state;
      if (!done.outcome) {
        promise.deliver(make_error(done.outcome));
        return;
      }
      process_entry entry(state.options.output_buffer_bytes, state.options.output_runs_max);
      entry.info.process_id = id;
      entry.info.started_at_ms = now_ms(self);
      entry.info.pty = request.pty;
      entry.info.argv = request.argv;
      entry.info.cmd = request.cmd;
      entry.info.cwd = request.cwd;
      entry.info.env = request.request_env;
      entry.info.tag = request.tag;
      entry.stream = done.stream;
      entry.stdin_open = request.stdin_open;
      entry.timeout_ms =
        static_cast<uint32_t>(std::min<uint64_t>(uint64_t{request.timeout_s} * 1000, UINT32_MAX));
      entry.paced = paced;
      entry.output_cap = cap;
      entry.reader_until_ms = now_ms(self) + state.options.first_reader_wait_ms;
      auto& added = state.processes.emplace(id, std::move(entry)).first->second;
      if (paced)
        arm_pace_timer(self, added, state.options.first_reader_wait_ms);
      state.process_order.push_back(id);
      state.by_stream[done.stream] = id;
      state.pending_exec.emplace(done.stream,
                                 pending_start{id, request.report_start_failure, promise});
    });
  if (!posted)
    promise.deliver(make_error(posted)); // the promise owns the reply now
  return promise;
}

/// Posts a guest job for a stream-directed call and replies true or the error.
caf::result<bool> stream_call(self_ptr self, const std::string& process_id,
                              std::function<status(guest::guest_client&, uint32_t)> call) {
  auto* proc = find_process(self, process_id);
  if (proc == nullptr)
    return make_error(unknown_process(process_id));
  if (self->state.paused)
    return make_error(errc::wrong_state, "the sandbox is paused; resume it first");
  if (proc->info.state == process_state::exited || proc->info.state == process_state::failed)
    return true;
  const uint32_t stream = proc->stream;
  auto promise = self->make_response_promise<bool>();
  auto posted = post_guest(
    self,
    [stream, call = std::move(call)](guest::guest_client& client) {
      return job_result{call(client, stream), stream, {}, {}};
    },
    [promise](job_result& done) mutable {
      if (done.outcome)
        promise.deliver(true);
      else
        promise.deliver(make_error(done.outcome));
    });
  if (!posted)
    promise.deliver(make_error(posted)); // the promise owns the reply now
  return promise;
}

/// A process reached its exec timeout: SIGKILL to its group.
void on_exec_timeout(self_ptr self, const std::string& id) {
  auto* proc = find_process(self, id);
  if (proc == nullptr || has_ended(*proc))
    return;
  if (self->state.paused) { // a frozen guest would not answer: try again later
    self->delayed_send(self, std::chrono::seconds(1), sbx_kill_atom::value, id);
    return;
  }
  const uint32_t stream = proc->stream;
  const int timeout = self->state.options.guest_call_timeout_ms;
  (void)post_guest(
    self,
    [stream, timeout](guest::guest_client& client) {
      return job_result{client.signal(stream, SIGKILL, true, timeout), stream, {}, {}};
    },
    [](job_result&) {});
}

std::vector<process_view> list_processes(self_ptr self) {
  std::vector<process_view> out;
  for (const auto& id : self->state.process_order)
    if (auto* proc = find_process(self, id))
      out.push_back(proc->info);
  return out;
}

void on_event(self_ptr self, guest_event& event) {
  std::visit(
    [self](auto& msg) {
      using message_type = std::decay_t<decltype(msg)>;
      if constexpr (std::is_same_v<message_type, guest::started>)
        on_started(self, msg);
      else if constexpr (std::is_same_v<message_type, guest::output_chunk>)
        on_output(self, msg);
      else if constexpr (std::is_same_v<message_type, guest::exited>)
        on_exited(self, msg);
      else if constexpr (std::is_same_v<message_type, guest::error_reply>)
        msg.watch_id != 0 ? on_watch_error(self, msg) : on_error(self, msg);
      else if constexpr (std::is_same_v<message_type, guest::watch_events>)
        on_watch_events(self, msg);
    },
    event.message);
}

} // namespace airlock::worker::sandbox_detail
