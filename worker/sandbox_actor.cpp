#include "worker/sandbox_actor.hpp"

#include <caf/actor_system.hpp>
#include <caf/blocking_actor.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <chrono>
#include <functional>

#include "actors/errors.hpp"
#include "worker/sandbox_state.hpp"

namespace airlock::worker::sandbox_detail {

int64_t now_ms(self_ptr self) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
           self->clock().now().time_since_epoch())
    .count();
}

namespace {

/// Sends to the actor if it still lives; callable from any thread.
void send_weak(const caf::weak_actor_ptr& weak, uint64_t token, job_result result) {
  if (auto strong = weak.lock())
    caf::anon_send(caf::actor_cast<sandbox_actor>(strong), sbx_done_atom::value, token,
                   std::move(result));
}

} // namespace

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

namespace {

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
    [self](sbx_exec_atom, const exec_spec& request) { return handle_exec(self, request); },
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
    [self](sbx_status_atom, const std::string& id) -> caf::result<process_view> {
      auto* proc = find_process(self, id);
      if (proc == nullptr)
        return make_error(unknown_process(id));
      return proc->info;
    },
    [self](sbx_file_atom, file_request& request) { return handle_file(self, request); },
    [self](sbx_pause_atom) { return handle_freeze(self, true); },
    [self](sbx_resume_atom) { return handle_freeze(self, false); },
    [self](sbx_stats_atom) { return handle_stats(self); },
    [self](sbx_usage_atom) { return handle_usage(self); },
    [self](sbx_ckpt_atom, const std::string& checkpoint_id, bool include_memory) {
      return handle_checkpoint(self, checkpoint_id, include_memory);
    },
    [self](sbx_destroy_atom) { return handle_destroy(self, false); },
    [self](sbx_release_atom) { return handle_destroy(self, true); },
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
    [self](sbx_expire_atom, uint64_t session, uint64_t use) {
      on_write_expired(self, session, use);
    },
    [self](sbx_watch_atom, const schema::watch_request& request) {
      return handle_watch(self, request);
    },
    [self](sbx_wwake_atom, const std::string& id, uint64_t token) {
      on_watch_wake(self, id, token);
    },
    [self](sbx_widle_atom, const std::string& id, uint64_t use) { on_watch_idle(self, id, use); },
  };
}

} // namespace

} // namespace airlock::worker::sandbox_detail

namespace airlock::worker {

sandbox_actor spawn_sandbox(caf::actor_system& system, sandbox_parts parts,
                            sandbox_actor_options options) {
  return system.spawn(sandbox_detail::sandbox_impl, std::move(parts), options);
}

} // namespace airlock::worker
