// The sandbox actor's write sessions: a file written in parts, each one guest
// job, so that neither this actor nor any message holds more than one part.
// The guest writes a temporary file beside the target and renames it only at
// the commit (guest/agent_files.cpp, atomic_writer): an aborted, failed or
// expired session leaves the old file and no temporary one.

#include <chrono>
#include <string>
#include <utility>

#include "actors/errors.hpp"
#include "worker/sandbox_state.hpp"

namespace airlock::worker::sandbox_detail {

namespace {

status unknown_session(uint64_t id) {
  return make_status(errc::not_found, "no write session " + std::to_string(id)
                                        + " (it was committed, aborted, failed or expired)");
}

/// Counts a use of session `id` and (re)starts its idle clock.
void touch(self_ptr self, uint64_t id, write_session& session) {
  ++session.uses;
  self->delayed_send(self, std::chrono::milliseconds(self->state.options.write_session_idle_ms),
                     sbx_expire_atom::value, id, session.uses);
}

/// Removes the guest's temporary file; `then` gets the outcome. Only for a
/// write the guest still has: one it failed is forgotten there, and its end
/// would never be answered.
void abort_on_guest(self_ptr self, uint32_t guest_id, std::function<void(job_result&)> then) {
  const int timeout = self->state.options.guest_call_timeout_ms;
  auto posted = post_guest(
    self,
    [guest_id, timeout](guest::guest_client& client) {
      job_result out;
      if (auto closed = client.write_close(guest_id, true, timeout); !closed)
        out.outcome = closed.error();
      return out;
    },
    then);
  if (!posted) {
    job_result failed;
    failed.outcome = posted;
    then(failed);
  }
}

/// The session `request` names, ready for a part or the commit; else why not
/// (a session the guest failed is forgotten here too).
result<write_session*> usable_session(self_ptr self, const file_request& request) {
  auto& writes = self->state.writes;
  auto it = writes.find(request.session);
  if (it == writes.end())
    return unknown_session(request.session);
  if (!it->second.failure.is_ok()) {
    auto failure = it->second.failure;
    writes.erase(it);
    return failure;
  }
  if (it->second.guest_id == 0)
    return make_status(errc::wrong_state,
                       "write session " + std::to_string(request.session) + " is still opening");
  return &it->second;
}

/// Forgets session `id` after a failed job, unless it is gone or replaced.
void forget(self_ptr self, uint64_t id, uint32_t guest_id) {
  auto it = self->state.writes.find(id);
  if (it != self->state.writes.end() && it->second.guest_id == guest_id)
    self->state.writes.erase(it);
}

caf::result<file_reply> open_session(self_ptr self, file_request& request) {
  auto& st = self->state;
  if (st.writes.size() >= st.options.write_sessions_max)
    return make_error(errc::resource_exhausted,
                      "sandbox " + st.parts.id + " has " + std::to_string(st.writes.size())
                        + " write sessions open (the limit); finish or abort one");
  const uint64_t id = ++st.next_write;
  st.writes[id].path = request.path; // holds the slot while the guest opens
  auto promise = self->make_response_promise<file_reply>();
  const int timeout = st.options.guest_call_timeout_ms;
  auto posted = post_guest(
    self,
    [request = std::move(request), timeout](guest::guest_client& client) {
      job_result out;
      auto opened = client.write_open(request.path, timeout, request.mode, request.parents);
      if (opened)
        out.stream = *opened;
      else
        out.outcome = opened.error();
      return out;
    },
    [self, promise, id](job_result& done) mutable {
      auto it = self->state.writes.find(id);
      if (!done.outcome.is_ok()) {
        if (it != self->state.writes.end())
          self->state.writes.erase(it);
        promise.deliver(make_error(done.outcome));
        return;
      }
      if (it == self->state.writes.end()) { // aborted while opening
        abort_on_guest(self, done.stream, [](job_result&) {});
        promise.deliver(make_error(unknown_session(id)));
        return;
      }
      it->second.guest_id = done.stream;
      touch(self, id, it->second);
      file_reply reply;
      reply.session = id;
      promise.deliver(std::move(reply));
    });
  if (!posted) {
    st.writes.erase(id);
    promise.deliver(make_error(posted));
  }
  return promise;
}

caf::result<file_reply> write_part(self_ptr self, file_request& request) {
  auto& st = self->state;
  auto found = usable_session(self, request);
  if (!found)
    return make_error(found.error());
  write_session& session = **found;
  const uint64_t id = request.session;
  if (request.offset != session.bytes)
    return make_error(errc::invalid_argument,
                      "part at offset " + std::to_string(request.offset) + ", but write session "
                        + std::to_string(id) + " has " + std::to_string(session.bytes) + " bytes");
  const uint64_t total = session.bytes + request.data.size();
  if (total > st.options.file_bytes_max) {
    const auto message = session_too_large_message(session.path, total, st.options.file_bytes_max);
    const auto guest_id = session.guest_id;
    st.writes.erase(id);
    abort_on_guest(self, guest_id, [](job_result&) {});
    return make_error(errc::too_large, message);
  }
  session.bytes = total;
  touch(self, id, session);
  const uint32_t guest_id = session.guest_id;
  const int timeout = file_timeout_ms(st.options, request.data.size());
  auto promise = self->make_response_promise<file_reply>();
  auto posted = post_guest(
    self,
    [guest_id, timeout, data = std::move(request.data)](guest::guest_client& client) {
      job_result out;
      out.outcome = client.write_part(guest_id, data, timeout);
      return out;
    },
    [self, promise, id, guest_id, total](job_result& done) mutable {
      if (!done.outcome.is_ok()) {
        forget(self, id, guest_id);
        promise.deliver(make_error(done.outcome));
        return;
      }
      // The idle clock starts when the guest took the part, not when it came.
      if (auto it = self->state.writes.find(id);
          it != self->state.writes.end() && it->second.guest_id == guest_id)
        touch(self, id, it->second);
      file_reply reply;
      reply.bytes = total;
      promise.deliver(std::move(reply));
    });
  if (!posted) {
    forget(self, id, guest_id);
    promise.deliver(make_error(posted));
  }
  return promise;
}

caf::result<file_reply> commit_session(self_ptr self, file_request& request) {
  auto& st = self->state;
  auto found = usable_session(self, request);
  if (!found)
    return make_error(found.error());
  const uint32_t guest_id = (*found)->guest_id;
  const int timeout = file_timeout_ms(st.options, (*found)->bytes);
  st.writes.erase(request.session);
  auto promise = self->make_response_promise<file_reply>();
  auto posted = post_guest(
    self,
    [guest_id, timeout](guest::guest_client& client) {
      job_result out;
      if (auto written = client.write_close(guest_id, false, timeout))
        out.file.bytes = *written;
      else
        out.outcome = written.error();
      return out;
    },
    [promise](job_result& done) mutable {
      if (done.outcome.is_ok())
        promise.deliver(std::move(done.file));
      else
        promise.deliver(make_error(done.outcome));
    });
  if (!posted)
    promise.deliver(make_error(posted));
  return promise;
}

caf::result<file_reply> abort_session(self_ptr self, const file_request& request) {
  auto& writes = self->state.writes;
  auto it = writes.find(request.session);
  if (it == writes.end())
    return file_reply{}; // already over: nothing is left to remove
  const write_session session = it->second;
  writes.erase(it);
  if (session.guest_id == 0 || !session.failure.is_ok())
    return file_reply{}; // the open's completion, or the guest, cleans up
  auto promise = self->make_response_promise<file_reply>();
  abort_on_guest(self, session.guest_id, [promise](job_result& done) mutable {
    if (done.outcome.is_ok())
      promise.deliver(file_reply{});
    else
      promise.deliver(make_error(done.outcome));
  });
  return promise;
}

} // namespace

std::string session_too_large_message(const std::string& path, uint64_t size, uint64_t bytes_max) {
  return path + ": " + std::to_string(size) + " bytes is more than the limit of "
         + std::to_string(bytes_max) + " bytes of one file";
}

caf::result<file_reply> handle_write_session(self_ptr self, file_request& request) {
  switch (request.op) {
    case file_op::write_open: return open_session(self, request);
    case file_op::write_part: return write_part(self, request);
    case file_op::write_commit: return commit_session(self, request);
    case file_op::write_abort: return abort_session(self, request);
    default: break;
  }
  return make_error(errc::internal, "not a write session operation");
}

void on_write_expired(self_ptr self, uint64_t id, uint64_t use) {
  auto& st = self->state;
  auto it = st.writes.find(id);
  if (it == st.writes.end() || it->second.uses != use)
    return;      // over, or used since
  if (st.paused) // a frozen guest would not answer the abort: wait for the resume
    return touch(self, id, it->second);
  const write_session session = it->second;
  st.writes.erase(it);
  if (session.failure.is_ok())
    abort_on_guest(self, session.guest_id, [](job_result&) {});
}

bool on_write_error(self_ptr self, const guest::error_reply& msg) {
  if (msg.request_id == 0)
    return false;
  for (auto& [id, session] : self->state.writes) {
    if (session.guest_id == msg.request_id) {
      session.failure = make_status(msg.code, msg.message);
      return true;
    }
  }
  return false;
}

} // namespace airlock::worker::sandbox_detail
