#pragma once
// sandbox_actor: one per running sandbox. Owns the runtime's handle of it
// (by id), the guest channel (through a guest_link thread: the actor itself
// never blocks), the process table and a bounded output buffer per process
// (stdout and stderr interleaved in arrival order, worker/output_log.hpp) from
// which readers resume at a byte offset of the combined stream or of one
// stream.
//
// Messages are local only (the worker and airlockd's API actors live in one
// process) but values all the same: each has an inspect() (below) and a type
// ID (worker/type_ids.hpp); resources (the guest client, its descriptor) reach
// the actor as spawn arguments, never inside a message.

#include <caf/atom.hpp>
#include <caf/typed_actor.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "actors/cluster_protocol.hpp" // inspect() of exec_spec, process_view
#include "guest/client.hpp"
#include "guest/protocol.hpp"
#include "worker/guest_inspect.hpp"
#include "worker/guest_link.hpp"
#include "worker/output_log.hpp"
#include "worker/rootfs/rootfs_driver.hpp"
#include "worker/runtime/sandbox_runtime.hpp"

namespace airlock::worker {

// Atoms: at most 10 characters, unique in airlock.
using sbx_exec_atom = caf::atom_constant<caf::atom("sbxexec")>;
using sbx_read_atom = caf::atom_constant<caf::atom("sbxread")>;
using sbx_stdin_atom = caf::atom_constant<caf::atom("sbxstdin")>;
using sbx_signal_atom = caf::atom_constant<caf::atom("sbxsignal")>;
using sbx_resize_atom = caf::atom_constant<caf::atom("sbxresize")>;
using sbx_status_atom = caf::atom_constant<caf::atom("sbxstatus")>;
using sbx_file_atom = caf::atom_constant<caf::atom("sbxfile")>;
using sbx_pause_atom = caf::atom_constant<caf::atom("sbxpause")>;
using sbx_resume_atom = caf::atom_constant<caf::atom("sbxresume")>;
using sbx_stats_atom = caf::atom_constant<caf::atom("sbxstats")>;
using sbx_usage_atom = caf::atom_constant<caf::atom("sbxusage")>;
using sbx_destroy_atom = caf::atom_constant<caf::atom("sbxdestroy")>;
using sbx_release_atom = caf::atom_constant<caf::atom("sbxrelease")>;
using sbx_output_atom = caf::atom_constant<caf::atom("sbxoutput")>;
using sbx_wait_atom = caf::atom_constant<caf::atom("sbxwait")>;
using sbx_procs_atom = caf::atom_constant<caf::atom("sbxprocs")>;
using sbx_ckpt_atom = caf::atom_constant<caf::atom("sbxckpt")>;
using sbx_watch_atom = caf::atom_constant<caf::atom("sbxwatch")>;
// Internal to the sandbox actor.
using sbx_event_atom = caf::atom_constant<caf::atom("sbxevent")>;
using sbx_done_atom = caf::atom_constant<caf::atom("sbxdone")>;
using sbx_wake_atom = caf::atom_constant<caf::atom("sbxwake")>;
using sbx_kill_atom = caf::atom_constant<caf::atom("sbxkill")>;
using sbx_pace_atom = caf::atom_constant<caf::atom("sbxpace")>;
using sbx_expire_atom = caf::atom_constant<caf::atom("sbxexpire")>;
using sbx_wwake_atom = caf::atom_constant<caf::atom("sbxwwake")>;
using sbx_widle_atom = caf::atom_constant<caf::atom("sbxwidle")>;

/// Limits and timeouts of one sandbox actor.
struct sandbox_actor_options {
  /// Output bytes retained per process (stdout and stderr together, in
  /// arrival order); older bytes are dropped and reading them fails.
  /// Default: 1 MiB.
  size_t output_buffer_bytes = size_t{1} << 20;
  /// Stream changes (stdout to stderr or back) retained per process; beyond
  /// it the oldest output is dropped as if the buffer overflowed, so output
  /// that alternates streams byte by byte cannot cost a run per byte.
  /// Default: 16384.
  size_t output_runs_max = 16384;
  /// Reader pacing: while a combined-stream reader (sbx_output) of a process
  /// is active, the guest gets output credit only as far as the buffer can
  /// hold what that reader has not read yet, so a fast process is slowed
  /// down instead of its output dropped. A reader counts as active for this
  /// long after its last read (or while a read of it waits); then credit
  /// flows again and the oldest bytes are dropped, so a process nobody reads
  /// never blocks for good. 0: no pacing. Default: 30000.
  uint32_t reader_idle_ms = 30'000;
  /// A new process is paced as if read at offset 0 for this long, so a client
  /// that starts a process and then attaches (SSE) gets its first bytes.
  /// Default: 2000.
  uint32_t first_reader_wait_ms = 2'000;
  /// Most bytes one read returns. Default: 256 KiB.
  size_t read_bytes_max = size_t{256} << 10;
  /// Longest a read may wait for new output. Default: 60000.
  uint32_t read_wait_ms_max = 60'000;
  /// Processes kept in the table (running ones and finished ones whose output
  /// may still be read); the oldest finished one is forgotten first, and exec
  /// fails with resource_exhausted when all are running. Default: 256.
  size_t processes_max = 256;
  /// Readers waiting for output at once. Default: 1024.
  size_t waiting_readers_max = 1024;
  /// Bound on one guest call (start, stdin, signal, one file operation).
  /// Default: 10000.
  int guest_call_timeout_ms = 10'000;
  /// Largest file read or written through the files pass-through. One read
  /// or one-message write holds it whole in memory here; a write session
  /// (file_op::write_open ..) holds one part at a time, and this bounds the
  /// sum of its parts. Default: 256 MiB.
  uint64_t file_bytes_max = uint64_t{256} << 20;
  /// A file read or write gets guest_call_timeout_ms plus its size at this
  /// rate. Default: 8 MiB/s.
  uint64_t file_rate_bytes_per_s_min = uint64_t{8} << 20;
  /// Write sessions open at once; write_open fails with resource_exhausted
  /// beyond it. Below the guest's own stream limit (64). Default: 8.
  size_t write_sessions_max = 8;
  /// A write session that gets no call for this long is aborted (its
  /// temporary file removed): its client or the relaying control plane went
  /// away. Default: 60000.
  uint32_t write_session_idle_ms = 60'000;
  /// Directory watches open at once; an open beyond it is
  /// resource_exhausted. Below the guest's own limit (32). Default: 16.
  size_t watches_max = 16;
  /// Changes held per watch until its reader takes them; one more ends the
  /// watch (resource_exhausted): a reader that falls behind is dropped, not
  /// buffered for. Default: 4096.
  size_t watch_changes_max = 4096;
  /// Changes one read returns at most. Default: 512.
  size_t watch_read_changes_max = 512;
  /// A watch that gets no call for this long is stopped: its reader went
  /// away (the data plane reads at least every output_wait_ms). Default: 60000.
  uint32_t watch_idle_ms = 60'000;
  /// The guest link's bounds. Default: see guest_link_options.
  guest_link_options link;
};

// The process request and the process row are the cluster protocol's
// (schema/cluster.hpp): the node actor resolves a request (run_as, the whole
// env) before it gets here; the guest protocol encodes it for the guest.
using schema::exec_spec;
using schema::process_state;
using schema::process_view;

/// Read output of process `process_id`, stream `fd` (1 or 2), from `offset`.
struct read_request {
  std::string process_id;
  uint8_t fd = 1;
  uint64_t offset = 0;
  size_t max_bytes = 0; ///< 0: options.read_bytes_max
  uint32_t wait_ms = 0; ///< wait this long for bytes when none are available
};

struct read_reply {
  std::string bytes;
  uint64_t offset = 0;       ///< where `bytes` start
  uint64_t next_offset = 0;  ///< the offset to read from next
  uint64_t start_offset = 0; ///< oldest byte still retained
  bool exited = false;       ///< the process ended and every byte up to next_offset is all
};

/// Read output of process `process_id` from `offset` of its combined stream.
struct output_read {
  std::string process_id;
  uint64_t offset = 0;
  bool want_stdout = true;
  bool want_stderr = true;
  size_t max_bytes = 0; ///< 0: options.read_bytes_max
  uint32_t wait_ms = 0; ///< wait this long for wanted bytes when none are available
};

struct output_reply {
  std::vector<output_piece> pieces; ///< in order; filtered streams left out
  uint64_t next_offset = 0;         ///< combined offset to read from next
  uint64_t start_offset = 0;        ///< oldest combined byte still retained
  bool exited = false;              ///< the process ended and next_offset is the end
  int32_t exit_code = 0;            ///< valid when exited
  int32_t signal = 0;               ///< valid when exited
};

/// The verbs are the cluster protocol's (schema::file_verb): write moves a
/// whole file in one request; write_open, write_part (in order) and
/// write_commit or write_abort move one in parts through a session, so that
/// no message holds more than a part.
using file_op = schema::file_verb;

/// One file operation, resolved inside the sandbox by the guest.
struct file_request {
  file_op op = file_op::stat;
  std::string path;
  std::string to;      ///< rename target
  std::string data;    ///< write, write_part
  uint64_t offset = 0; ///< read; write_part: where `data` goes (the session's bytes so far)
  uint64_t length = 0; ///< read; 0: to the end (bounded by file_bytes_max)
  uint32_t mode = 0;
  bool parents = false;   ///< write, write_open, mkdir
  bool recursive = false; ///< remove
  bool follow = false;    ///< stat
  uint64_t session = 0;   ///< write_part, write_commit, write_abort
};

struct file_reply {
  std::string data;     ///< read
  uint64_t bytes = 0;   ///< write, write_commit: bytes written; write_part: bytes so far
  uint64_t session = 0; ///< write_open
  std::vector<guest::file_info> entries;
  bool truncated = false;
  guest::file_info info; ///< stat
};

/// Internal: a guest message forwarded by the link thread.
struct guest_event {
  guest::guest_message message;
};

/// Internal: the outcome of a job run off the actor.
struct job_result {
  status outcome;
  uint32_t stream = 0;
  file_reply file;
  sandbox_stats stats;
  uint64_t size_bytes = 0; ///< checkpoint
  schema::sandbox_usage usage{};
  int64_t read_at_ms = 0; ///< usage: the monotonic clock when its CPU time was read
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, read_request& x) {
  return f(caf::meta::type_name("read_request"), x.process_id, x.fd, x.offset, x.max_bytes,
           x.wait_ms);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, read_reply& x) {
  return f(caf::meta::type_name("read_reply"), x.bytes, x.offset, x.next_offset, x.start_offset,
           x.exited);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, output_read& x) {
  return f(caf::meta::type_name("output_read"), x.process_id, x.offset, x.want_stdout,
           x.want_stderr, x.max_bytes, x.wait_ms);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, output_piece& x) {
  return f(caf::meta::type_name("output_piece"), x.fd, x.end_offset, x.bytes);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, output_reply& x) {
  return f(caf::meta::type_name("output_reply"), x.pieces, x.next_offset, x.start_offset, x.exited,
           x.exit_code, x.signal);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, file_request& x) {
  return f(caf::meta::type_name("file_request"), x.op, x.path, x.to, x.data, x.offset, x.length,
           x.mode, x.parents, x.recursive, x.follow, x.session);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, file_reply& x) {
  return f(caf::meta::type_name("file_reply"), x.data, x.bytes, x.entries, x.truncated, x.info,
           x.session);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, guest_event& x) {
  auto message = variant_field{x.message};
  return f(caf::meta::type_name("guest_event"), message);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, sandbox_stats& x) {
  return f(caf::meta::type_name("sandbox_stats"), x.memory_bytes, x.pids_current, x.cpu_usage_ns,
           x.oom_kills, x.frozen);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, job_result& x) {
  return f(caf::meta::type_name("job_result"), x.outcome, x.stream, x.file, x.stats, x.usage,
           x.read_at_ms);
}

/// Everything a sandbox actor takes over from its creator.
struct sandbox_parts {
  std::string id;
  sandbox_handle handle;
  std::shared_ptr<sandbox_runtime> runtime;
  std::shared_ptr<rootfs_driver> rootfs;
  std::unique_ptr<guest::guest_client> client; ///< handshaken
  int channel_fd = -1;                         ///< the client's descriptor (polled only)
  /// False when the sandbox's files live in a disk image of its own (a
  /// microvm sandbox), not in its root on the rootfs driver: no checkpoints.
  bool files_in_root = true;
};

using sandbox_actor = caf::typed_actor<
  /// Starts a process; replies with its id ("proc_<n>") once the guest has
  /// started it. Errors: wrong_state (paused or destroying), invalid_argument
  /// (no argv/cmd), resource_exhausted (process table full), and the guest's
  /// error (not_found for a missing program, ...). Not idempotent.
  caf::replies_to<sbx_exec_atom, exec_spec>::with<std::string>,
  /// Output from an offset. Returns at once when bytes are available or the
  /// process ended, else waits up to wait_ms (then replies with no bytes).
  /// Errors: not_found (unknown process), wrong_state (offset before the
  /// retained window: the bytes were dropped; resume from start_offset, like
  /// HTTP 410), invalid_argument (offset past the end, fd not 1/2). Idempotent.
  caf::replies_to<sbx_read_atom, read_request>::with<read_reply>,
  /// Output of the combined stream (stdout and stderr in arrival order) from
  /// a combined offset, of the wanted streams; unwanted bytes are skipped
  /// (next_offset moves past them). Returns at once when wanted bytes are
  /// available or the process ended, else waits up to wait_ms. Errors:
  /// not_found (unknown process), gone (offset before the retained window;
  /// the message names the offset to resume from), invalid_argument (offset
  /// past the end). Idempotent.
  caf::replies_to<sbx_output_atom, output_read>::with<output_reply>,
  /// The process's row once it has ended, or after wait_ms (then as it is).
  /// Errors: not_found. Idempotent.
  caf::replies_to<sbx_wait_atom, std::string, uint32_t>::with<process_view>,
  /// The process table: running processes and finished ones still kept,
  /// oldest first. Idempotent.
  caf::replies_to<sbx_procs_atom>::with<std::vector<process_view>>,
  /// Writes stdin bytes (process id, bytes, then close stdin if true). Errors:
  /// not_found, wrong_state (started without stdin, or stdin closed),
  /// timeout (no stdin credit: the process does not read). Not idempotent.
  caf::replies_to<sbx_stdin_atom, std::string, std::string, bool>::with<bool>,
  /// Sends a signal to the process's group. Errors: not_found. Idempotent
  /// for an exited process (ok, no effect).
  caf::replies_to<sbx_signal_atom, std::string, int32_t>::with<bool>,
  /// Resizes the process's PTY (rows, cols). Errors: not_found, wrong_state
  /// (no PTY). Idempotent.
  caf::replies_to<sbx_resize_atom, std::string, uint16_t, uint16_t>::with<bool>,
  /// The process's row in the table. Errors: not_found. Idempotent.
  caf::replies_to<sbx_status_atom, std::string>::with<process_view>,
  /// A file operation inside the sandbox. Errors: the guest's (not_found,
  /// permission_denied, invalid_argument for paths escaping the root, ...),
  /// invalid_argument for a read of a directory ("is a directory"),
  /// too_large beyond file_bytes_max, wrong_state while paused.
  /// read/list/stat are idempotent; write is atomic.
  /// A write session: write_open (path, mode, parents) replies with a
  /// session id; write_part (session, offset = bytes so far, data) replies
  /// once the guest took the part; write_commit renames the file into place
  /// and replies with its size; write_abort removes the temporary file
  /// (idempotent). Until the commit the old file is untouched. Errors:
  /// resource_exhausted (write_sessions_max open), not_found (unknown or
  /// expired session), invalid_argument (offset is not the bytes so far),
  /// too_large (past file_bytes_max; the session is aborted), and the
  /// guest's (the session is gone then).
  caf::replies_to<sbx_file_atom, file_request>::with<file_reply>,
  /// Freezes every process of the sandbox (runtime freezer). Idempotent.
  caf::replies_to<sbx_pause_atom>::with<bool>,
  /// Thaws it. Idempotent.
  caf::replies_to<sbx_resume_atom>::with<bool>,
  /// cgroup counters from the runtime (memory, pids, cpu, frozen). Idempotent.
  caf::replies_to<sbx_stats_atom>::with<sandbox_stats>,
  /// Resource use now: cgroup counters, the root filesystem's size and the
  /// CPU share since the previous reading (over a short window when there
  /// was none recently), sampled_at_ms on the actor clock. Idempotent.
  caf::replies_to<sbx_usage_atom>::with<schema::sandbox_usage>,
  /// Takes checkpoint `checkpoint_id` of the sandbox's files, consistent:
  /// freezes its processes (unless it is paused already), snapshots its root
  /// filesystem read-only, thaws them. A write in progress is either in the
  /// checkpoint whole or not at all. Errors: wrong_state (being destroyed,
  /// or a checkpoint or pause already in flight), already_exists,
  /// unavailable (no rootfs driver). A destroy waits for it.
  caf::replies_to<sbx_ckpt_atom, std::string, bool>::with<uint64_t>,
  /// A directory watch inside the sandbox. open (path, recursive) replies
  /// with the watch id once the guest watches; read replies with the
  /// changes since the last read, at once when there are some or the watch
  /// ended, else after up to wait_ms (at most read_wait_ms_max); the read
  /// that returns `ended` is the last (the watch is then forgotten); close
  /// stops it (idempotent). Errors: not_found (a missing directory, an
  /// unknown or expired watch), invalid_argument (a file, a relative path),
  /// resource_exhausted (watches_max, the guest's limits), wrong_state
  /// (paused). A watch ends with resource_exhausted when its reader leaves
  /// more than watch_changes_max changes unread, not_found when its
  /// directory goes away, and is stopped after watch_idle_ms without a call.
  caf::replies_to<sbx_watch_atom, schema::watch_request>::with<schema::watch_batch>,
  /// Closes the guest channel, destroys the runtime sandbox and deletes its
  /// root filesystem, then the actor exits. Pending reads fail with
  /// unavailable. Idempotent while it runs (later calls join it).
  caf::replies_to<sbx_destroy_atom>::with<bool>,
  /// As destroy, but keeps the root filesystem: a worker that stops leaves
  /// its sandboxes' files for the next run to bring back. Idempotent.
  caf::replies_to<sbx_release_atom>::with<bool>,
  /// Internal: a guest message from the link thread.
  caf::reacts_to<sbx_event_atom, guest_event>,
  /// Internal: a job (token) finished off the actor.
  caf::reacts_to<sbx_done_atom, uint64_t, job_result>,
  /// Internal: a waiting reader (token) timed out.
  caf::reacts_to<sbx_wake_atom, uint64_t>,
  /// Internal: the process (id) reached its exec timeout.
  caf::reacts_to<sbx_kill_atom, std::string>,
  /// Internal: re-checks whether the process (id) still has an active reader.
  caf::reacts_to<sbx_pace_atom, std::string>,
  /// Internal: write session (id) idle since its use number (second) expires.
  caf::reacts_to<sbx_expire_atom, uint64_t, uint64_t>,
  /// Internal: a parked read (watch id, token) of a watch waited its time.
  caf::reacts_to<sbx_wwake_atom, std::string, uint64_t>,
  /// Internal: watch (id) idle since its use number (second) expires.
  caf::reacts_to<sbx_widle_atom, std::string, uint64_t>>;

/// Spawns the actor for a created, guest-ready sandbox and starts its guest
/// link. When the actor ends without destroy (its owner went away), the link
/// closes the channel: the guest then kills its processes and exits, which
/// ends the sandbox's init; the runtime's and rootfs's leftovers are for the
/// next worker start to clean up (see docs/worker.md).
sandbox_actor spawn_sandbox(caf::actor_system& system, sandbox_parts parts,
                            sandbox_actor_options options = {});

} // namespace airlock::worker
