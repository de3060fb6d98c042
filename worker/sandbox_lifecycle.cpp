// The sandbox actor's lifecycle: pause and resume (the runtime freezes the
// sandbox), stats, and destroy (stop the guest link, the runtime's sandbox
// and its rootfs, off the actor).

#include <chrono>
#include <string>
#include <thread>
#include <utility>

#include "actors/errors.hpp"
#include "worker/runtime/sys.hpp"
#include "worker/sandbox_state.hpp"

namespace airlock::worker::sandbox_detail {

caf::result<bool> handle_freeze(self_ptr self, bool pause) {
  auto& st = self->state;
  if (st.destroying)
    return make_error(errc::wrong_state, "sandbox " + st.parts.id + " is being destroyed");
  if (st.checkpointing)
    return make_error(errc::wrong_state,
                      "sandbox " + st.parts.id + " is taking a checkpoint; retry when it is done");
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

namespace {

/// A CPU share needs two readings this far apart at least; without a recent
/// previous reading the job takes both.
constexpr int64_t usage_window_ms = 100;

double cpu_percent(uint64_t from_ns, uint64_t to_ns, double elapsed_us) {
  if (elapsed_us <= 0 || to_ns < from_ns)
    return 0;
  return static_cast<double>(to_ns - from_ns) / (elapsed_us * 10);
}

} // namespace

caf::result<schema::sandbox_usage> handle_usage(self_ptr self) {
  auto promise = self->make_response_promise<schema::sandbox_usage>();
  auto& st = self->state;
  auto runtime = st.parts.runtime;
  auto rootfs = st.parts.rootfs;
  auto id = st.parts.id;
  // The share's window is timed where the CPU time is read (in the job), not
  // where the actor hears of it: a late delivery would stretch one window and
  // shrink the next, and a busy loop would read more than 100 % of one CPU.
  const auto monotonic_now = [] { return static_cast<int64_t>(monotonic_ms()); };
  const bool have_mark =
    st.usage_mark_ms > 0 && monotonic_now() - st.usage_mark_ms >= usage_window_ms;
  post_blocking(
    self,
    [runtime, rootfs, id, have_mark, monotonic_now] {
      job_result out;
      using clock = std::chrono::steady_clock;
      uint64_t first_ns = 0;
      auto first_at = clock::now();
      if (!have_mark) {
        // The window opens before the first reading and closes after the
        // second, in microseconds: it never ends up shorter than the CPU
        // time it holds (a busy loop reads at most its CPU limit).
        first_at = clock::now();
        auto first = runtime->stats(id);
        if (!first) {
          out.outcome = first.error();
          return out;
        }
        first_ns = first->cpu_usage_ns;
        std::this_thread::sleep_for(std::chrono::milliseconds(usage_window_ms));
      }
      auto stats = runtime->stats(id);
      out.read_at_ms = monotonic_now();
      if (!stats) {
        out.outcome = stats.error();
        return out;
      }
      out.usage.cpu_usage_ns = stats->cpu_usage_ns;
      out.usage.memory_bytes = stats->memory_bytes;
      out.usage.processes = stats->pids_current;
      if (!have_mark)
        out.usage.cpu_used_pct =
          cpu_percent(first_ns, stats->cpu_usage_ns,
                      static_cast<double>(std::chrono::duration_cast<std::chrono::microseconds>(
                                            clock::now() - first_at)
                                            .count()));
      // A disk reading that fails leaves 0: the rest is still worth answering.
      if (rootfs)
        if (auto disk = rootfs->usage(id))
          out.usage.disk_used_bytes = disk->referenced_bytes;
      return out;
    },
    [self, promise, have_mark](job_result& done) mutable {
      if (!done.outcome) {
        promise.deliver(make_error(done.outcome));
        return;
      }
      auto& state = self->state;
      auto usage = done.usage;
      const auto now = now_ms(self);
      if (have_mark)
        usage.cpu_used_pct =
          cpu_percent(state.usage_mark_cpu_ns, usage.cpu_usage_ns,
                      static_cast<double>(done.read_at_ms - state.usage_mark_ms) * 1000);
      usage.sampled_at_ms = now;
      state.usage_mark_cpu_ns = usage.cpu_usage_ns;
      state.usage_mark_ms = done.read_at_ms;
      promise.deliver(usage);
    });
  return promise;
}

namespace {

/// Stops everything the sandbox has, off the actor; answers the destroy
/// waiters when done.
void start_destroy(self_ptr self) {
  auto& st = self->state;
  const status gone = make_status(errc::unavailable, "sandbox " + st.parts.id + " was destroyed");
  fail_all_readers(self, gone);
  for (auto& [stream, pending] : st.pending_exec)
    deliver_status(pending.promise, gone);
  st.pending_exec.clear();
  auto link = std::move(st.link); // the helper drops the last reference: joins off the actor
  auto runtime = st.parts.runtime;
  auto rootfs = st.keep_root ? nullptr : st.parts.rootfs;
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
}

} // namespace

caf::result<bool> handle_destroy(self_ptr self, bool keep_root) {
  auto& st = self->state;
  auto promise = self->make_response_promise<bool>();
  st.destroy_waiters.push_back(promise);
  if (st.destroying)
    return promise;
  st.destroying = true;
  st.keep_root = keep_root;
  // A checkpoint in flight finishes first (its snapshot reads the root the
  // destroy deletes); its completion starts the destroy.
  if (!st.checkpointing)
    start_destroy(self);
  return promise;
}

namespace {

/// A VM's checkpoint: its machine (memory, devices, disk) saved by the
/// runtime under the checkpoint's id, and the rootfs driver's checkpoint of
/// its root beside it (what the worker lists, and what a fork's root comes
/// from). A repeat after a lost answer finds the machine and makes sure the
/// root's checkpoint exists too, then answers already_exists.
result<uint64_t> checkpoint_machine(sandbox_runtime& runtime, rootfs_driver& rootfs,
                                    const std::string& id, const std::string& checkpoint_id) {
  auto saved = runtime.save_machine(id, checkpoint_id);
  if (!saved && saved.code() != errc::already_exists)
    return saved.error();
  if (!rootfs.checkpoint_path(checkpoint_id)) {
    if (auto taken = rootfs.checkpoint(id, checkpoint_id); !taken) {
      if (saved)
        (void)runtime.delete_machine(checkpoint_id);
      return taken.error();
    }
  }
  return saved;
}

} // namespace

caf::result<uint64_t> handle_checkpoint(self_ptr self, const std::string& checkpoint_id,
                                        bool include_memory) {
  auto& st = self->state;
  if (st.destroying)
    return make_error(errc::wrong_state, "sandbox " + st.parts.id + " is being destroyed");
  if (st.checkpointing)
    return make_error(errc::wrong_state, "sandbox " + st.parts.id
                                           + " is taking a checkpoint already; retry when it is "
                                             "done");
  if (!st.parts.rootfs)
    return make_error(errc::unavailable, "this worker has no rootfs driver: no checkpoints");
  // A VM's files are in its disk, whose guest may not have written back
  // what it cached: only the machine as a whole is consistent.
  const bool machine = !st.parts.files_in_root;
  if (include_memory != machine)
    return make_error(errc::unimplemented,
                      machine ? "sandbox " + st.parts.id
                                  + " runs in a microVM, whose checkpoints always hold its memory"
                              : "sandbox " + st.parts.id
                                  + " runs in the namespace runtime, whose checkpoints hold its "
                                    "files only");
  auto promise = self->make_response_promise<uint64_t>();
  auto runtime = st.parts.runtime;
  auto rootfs = st.parts.rootfs;
  auto id = st.parts.id;
  const bool was_paused = st.paused;
  st.checkpointing = true;
  st.paused = true; // a frozen guest answers nothing: hold new guest work
  post_blocking(
    self,
    [runtime, rootfs, id, checkpoint_id, was_paused, machine] {
      job_result out;
      if (machine) {
        // The runtime stops the VM while it saves it and lets it go on
        // (or stay paused) after.
        auto taken = checkpoint_machine(*runtime, *rootfs, id, checkpoint_id);
        if (taken)
          out.size_bytes = *taken;
        else
          out.outcome = taken.error();
        return out;
      }
      // Frozen, no process is between two writes of its own: the snapshot
      // holds every write() that returned and none that had not started.
      if (!was_paused)
        if (out.outcome = runtime->pause(id); !out.outcome)
          return out;
      auto taken = rootfs->checkpoint(id, checkpoint_id);
      if (taken)
        out.size_bytes = *taken;
      else
        out.outcome = taken.error();
      if (!was_paused)
        if (auto thawed = runtime->resume(id); !thawed && out.outcome)
          out.outcome = thawed;
      return out;
    },
    [self, promise, was_paused](job_result& done) mutable {
      auto& state = self->state;
      state.checkpointing = false;
      state.paused = was_paused;
      if (done.outcome)
        promise.deliver(done.size_bytes);
      else
        promise.deliver(make_error(done.outcome));
      if (state.destroying)
        start_destroy(self);
    });
  return promise;
}

} // namespace airlock::worker::sandbox_detail
