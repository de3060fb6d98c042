// Directory watches: the guest's inotify watches, their changes held
// (bounded) for one reader that pulls them with reads that park, as process
// output is read. A watch nobody reads is stopped.

#include <caf/send.hpp>

#include <algorithm>
#include <chrono>

#include "worker/sandbox_state.hpp"

namespace airlock::worker::sandbox_detail {

namespace {

using schema::watch_batch;
using schema::watch_request;
using schema::watch_verb;
using watch_promise = caf::typed_response_promise<watch_batch>;

status unknown_watch(const std::string& id) {
  return make_status(errc::not_found,
                     "no watch " + id + " in this sandbox (it ended, was closed or expired)");
}

/// Starts the idle clock of watch `id` again.
void touch(self_ptr self, const std::string& id, watch_entry& w) {
  ++w.uses;
  self->delayed_send(self, std::chrono::milliseconds(self->state.options.watch_idle_ms),
                     sbx_widle_atom::value, id, w.uses);
}

/// Asks the guest to stop its watch; the outcome does not matter (a guest
/// that is gone has no watch).
void stop_in_guest(self_ptr self, uint32_t guest_id) {
  const int timeout = self->state.options.guest_call_timeout_ms;
  (void)post_guest(
    self,
    [guest_id, timeout](guest::guest_client& client) {
      job_result out;
      out.outcome = client.unwatch(guest_id, timeout);
      return out;
    },
    [](job_result&) {});
}

/// What a read of `w` gets now: the oldest changes, and `ended` once the
/// watch is over and every change was taken (the watch is then forgotten).
watch_batch take(self_ptr self, const std::string& id, watch_entry& w) {
  watch_batch out;
  out.watch_id = id;
  const size_t n = std::min(w.changes.size(), self->state.options.watch_read_changes_max);
  out.changes.assign(w.changes.begin(), w.changes.begin() + static_cast<std::ptrdiff_t>(n));
  w.changes.erase(w.changes.begin(), w.changes.begin() + static_cast<std::ptrdiff_t>(n));
  if (w.ended && w.changes.empty()) {
    out.ended = true;
    if (!w.failure.is_ok()) {
      out.error_code = std::string(to_string(w.failure.code));
      out.error_message = w.failure.message;
    }
    self->state.watch_by_guest.erase(w.guest_id);
    self->state.watches.erase(id);
  }
  return out;
}

/// Answers the parked read of watch `id`, if any, with what there is.
void wake(self_ptr self, const std::string& id) {
  auto it = self->state.watches.find(id);
  if (it == self->state.watches.end() || !it->second.reader)
    return;
  auto promise = std::move(*it->second.reader);
  it->second.reader.reset();
  promise.deliver(take(self, id, it->second));
}

/// The watch is over: nothing more comes from the guest.
void end(self_ptr self, const std::string& id, watch_entry& w, const status& why) {
  if (w.ended)
    return;
  w.ended = true;
  w.failure = why;
  self->state.watch_by_guest.erase(w.guest_id);
  wake(self, id);
}

caf::result<watch_batch> open(self_ptr self, const watch_request& request) {
  auto& st = self->state;
  if (st.paused)
    return make_error(errc::wrong_state,
                      "sandbox " + st.parts.id + " is paused: a watch would not start; resume it");
  if (st.watches.size() >= st.options.watches_max)
    return make_error(errc::resource_exhausted,
                      "sandbox " + st.parts.id + " has " + std::to_string(st.options.watches_max)
                        + " directory watches open, its limit: stop one first");
  const uint32_t guest_id = ++st.next_watch;
  const std::string id = "watch_" + std::to_string(guest_id);
  st.watches[id].guest_id = guest_id;
  st.watch_by_guest[guest_id] = id;
  auto promise = self->make_response_promise<watch_batch>();
  const int timeout = st.options.guest_call_timeout_ms;
  auto posted = post_guest(
    self,
    [guest_id, timeout, path = request.path,
     recursive = request.recursive](guest::guest_client& client) {
      job_result out;
      auto started = client.watch(path, recursive, timeout, guest_id);
      out.outcome = started ? status::ok() : started.error();
      return out;
    },
    [self, id, promise](job_result& done) mutable {
      auto it = self->state.watches.find(id);
      if (it == self->state.watches.end()) { // closed meanwhile: the close stopped it
        promise.deliver(make_error(errc::unavailable, "the watch was closed as it started"));
        return;
      }
      if (!done.outcome) {
        self->state.watch_by_guest.erase(it->second.guest_id);
        self->state.watches.erase(it);
        promise.deliver(make_error(done.outcome));
        return;
      }
      it->second.started = true;
      touch(self, id, it->second);
      watch_batch out;
      out.watch_id = id;
      promise.deliver(std::move(out));
    });
  if (!posted) {
    st.watch_by_guest.erase(guest_id);
    st.watches.erase(id);
    return make_error(posted);
  }
  return promise;
}

caf::result<watch_batch> read(self_ptr self, const watch_request& request) {
  auto it = self->state.watches.find(request.watch_id);
  if (it == self->state.watches.end() || !it->second.started)
    return make_error(unknown_watch(request.watch_id));
  auto& w = it->second;
  touch(self, request.watch_id, w);
  if (!w.changes.empty() || w.ended || request.wait_ms == 0)
    return take(self, request.watch_id, w);
  // One reader at a time: an earlier parked read gets its (empty) answer.
  wake(self, request.watch_id);
  auto promise = self->make_response_promise<watch_batch>();
  w.reader = promise;
  w.reader_token = ++self->state.next_token;
  const auto wait = std::min(request.wait_ms, self->state.options.read_wait_ms_max);
  self->delayed_send(self, std::chrono::milliseconds(wait), sbx_wwake_atom::value, request.watch_id,
                     w.reader_token);
  return promise;
}

watch_batch close(self_ptr self, const std::string& id) {
  watch_batch out;
  out.watch_id = id;
  out.ended = true;
  auto it = self->state.watches.find(id);
  if (it == self->state.watches.end())
    return out;
  if (!it->second.ended)
    stop_in_guest(self, it->second.guest_id);
  if (it->second.reader) {
    it->second.reader->deliver(out);
    it->second.reader.reset();
  }
  self->state.watch_by_guest.erase(it->second.guest_id);
  self->state.watches.erase(it);
  return out;
}

} // namespace

caf::result<watch_batch> handle_watch(self_ptr self, const watch_request& request) {
  switch (request.verb) {
    case watch_verb::open: return open(self, request);
    case watch_verb::read: return read(self, request);
    case watch_verb::close: return close(self, request.watch_id);
  }
  return make_error(errc::invalid_argument, "unknown watch verb");
}

void on_watch_events(self_ptr self, guest::watch_events& msg) {
  auto& st = self->state;
  auto id = st.watch_by_guest.find(msg.watch_id);
  if (id == st.watch_by_guest.end())
    return;
  const std::string watch_id = id->second;
  auto& w = st.watches[watch_id];
  for (auto& change : msg.events) {
    if (w.changes.size() >= st.options.watch_changes_max) {
      stop_in_guest(self, w.guest_id);
      return end(self, watch_id, w,
                 make_status(errc::resource_exhausted,
                             "more than " + std::to_string(st.options.watch_changes_max)
                               + " changes waited for this watch's reader, which fell behind; "
                                 "the watch ended: watch again (and list the directory)"));
    }
    w.changes.push_back({std::move(change.name), std::string(guest::to_string(change.kind))});
  }
  wake(self, watch_id);
}

void on_watch_error(self_ptr self, const guest::error_reply& msg) {
  auto id = self->state.watch_by_guest.find(msg.watch_id);
  if (id == self->state.watch_by_guest.end() || !msg.ended)
    return;
  const std::string watch_id = id->second;
  end(self, watch_id, self->state.watches[watch_id], make_status(msg.code, msg.message));
}

void on_watch_wake(self_ptr self, const std::string& id, uint64_t token) {
  auto it = self->state.watches.find(id);
  if (it != self->state.watches.end() && it->second.reader && it->second.reader_token == token)
    wake(self, id);
}

void on_watch_idle(self_ptr self, const std::string& id, uint64_t use) {
  auto it = self->state.watches.find(id);
  if (it == self->state.watches.end() || it->second.uses != use || it->second.reader)
    return;
  close(self, id);
}

void end_all_watches(self_ptr self, const status& why) {
  std::vector<std::string> ids;
  for (const auto& [id, w] : self->state.watches)
    ids.push_back(id);
  for (const auto& id : ids)
    if (auto it = self->state.watches.find(id); it != self->state.watches.end())
      end(self, id, it->second, why);
}

} // namespace airlock::worker::sandbox_detail
