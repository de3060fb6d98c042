// The sandbox actor's reads and waits: a read of one stream, of the combined
// stream, or a wait for an exit is answered at once when it can be; else it
// parks (bounded in number and time) until output or an exit wakes it.

#include <algorithm>
#include <chrono>
#include <map>
#include <string>
#include <utility>

#include "actors/errors.hpp"
#include "worker/sandbox_state.hpp"

namespace airlock::worker::sandbox_detail {

namespace {

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

size_t waiters(self_ptr self) {
  auto& st = self->state;
  return st.readers.size() + st.outputs.size() + st.exit_waiters.size();
}

/// Parks a waiter in `table` (readers, outputs or exit_waiters) under a new
/// token until it can be answered or `wait_ms` (at most read_wait_ms_max) has
/// passed; then sbx_wake answers it with what there is. At most
/// waiting_readers_max waiters, of all three kinds together.
template <class Reply, class Waiter, class Subject>
caf::result<Reply> park(self_ptr self, std::map<uint64_t, Waiter>& table, Subject subject,
                        uint32_t wait_ms) {
  auto& st = self->state;
  if (waiters(self) >= st.options.waiting_readers_max)
    return make_error(errc::resource_exhausted, "too many readers wait on this sandbox");
  const uint64_t token = ++st.next_token;
  auto promise = self->make_response_promise<Reply>();
  const auto wait = std::min(wait_ms, st.options.read_wait_ms_max);
  table.emplace(token, Waiter{std::move(subject), promise});
  self->delayed_send(self, std::chrono::milliseconds(wait), sbx_wake_atom::value, token);
  return promise;
}

/// Answers the waiters in `table` on `process_id` that `attempt` can answer
/// now and drops them; `still_waiting` sees each one that must wait on.
template <class Table, class Attempt, class StillWaiting>
void wake_table(self_ptr self, Table& table, const std::string& process_id, Attempt attempt,
                StillWaiting still_waiting) {
  for (auto it = table.begin(); it != table.end();) {
    auto& waiter = it->second;
    if (waiter.request.process_id != process_id) {
      ++it;
      continue;
    }
    bool must_wait = false;
    auto reply = attempt(self, waiter.request, must_wait);
    if (reply && must_wait) {
      still_waiting(waiter, *reply);
      ++it;
      continue;
    }
    if (reply)
      waiter.promise.deliver(std::move(*reply));
    else
      deliver_status(waiter.promise, reply.error());
    it = table.erase(it);
  }
}

} // namespace

/// Answers every waiter on `process_id` that can now be answered.
void wake_readers(self_ptr self, const std::string& process_id) {
  wake_table(self, self->state.readers, process_id, try_read,
             [](waiting_reader&, const read_reply&) {});
  wake_table(self, self->state.outputs, process_id, try_output,
             [](waiting_output& waiter, const output_reply& reply) {
               waiter.request.offset = reply.next_offset; // past unwanted bytes
             });
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
  end_all_watches(self, why);
}

caf::result<read_reply> handle_read(self_ptr self, const read_request& request) {
  bool must_wait = false;
  auto reply = try_read(self, request, must_wait);
  if (!reply)
    return make_error(reply.error());
  if (!must_wait || request.wait_ms == 0)
    return std::move(*reply);
  return park<read_reply>(self, self->state.readers, request, request.wait_ms);
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
  request.offset = reply->next_offset; // past unwanted bytes already
  const uint32_t wait_ms = request.wait_ms;
  return park<output_reply>(self, self->state.outputs, std::move(request), wait_ms);
}

caf::result<process_view> handle_wait(self_ptr self, const std::string& id, uint32_t wait_ms) {
  auto* proc = find_process(self, id);
  if (proc == nullptr)
    return make_error(unknown_process(id));
  if (has_ended(*proc) || wait_ms == 0)
    return proc->info;
  return park<process_view>(self, self->state.exit_waiters, id, wait_ms);
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

} // namespace airlock::worker::sandbox_detail
