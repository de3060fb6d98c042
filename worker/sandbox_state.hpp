#pragma once
// The sandbox actor's state, shared by the files that implement it (internal
// to worker/: sandbox_actor.cpp wires the behaviour and runs guest and
// blocking jobs, sandbox_processes.cpp the process table, guest events, exec
// and output pacing, sandbox_waiters.cpp the reads and waits that park until
// output or an exit arrives, sandbox_files.cpp file pass-through,
// sandbox_lifecycle.cpp pause, resume, stats and destroy). Not a public
// header: sandbox_actor.hpp is the contract.

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/errors.hpp"
#include "worker/sandbox_actor.hpp"

namespace airlock::worker::sandbox_detail {

struct process_entry {
  process_view info;
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
  caf::typed_response_promise<process_view> promise;
};

struct pending_start {
  std::string process_id;
  bool report_start_failure = false;
  caf::typed_response_promise<std::string> promise;
};

/// A write moved in parts (sandbox_uploads.cpp).
struct write_session {
  uint32_t guest_id = 0; ///< the guest's write id
  std::string path;
  uint64_t bytes = 0; ///< bytes posted to the guest so far
  uint64_t uses = 0;  ///< bumped by every call: an expiry of an older use is stale
  status failure;     ///< the guest failed the write between calls
};

/// A directory watch (sandbox_watches.cpp): the guest's watch and the
/// changes it reported that its reader has not taken yet.
struct watch_entry {
  uint32_t guest_id = 0;
  bool started = false;                     ///< the guest watches
  std::deque<schema::watch_change> changes; ///< at most watch_changes_max
  bool ended = false;                       ///< nothing more comes from the guest
  status failure;                           ///< why it ended (ok: closed)
  std::optional<caf::typed_response_promise<schema::watch_batch>> reader; ///< a parked read
  uint64_t reader_token = 0;
  uint64_t uses = 0; ///< bumped by every call: an idle expiry of an older use is stale
};

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
  std::map<uint64_t, write_session> writes;       ///< by session id
  std::map<std::string, watch_entry> watches;     ///< by watch id
  std::map<uint32_t, std::string> watch_by_guest; ///< the guest's watch id -> ours
  uint32_t next_watch = 0;
  uint64_t next_write = 0;
  uint64_t next_token = 0;
  uint64_t next_process = 0;
  bool paused = false;
  bool destroying = false;
  bool checkpointing = false; ///< a checkpoint job runs; a destroy waits for it
  bool keep_root = false;     ///< the destroy under way leaves the root on disk
  bool channel_closed = false;
  /// The previous usage reading (CPU time, and the monotonic clock when it
  /// was read; 0: none yet): the next one's CPU share is measured from it.
  uint64_t usage_mark_cpu_ns = 0;
  int64_t usage_mark_ms = 0;
};

using self_ptr = sandbox_actor::stateful_pointer<sandbox_state>;

template <class T>
void deliver_status(caf::typed_response_promise<T>& promise, const status& failure) {
  promise.deliver(make_error(failure));
}

// ---- jobs and the behaviour (sandbox_actor.cpp) -----------------------------

/// The actor clock in milliseconds: process start and end times.
int64_t now_ms(self_ptr self);

/// Runs `work` on the guest link thread; `then` runs on the actor with its result.
status post_guest(self_ptr self, std::function<job_result(guest::guest_client&)> work,
                  std::function<void(job_result&)> then);

/// Runs `work` on a fresh blocking actor (own thread): runtime and rootfs calls.
void post_blocking(self_ptr self, std::function<job_result()> work,
                   std::function<void(job_result&)> then);

// ---- processes, guest events and output pacing (sandbox_processes.cpp) ------

process_entry* find_process(self_ptr self, const std::string& id);
status unknown_process(const std::string& id);
bool has_ended(const process_entry& proc);
std::vector<process_view> list_processes(self_ptr self);
caf::result<std::string> handle_exec(self_ptr self, const exec_spec& request);

/// Posts a guest job for a stream-directed call and replies true or the error.
caf::result<bool> stream_call(self_ptr self, const std::string& process_id,
                              std::function<status(guest::guest_client&, uint32_t)> call);

/// A message of the guest channel (started, output, exited, error).
void on_event(self_ptr self, guest_event& event);

/// A process reached its exec timeout: SIGKILL to its group.
void on_exec_timeout(self_ptr self, const std::string& id);

/// A combined-stream read of `proc` from `offset` arrived: the reader is active.
void on_reader(self_ptr self, process_entry& proc, uint64_t offset);

/// The pace timer of process `id` fired.
void on_pace_check(self_ptr self, const std::string& id);

// ---- reads and waits that park (sandbox_waiters.cpp) ------------------------

caf::result<read_reply> handle_read(self_ptr self, const read_request& request);
caf::result<output_reply> handle_output(self_ptr self, output_read request);
caf::result<process_view> handle_wait(self_ptr self, const std::string& id, uint32_t wait_ms);

/// Answers every waiter on `process_id` that can now be answered.
void wake_readers(self_ptr self, const std::string& process_id);
void fail_all_readers(self_ptr self, const status& why);

/// A waiter's time is up: it gets what there is now.
void on_reader_timeout(self_ptr self, uint64_t token);

// ---- file pass-through (sandbox_files.cpp) ----------------------------------

caf::result<file_reply> handle_file(self_ptr self, file_request& request);

/// The bound of a guest call moving `bytes` of file data.
int file_timeout_ms(const sandbox_actor_options& options, uint64_t bytes);

// ---- write sessions (sandbox_uploads.cpp) -----------------------------------

/// write_open, write_part, write_commit, write_abort.
caf::result<file_reply> handle_write_session(self_ptr self, file_request& request);

/// The session's idle time is up, unless it was used after `use`.
void on_write_expired(self_ptr self, uint64_t session, uint64_t use);

/// A guest error about a write between calls; true when it was a session's.
bool on_write_error(self_ptr self, const guest::error_reply& msg);

std::string session_too_large_message(const std::string& path, uint64_t size, uint64_t bytes_max);

// ---- directory watches (sandbox_watches.cpp) --------------------------------

/// open, read, close.
caf::result<schema::watch_batch> handle_watch(self_ptr self, const schema::watch_request& request);

/// The guest reported changes of a watch / ended one.
void on_watch_events(self_ptr self, guest::watch_events& msg);
void on_watch_error(self_ptr self, const guest::error_reply& msg);

/// A parked read (token) of watch `id` waited its time: it gets what there is.
void on_watch_wake(self_ptr self, const std::string& id, uint64_t token);

/// Watch `id` got no call since its use number `use` for watch_idle_ms: its
/// reader went away; the guest's watch is stopped.
void on_watch_idle(self_ptr self, const std::string& id, uint64_t use);

/// The sandbox is going away (or its guest): every watch ends with `why`.
void end_all_watches(self_ptr self, const status& why);

// ---- lifecycle (sandbox_lifecycle.cpp) --------------------------------------

caf::result<bool> handle_freeze(self_ptr self, bool pause);
caf::result<sandbox_stats> handle_stats(self_ptr self);
caf::result<schema::sandbox_usage> handle_usage(self_ptr self);
/// Destroys the sandbox; with keep_root its root filesystem stays on disk.
caf::result<bool> handle_destroy(self_ptr self, bool keep_root);
caf::result<uint64_t> handle_checkpoint(self_ptr self, const std::string& checkpoint_id,
                                        bool include_memory);

} // namespace airlock::worker::sandbox_detail
