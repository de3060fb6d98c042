#include "worker/sandbox_actor.hpp"

#include <caf/actor_system.hpp>
#include <caf/blocking_actor.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <variant>

#include "actors/errors.hpp"

namespace airlock::worker {

namespace {

struct process_entry {
  process_info info;
  uint32_t stream = 0;
  bool stdin_open = false;
  uint32_t timeout_ms = 0; ///< exec timeout, armed once started
  output_log log;
  // Reader pacing (sandbox_actor_options::reader_idle_ms).
  bool paced = false;          ///< the guest's credit is capped at output_cap
  bool pace_timer = false;     ///< an sbx_pace check is scheduled
  uint64_t read_offset = 0;    ///< furthest offset a combined reader asked for
  uint64_t output_cap = 0;     ///< the cap last posted to the link
  int64_t reader_until_ms = 0; ///< the reader counts as active until then
  process_entry(size_t capacity, size_t runs_max) : log(capacity, runs_max) {}
};

struct waiting_reader {
  read_request request;
  caf::typed_response_promise<read_reply> promise;
};

/// A combined-stream reader; its offset moves past unwanted bytes as they come.
struct waiting_output {
  output_read request;
  caf::typed_response_promise<output_reply> promise;
};

struct waiting_exit {
  std::string process_id;
  caf::typed_response_promise<process_info> promise;
};

struct pending_start {
  std::string process_id;
  bool report_start_failure = false;
  caf::typed_response_promise<std::string> promise;
};

} // namespace

struct sandbox_state {
  static inline const char* name = "sandbox";
  sandbox_parts parts;
  sandbox_actor_options options;
  std::shared_ptr<guest_link> link;
  std::map<std::string, process_entry> processes;
  std::deque<std::string> process_order; ///< ids, oldest first
  std::map<uint32_t, std::string> by_stream;
  std::map<uint32_t, pending_start> pending_exec; ///< by stream
  std::map<uint64_t, std::function<void(job_result&)>> pending_jobs;
  std::map<uint64_t, waiting_reader> readers; ///< by token, like the two below
  std::map<uint64_t, waiting_output> outputs;
  std::map<uint64_t, waiting_exit> exit_waiters;
  std::vector<caf::typed_response_promise<bool>> destroy_waiters;
  uint64_t next_token = 0;
  uint64_t next_process = 0;
  bool paused = false;
  bool destroying = false;
  bool channel_closed = false;
};

namespace {

using self_ptr = sandbox_actor::stateful_pointer<sandbox_state>;

int64_t now_ms(self_ptr self) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
           self->clock().now().time_since_epoch())
    .count();
}

/// Sends to the actor if it still lives; callable from any thread.
void send_weak(const caf::weak_actor_ptr& weak, uint64_t token, job_result result) {
  if (auto strong = weak.lock())
    caf::anon_send(caf::actor_cast<sandbox_actor>(strong), sbx_done_atom::value, token,
                   std::move(result));
}

/// Runs `work` on the guest link thread; `then` runs on the actor with its result.
status post_guest(self_ptr self, std::function<job_result(guest::guest_client&)> work,
                  std::function<void(job_result&)> then) {
  auto& st = self->state;
  if (st.destroying || !st.link)
    return make_status(errc::wrong_state, "sandbox " + st.parts.id + " is being destroyed");
  if (st.channel_closed)
    return make_status(errc::unavailable, "the guest of sandbox " + st.parts.id
                                            + " is gone; destroy the sandbox and create it again");
  const uint64_t token = ++st.next_token;
  caf::weak_actor_ptr weak = self->ctrl();
  auto posted = st.link->post([weak, token, work = std::move(work)](guest::guest_client& client) {
    send_weak(weak, token, work(client));
  });
  if (posted)
    st.pending_jobs.emplace(token, std::move(then));
  return posted;
}

/// Runs `work` on a fresh blocking actor (own thread): runtime and rootfs calls.
void post_blocking(self_ptr self, std::function<job_result()> work,
                   std::function<void(job_result&)> then) {
  const uint64_t token = ++self->state.next_token;
  self->state.pending_jobs.emplace(token, std::move(then));
  caf::weak_actor_ptr weak = self->ctrl();
  self->home_system().spawn([weak, token, work = std::move(work)](caf::blocking_actor*) {
    send_weak(weak, token, work());
  });
}

template <class T>
void deliver_status(caf::typed_response_promise<T>& promise, const status& failure) {
  promise.deliver(make_error(failure));
}

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

size_t read_limit(self_ptr self, size_t asked) {
  const size_t max = self->state.options.read_bytes_max;
  return asked == 0 ? max : std::min(asked, max);
}

/// What `request` can get right now; `must_wait` when it should wait for more.
result<read_reply> try_read(self_ptr self, const read_request& request, bool& must_wait) {
  must_wait = false;
  auto* proc = find_process(self, request.process_id);
  if (proc == nullptr)
    return unknown_process(request.process_id);
  if (request.fd != 1 && request.fd != 2)
    return make_status(errc::invalid_argument, "fd must be 1 (stdout) or 2 (stderr)");
  auto bytes =
    proc->log.read_stream(request.fd, request.offset, read_limit(self, request.max_bytes));
  if (!bytes)
    return bytes.error();
  read_reply reply;
  reply.offset = request.offset;
  reply.next_offset = request.offset + bytes->size();
  reply.start_offset = proc->log.stream_start(request.fd);
  const bool ended = has_ended(*proc);
  reply.exited = ended && reply.next_offset == proc->log.stream_end(request.fd);
  must_wait = bytes->empty() && !ended;
  reply.bytes = std::move(*bytes);
  return reply;
}

/// The combined-stream counterpart of try_read: waits while no wanted byte
/// is there (unwanted ones only move next_offset).
result<output_reply> try_output(self_ptr self, const output_read& request, bool& must_wait) {
  must_wait = false;
  auto* proc = find_process(self, request.process_id);
  if (proc == nullptr)
    return unknown_process(request.process_id);
  auto slice = proc->log.read(request.offset, read_limit(self, request.max_bytes),
                              request.want_stdout, request.want_stderr);
  if (!slice)
    return slice.error();
  output_reply reply;
  reply.pieces = std::move(slice->pieces);
  reply.next_offset = slice->next_offset;
  reply.start_offset = proc->log.start_offset();
  const bool ended = has_ended(*proc);
  reply.exited = ended && reply.next_offset == proc->log.end_offset();
  if (reply.exited) {
    reply.exit_code = proc->info.exit_code;
    reply.signal = proc->info.signal;
  }
  must_wait = reply.pieces.empty() && !ended;
  return reply;
}

/// Answers every waiter on `process_id` that can now be answered.
void wake_readers(self_ptr self, const std::string& process_id) {
  for (auto it = self->state.readers.begin(); it != self->state.readers.end();) {
    auto& reader = it->second;
    if (reader.request.process_id != process_id) {
      ++it;
      continue;
    }
    bool must_wait = false;
    auto reply = try_read(self, reader.request, must_wait);
    if (reply && must_wait) {
      ++it;
      continue;
    }
    if (reply)
      reader.promise.deliver(std::move(*reply));
    else
      deliver_status(reader.promise, reply.error());
    it = self->state.readers.erase(it);
  }
  for (auto it = self->state.outputs.begin(); it != self->state.outputs.end();) {
    auto& reader = it->second;
    if (reader.request.process_id != process_id) {
      ++it;
      continue;
    }
    bool must_wait = false;
    auto reply = try_output(self, reader.request, must_wait);
    if (reply && must_wait) {
      reader.request.offset = reply->next_offset; // past unwanted bytes
      ++it;
      continue;
    }
    if (reply)
      reader.promise.deliver(std::move(*reply));
    else
      deliver_status(reader.promise, reply.error());
    it = self->state.outputs.erase(it);
  }
  auto* proc = find_process(self, process_id);
  if (proc == nullptr || !has_ended(*proc))
    return;
  for (auto it = self->state.exit_waiters.begin(); it != self->state.exit_waiters.end();) {
    if (it->second.process_id != process_id) {
      ++it;
      continue;
    }
    it->second.promise.deliver(proc->info);
    it = self->state.exit_waiters.erase(it);
  }
}

void fail_all_readers(self_ptr self, const status& why) {
  auto& st = self->state;
  for (auto& [token, reader] : st.readers)
    deliver_status(reader.promise, why);
  for (auto& [token, reader] : st.outputs)
    deliver_status(reader.promise, why);
  for (auto& [token, waiter] : st.exit_waiters)
    deliver_status(waiter.promise, why);
  st.readers.clear();
  st.outputs.clear();
  st.exit_waiters.clear();
}

size_t waiters(self_ptr self) {
  auto& st = self->state;
  return st.readers.size() + st.outputs.size() + st.exit_waiters.size();
}

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
                     sbx_pace_atom::value, proc.info.id);
}

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

guest::start_request to_start(const exec_request& request) {
  guest::start_request start;
  start.argv = request.argv;
  start.shell = request.cmd;
  start.env = request.env;
  start.cwd = request.cwd;
  start.set_user = request.set_user;
  start.uid = request.uid;
  start.gid = request.gid;
  start.pty = request.pty;
  start.rows = request.rows;
  start.cols = request.cols;
  start.stdin_open = request.stdin_open;
  return start;
}

caf::result<std::string> handle_exec(self_ptr self, const exec_request& request) {
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
  auto start = to_start(request);
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
      entry.info.id = id;
      entry.info.started_at_ms = now_ms(self);
      entry.info.pty = request.pty;
      entry.stream = done.stream;
      entry.stdin_open = request.stdin_open;
      entry.timeout_ms = request.timeout_ms;
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

caf::result<read_reply> handle_read(self_ptr self, const read_request& request) {
  bool must_wait = false;
  auto reply = try_read(self, request, must_wait);
  if (!reply)
    return make_error(reply.error());
  if (!must_wait || request.wait_ms == 0)
    return std::move(*reply);
  auto& st = self->state;
  if (waiters(self) >= st.options.waiting_readers_max)
    return make_error(errc::resource_exhausted, "too many readers wait on this sandbox");
  const uint64_t token = ++st.next_token;
  auto promise = self->make_response_promise<read_reply>();
  st.readers.emplace(token, waiting_reader{request, promise});
  const auto wait = std::min(request.wait_ms, st.options.read_wait_ms_max);
  self->delayed_send(self, std::chrono::milliseconds(wait), sbx_wake_atom::value, token);
  return promise;
}

caf::result<output_reply> handle_output(self_ptr self, output_read request) {
  if (auto* proc = find_process(self, request.process_id))
    on_reader(self, *proc, request.offset);
  bool must_wait = false;
  auto reply = try_output(self, request, must_wait);
  if (!reply)
    return make_error(reply.error());
  if (!must_wait || request.wait_ms == 0)
    return std::move(*reply);
  auto& st = self->state;
  if (waiters(self) >= st.options.waiting_readers_max)
    return make_error(errc::resource_exhausted, "too many readers wait on this sandbox");
  const uint64_t token = ++st.next_token;
  auto promise = self->make_response_promise<output_reply>();
  request.offset = reply->next_offset; // past unwanted bytes already
  const auto wait = std::min(request.wait_ms, st.options.read_wait_ms_max);
  st.outputs.emplace(token, waiting_output{std::move(request), promise});
  self->delayed_send(self, std::chrono::milliseconds(wait), sbx_wake_atom::value, token);
  return promise;
}

caf::result<process_info> handle_wait(self_ptr self, const std::string& id, uint32_t wait_ms) {
  auto* proc = find_process(self, id);
  if (proc == nullptr)
    return make_error(unknown_process(id));
  if (has_ended(*proc) || wait_ms == 0)
    return proc->info;
  auto& st = self->state;
  if (waiters(self) >= st.options.waiting_readers_max)
    return make_error(errc::resource_exhausted, "too many readers wait on this sandbox");
  const uint64_t token = ++st.next_token;
  auto promise = self->make_response_promise<process_info>();
  st.exit_waiters.emplace(token, waiting_exit{id, promise});
  const auto wait = std::min(wait_ms, st.options.read_wait_ms_max);
  self->delayed_send(self, std::chrono::milliseconds(wait), sbx_wake_atom::value, token);
  return promise;
}

/// A waiter's time is up: it gets what there is now.
void on_reader_timeout(self_ptr self, uint64_t token) {
  auto& st = self->state;
  bool must_wait = false;
  if (auto it = st.readers.find(token); it != st.readers.end()) {
    auto reply = try_read(self, it->second.request, must_wait);
    if (reply)
      it->second.promise.deliver(std::move(*reply));
    else
      deliver_status(it->second.promise, reply.error());
    st.readers.erase(it);
  } else if (auto out = st.outputs.find(token); out != st.outputs.end()) {
    auto reply = try_output(self, out->second.request, must_wait);
    if (reply)
      out->second.promise.deliver(std::move(*reply));
    else
      deliver_status(out->second.promise, reply.error());
    st.outputs.erase(out);
  } else if (auto waiter = st.exit_waiters.find(token); waiter != st.exit_waiters.end()) {
    if (auto* proc = find_process(self, waiter->second.process_id))
      waiter->second.promise.deliver(proc->info);
    else
      deliver_status(waiter->second.promise, unknown_process(waiter->second.process_id));
    st.exit_waiters.erase(waiter);
  }
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

/// The bound of a guest call moving `bytes` of file data.
int file_timeout_ms(const sandbox_actor_options& options, uint64_t bytes) {
  const uint64_t rate = std::max<uint64_t>(options.file_rate_bytes_per_s_min, 1);
  const uint64_t extra = bytes * 1000 / rate;
  return static_cast<int>(std::min<uint64_t>(options.guest_call_timeout_ms + extra,
                                             uint64_t{std::numeric_limits<int>::max()}));
}

status too_large(const std::string& path, uint64_t size, uint64_t bytes_max) {
  return make_status(errc::too_large, path + ": " + std::to_string(size)
                                        + " bytes is more than the limit of "
                                        + std::to_string(bytes_max)
                                        + " bytes of one file transfer; read it in ranges "
                                          "(offset and length)");
}

/// A read: stat first, so a directory and an oversized file are refused
/// before any byte moves; the read asks for one byte more than the limit to
/// notice files that report no size (procfs) or grew since.
job_result read_file_op(guest::guest_client& client, const file_request& req,
                        const sandbox_actor_options& options) {
  job_result out;
  const uint64_t bytes_max = options.file_bytes_max;
  auto info = client.stat(req.path, options.guest_call_timeout_ms, true);
  if (!info) {
    out.outcome = info.error();
    return out;
  }
  if (info->type == guest::file_type::directory) {
    out.outcome = make_status(errc::invalid_argument, req.path + " is a directory");
    return out;
  }
  const uint64_t available = info->size > req.offset ? info->size - req.offset : 0;
  const uint64_t wanted = req.length == 0 ? available : std::min(req.length, available);
  if (wanted > bytes_max || req.length > bytes_max) {
    out.outcome = too_large(req.path, std::max(wanted, req.length), bytes_max);
    return out;
  }
  const uint64_t length = req.length == 0 ? bytes_max + 1 : req.length;
  auto data = client.read_file(req.path, file_timeout_ms(options, wanted), req.offset, length);
  if (!data)
    out.outcome = data.error();
  else if (data->size() > bytes_max)
    out.outcome = too_large(req.path, data->size(), bytes_max);
  else
    out.file.data = std::move(*data);
  return out;
}

job_result run_file_op(guest::guest_client& client, const file_request& req,
                       const sandbox_actor_options& options) {
  job_result out;
  const int timeout = options.guest_call_timeout_ms;
  switch (req.op) {
    case file_op::read: return read_file_op(client, req, options);
    case file_op::write: {
      if (req.data.size() > options.file_bytes_max) {
        out.outcome = too_large(req.path, req.data.size(), options.file_bytes_max);
        break;
      }
      auto written = client.write_file(
        req.path, req.data, file_timeout_ms(options, req.data.size()), req.mode, req.parents);
      if (written)
        out.file.bytes = *written;
      else
        out.outcome = written.error();
      break;
    }
    case file_op::list: {
      auto listed = client.list(req.path, timeout);
      if (listed) {
        out.file.entries = std::move(listed->entries);
        out.file.truncated = listed->truncated;
      } else
        out.outcome = listed.error();
      break;
    }
    case file_op::stat: {
      auto info = client.stat(req.path, timeout, req.follow);
      if (info)
        out.file.info = std::move(*info);
      else
        out.outcome = info.error();
      break;
    }
    case file_op::mkdir:
      out.outcome = client.mkdir(req.path, timeout, req.mode, req.parents);
      break;
    case file_op::remove: out.outcome = client.remove(req.path, timeout, req.recursive); break;
    case file_op::rename: out.outcome = client.rename(req.path, req.to, timeout); break;
  }
  return out;
}

caf::result<file_reply> handle_file(self_ptr self, file_request& request) {
  auto& st = self->state;
  if (st.paused)
    return make_error(errc::wrong_state, "sandbox " + st.parts.id
                                           + " is paused: file operations would block; resume it");
  auto promise = self->make_response_promise<file_reply>();
  auto posted = post_guest(
    self,
    [request = std::move(request), options = st.options](guest::guest_client& client) {
      return run_file_op(client, request, options);
    },
    [promise](job_result& done) mutable {
      if (done.outcome)
        promise.deliver(std::move(done.file));
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

std::vector<process_info> list_processes(self_ptr self) {
  std::vector<process_info> out;
  for (const auto& id : self->state.process_order)
    if (auto* proc = find_process(self, id))
      out.push_back(proc->info);
  return out;
}

caf::result<bool> handle_freeze(self_ptr self, bool pause) {
  auto& st = self->state;
  if (st.destroying)
    return make_error(errc::wrong_state, "sandbox " + st.parts.id + " is being destroyed");
  auto promise = self->make_response_promise<bool>();
  auto runtime = st.parts.runtime;
  auto id = st.parts.id;
  post_blocking(
    self,
    [runtime, id, pause] {
      job_result out;
      out.outcome = pause ? runtime->pause(id) : runtime->resume(id);
      return out;
    },
    [self, promise, pause, was_paused = st.paused](job_result& done) mutable {
      if (!done.outcome) {
        self->state.paused = was_paused;
        promise.deliver(make_error(done.outcome));
        return;
      }
      self->state.paused = pause;
      promise.deliver(true);
    });
  // Block new guest work at once when pausing (a frozen guest answers nothing).
  if (pause)
    st.paused = true;
  return promise;
}

caf::result<sandbox_stats> handle_stats(self_ptr self) {
  auto promise = self->make_response_promise<sandbox_stats>();
  auto runtime = self->state.parts.runtime;
  auto id = self->state.parts.id;
  post_blocking(
    self,
    [runtime, id] {
      job_result out;
      auto stats = runtime->stats(id);
      if (stats)
        out.stats = *stats;
      else
        out.outcome = stats.error();
      return out;
    },
    [promise](job_result& done) mutable {
      if (done.outcome)
        promise.deliver(done.stats);
      else
        promise.deliver(make_error(done.outcome));
    });
  return promise;
}

caf::result<bool> handle_destroy(self_ptr self) {
  auto& st = self->state;
  auto promise = self->make_response_promise<bool>();
  st.destroy_waiters.push_back(promise);
  if (st.destroying)
    return promise;
  st.destroying = true;
  const status gone = make_status(errc::unavailable, "sandbox " + st.parts.id + " was destroyed");
  fail_all_readers(self, gone);
  for (auto& [stream, pending] : st.pending_exec)
    deliver_status(pending.promise, gone);
  st.pending_exec.clear();
  auto link = std::move(st.link); // the helper drops the last reference: joins off the actor
  auto runtime = st.parts.runtime;
  auto rootfs = st.parts.rootfs;
  auto id = st.parts.id;
  post_blocking(
    self,
    [link, runtime, rootfs, id]() mutable {
      job_result out;
      if (link)
        link->stop();
      link.reset();
      out.outcome = runtime->destroy(id);
      if (out.outcome && rootfs)
        out.outcome = rootfs->delete_sandbox(id);
      return out;
    },
    [self](job_result& done) {
      for (auto& waiter : self->state.destroy_waiters) {
        if (done.outcome)
          waiter.deliver(true);
        else
          waiter.deliver(make_error(done.outcome));
      }
      self->state.destroy_waiters.clear();
      if (done.outcome)
        self->quit();
      else
        self->state.destroying = false; // a later destroy retries
    });
  return promise;
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
        on_error(self, msg);
    },
    event.message);
}

sandbox_actor::behavior_type sandbox_impl(self_ptr self, sandbox_parts parts,
                                          sandbox_actor_options options) {
  auto& st = self->state;
  st.options = options;
  auto guest_conn = std::move(parts.client);
  const int channel_fd = parts.channel_fd;
  st.parts = std::move(parts);
  caf::weak_actor_ptr weak = self->ctrl();
  st.link = std::make_shared<guest_link>(
    std::move(guest_conn), channel_fd,
    [weak](guest::guest_message message) {
      if (auto strong = weak.lock())
        caf::anon_send(caf::actor_cast<sandbox_actor>(strong), sbx_event_atom::value,
                       guest_event{std::move(message)});
    },
    options.link);
  return {
    [self](sbx_exec_atom, const exec_request& request) { return handle_exec(self, request); },
    [self](sbx_read_atom, const read_request& request) { return handle_read(self, request); },
    [self](sbx_output_atom, output_read& request) {
      return handle_output(self, std::move(request));
    },
    [self](sbx_wait_atom, const std::string& id, uint32_t wait_ms) {
      return handle_wait(self, id, wait_ms);
    },
    [self](sbx_procs_atom) { return list_processes(self); },
    [self](sbx_stdin_atom, const std::string& id, std::string& bytes,
           bool close) -> caf::result<bool> {
      // The guest reports a write to a closed stdin only asynchronously: refuse it here.
      if (auto* proc = find_process(self, id); proc != nullptr && !has_ended(*proc)) {
        if (!proc->stdin_open)
          return make_error(errc::wrong_state, "the stdin of " + id
                                                 + " is not open (start it with stdin open; "
                                                   "it may have been closed)");
        if (close)
          proc->stdin_open = false;
      }
      const int timeout = self->state.options.guest_call_timeout_ms;
      return stream_call(
        self, id,
        [bytes = std::move(bytes), close, timeout](guest::guest_client& client, uint32_t stream) {
          if (!bytes.empty())
            if (auto wrote = client.write_stdin(stream, bytes, timeout); !wrote)
              return wrote;
          return close ? client.close_stdin(stream, timeout) : status::ok();
        });
    },
    [self](sbx_signal_atom, const std::string& id, int32_t signo) {
      const int timeout = self->state.options.guest_call_timeout_ms;
      return stream_call(self, id, [signo, timeout](guest::guest_client& client, uint32_t stream) {
        return client.signal(stream, signo, true, timeout);
      });
    },
    [self](sbx_resize_atom, const std::string& id, uint16_t rows,
           uint16_t cols) -> caf::result<bool> {
      if (auto* proc = find_process(self, id); proc != nullptr && !proc->info.pty)
        return make_error(errc::wrong_state, id + " has no terminal (start it with a pty)");
      const int timeout = self->state.options.guest_call_timeout_ms;
      return stream_call(self, id,
                         [rows, cols, timeout](guest::guest_client& client, uint32_t stream) {
                           return client.resize(stream, rows, cols, timeout);
                         });
    },
    [self](sbx_status_atom, const std::string& id) -> caf::result<process_info> {
      auto* proc = find_process(self, id);
      if (proc == nullptr)
        return make_error(unknown_process(id));
      return proc->info;
    },
    [self](sbx_file_atom, file_request& request) { return handle_file(self, request); },
    [self](sbx_pause_atom) { return handle_freeze(self, true); },
    [self](sbx_resume_atom) { return handle_freeze(self, false); },
    [self](sbx_stats_atom) { return handle_stats(self); },
    [self](sbx_destroy_atom) { return handle_destroy(self); },
    [self](sbx_event_atom, guest_event& event) { on_event(self, event); },
    [self](sbx_done_atom, uint64_t token, job_result& done) {
      auto it = self->state.pending_jobs.find(token);
      if (it == self->state.pending_jobs.end())
        return;
      auto then = std::move(it->second);
      self->state.pending_jobs.erase(it);
      then(done);
    },
    [self](sbx_wake_atom, uint64_t token) { on_reader_timeout(self, token); },
    [self](sbx_kill_atom, const std::string& id) { on_exec_timeout(self, id); },
    [self](sbx_pace_atom, const std::string& id) { on_pace_check(self, id); },
  };
}

} // namespace

sandbox_actor spawn_sandbox(caf::actor_system& system, sandbox_parts parts,
                            sandbox_actor_options options) {
  return system.spawn(sandbox_impl, std::move(parts), options);
}

} // namespace airlock::worker
