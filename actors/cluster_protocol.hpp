#pragma once
// The messages between the control plane and workers. These are the only
// way the control plane reaches a worker: in `airlockd serve` they are local
// messages, between `airlockd control` and `airlockd worker` they cross hosts
// as CAF remote messages. Everything here is serializable: stored and
// cross-host records (schema::*) travel as their Cap'n Proto bytes.
//
// Two interfaces:
// - node_actor: one per worker host. Lifecycle verbs for the control plane's
//   operations (nd_*) and the data-plane calls behind the process and file
//   routes (dp_*), so that a worker's own HTTP endpoint and a control plane
//   forwarding for simple clients use the same calls.
// - scheduler_actor: the control plane's fleet view. Workers register and
//   send heartbeats; lifecycle procedures ask it where to place a sandbox.

#include <caf/atom.hpp>
#include <caf/detail/stringification_inspector.hpp>
#include <caf/meta/load_callback.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <cstdint>
#include <string_view>
#include <type_traits>
#include <string>
#include <utility>
#include <vector>

#include "actors/errors.hpp"
#include "schema/sandbox.hpp"
#include "schema/worker.hpp"

namespace airlock::schema {

/// Records that cross hosts travel as their Cap'n Proto bytes (see messages.hpp
/// for operation_record): a mixed-version cluster still reads them.
template <class Inspector, class Record, class Decode>
typename Inspector::result_type inspect_as_capnp(Inspector& f, Record& x, const char* name,
                                                 Decode decode) {
  auto type_name = caf::meta::type_name(name);
  if constexpr (std::is_same_v<Inspector, caf::detail::stringification_inspector>) {
    auto bytes = encode(x);
    return f(type_name, bytes.size());
  } else if constexpr (Inspector::reads_state) {
    auto bytes = encode(x);
    return f(type_name, bytes);
  } else {
    std::string bytes;
    auto load = caf::meta::load_callback([&x, &bytes, decode]() -> caf::error {
      auto decoded = decode(bytes);
      if (!decoded)
        return ::airlock::make_error(decoded.error());
      x = std::move(*decoded);
      return caf::none;
    });
    return f(type_name, bytes, load);
  }
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, sandbox_record& x) {
  return inspect_as_capnp(f, x, "sandbox_record",
                          [](std::string_view bytes) { return decode_sandbox(bytes); });
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, worker_registration& x) {
  return inspect_as_capnp(f, x, "worker_registration", [](std::string_view bytes) {
    return decode_worker_registration(bytes);
  });
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, worker_heartbeat& x) {
  return inspect_as_capnp(f, x, "worker_heartbeat", [](std::string_view bytes) {
    return decode_worker_heartbeat(bytes);
  });
}

} // namespace airlock::schema

namespace airlock::actors {

// Atoms: at most 10 characters, unique in airlock.
using nd_create_atom = caf::atom_constant<caf::atom("ndcreate")>;
using nd_pause_atom = caf::atom_constant<caf::atom("ndpause")>;
using nd_resume_atom = caf::atom_constant<caf::atom("ndresume")>;
using nd_destroy_atom = caf::atom_constant<caf::atom("nddestroy")>;
using nd_list_atom = caf::atom_constant<caf::atom("ndlist")>;
using dp_exec_atom = caf::atom_constant<caf::atom("dpexec")>;
using dp_output_atom = caf::atom_constant<caf::atom("dpoutput")>;
using dp_stdin_atom = caf::atom_constant<caf::atom("dpstdin")>;
using dp_signal_atom = caf::atom_constant<caf::atom("dpsignal")>;
using dp_resize_atom = caf::atom_constant<caf::atom("dpresize")>;
using dp_proc_atom = caf::atom_constant<caf::atom("dpproc")>;
using dp_procs_atom = caf::atom_constant<caf::atom("dpprocs")>;
using dp_file_atom = caf::atom_constant<caf::atom("dpfile")>;
using sc_register_atom = caf::atom_constant<caf::atom("scregister")>;
using sc_beat_atom = caf::atom_constant<caf::atom("scbeat")>;
using sc_place_atom = caf::atom_constant<caf::atom("scplace")>;
using sc_release_atom = caf::atom_constant<caf::atom("screlease")>;
using sc_node_atom = caf::atom_constant<caf::atom("scnode")>;
using sc_workers_atom = caf::atom_constant<caf::atom("scworkers")>;

/// One sandbox as a worker reports it.
struct node_sandbox {
  std::string sandbox_id;
  schema::sandbox_state state = schema::sandbox_state::creating;
};

/// What to run (POST /v1/sandboxes/{id}/processes). Exactly one of argv and
/// cmd (cmd runs `/bin/sh -c cmd`).
struct exec_spec {
  std::vector<std::string> argv;
  std::string cmd;
  std::vector<std::pair<std::string, std::string>> env; ///< added to the sandbox's env
  std::string cwd;                                      ///< empty: /
  std::string user;                                     ///< empty or "root": root; else a name or uid
  bool pty = false;
  uint16_t rows = 24;
  uint16_t cols = 80;
  bool stdin_open = false; ///< false: the process reads EOF at once
  uint32_t timeout_s = 0;  ///< 0: none; else the process is killed (SIGKILL) after it
};

/// A process as the data plane reports it. Times are Unix ms.
struct process_view {
  std::string process_id;
  std::string state; ///< "running" | "exited"
  int32_t exit_code = 0;
  int32_t signal = 0; ///< the signal that ended it, 0 if none
  int64_t started_at_ms = 0;
  int64_t ended_at_ms = 0; ///< 0 while running
  std::string error;       ///< why it failed to start (then state is "exited", exit_code 127)
};

/// Output of one process from `offset` of its combined stream (stdout and
/// stderr interleaved in arrival order; offsets count bytes of both).
struct output_request {
  std::string process_id;
  uint64_t offset = 0;
  bool want_stdout = true;
  bool want_stderr = true;
  uint32_t max_bytes = 0; ///< 0: the worker's default
  uint32_t wait_ms = 0;   ///< wait this long for bytes when none are available
};

/// A run of bytes from one stream. `end_offset` is the combined-stream offset
/// just past its last byte (the SSE event id).
struct output_segment {
  uint8_t fd = 1; ///< 1 stdout, 2 stderr
  uint64_t end_offset = 0;
  std::string bytes;
};

struct output_batch {
  std::vector<output_segment> segments; ///< in order; filtered streams omitted
  uint64_t next_offset = 0;             ///< where to read next
  uint64_t start_offset = 0;            ///< oldest byte still retained
  bool exited = false;                  ///< the process ended and next_offset is the end
  int32_t exit_code = 0;                ///< valid when exited
  int32_t signal = 0;                   ///< valid when exited
};

enum class file_verb : uint8_t { read, write, list, stat, mkdir, remove, rename };

/// One file operation, resolved inside the sandbox (symlinks and `..` never
/// leave its root).
struct file_spec {
  file_verb verb = file_verb::stat;
  std::string path;
  std::string to;   ///< rename target
  std::string data; ///< write
  uint64_t offset = 0;
  uint64_t length = 0; ///< read; 0: to the end (bounded by the worker's limit)
  uint32_t mode = 0644;
  bool recursive = false; ///< remove
};

struct file_entry {
  std::string name;
  std::string type; ///< "file" | "dir" | "symlink" | "other"
  uint64_t size_bytes = 0;
  uint32_t mode = 0;
  int64_t modified_at_ms = 0;
};

struct file_result {
  std::string data;     ///< read
  uint64_t written = 0; ///< write
  std::vector<file_entry> entries;
  bool truncated = false;
  file_entry info; ///< stat (name = the path's last component)
};


// Serialization. For now field by field through CAF's inspector; to become
// Cap'n Proto bytes (schema/cluster.capnp) like operation_record.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, node_sandbox& x) {
  return f(caf::meta::type_name("node_sandbox"), x.sandbox_id, x.state);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, exec_spec& x) {
  return f(caf::meta::type_name("exec_spec"), x.argv, x.cmd, x.env, x.cwd, x.user, x.pty, x.rows,
           x.cols, x.stdin_open, x.timeout_s);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, process_view& x) {
  return f(caf::meta::type_name("process_view"), x.process_id, x.state, x.exit_code, x.signal,
           x.started_at_ms, x.ended_at_ms, x.error);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, output_request& x) {
  return f(caf::meta::type_name("output_request"), x.process_id, x.offset, x.want_stdout,
           x.want_stderr, x.max_bytes, x.wait_ms);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, output_segment& x) {
  return f(caf::meta::type_name("output_segment"), x.fd, x.end_offset, x.bytes);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, output_batch& x) {
  return f(caf::meta::type_name("output_batch"), x.segments, x.next_offset, x.start_offset,
           x.exited, x.exit_code, x.signal);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, file_spec& x) {
  return f(caf::meta::type_name("file_spec"), x.verb, x.path, x.to, x.data, x.offset, x.length,
           x.mode, x.recursive);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, file_entry& x) {
  return f(caf::meta::type_name("file_entry"), x.name, x.type, x.size_bytes, x.mode,
           x.modified_at_ms);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, file_result& x) {
  return f(caf::meta::type_name("file_result"), x.data, x.written, x.entries, x.truncated, x.info);
}

using node_actor = caf::typed_actor<
  /// Creates the sandbox `record` describes (id, tenant, spec) and replies
  /// once its guest is ready. Errors: already_exists, not_found (template),
  /// resource_exhausted, invalid_argument, unavailable/timeout (nothing is
  /// left behind). Idempotent: a second create of a running id replies with it.
  caf::replies_to<nd_create_atom, schema::sandbox_record>::with<node_sandbox>,
  /// Freezes the sandbox. Errors: not_found, wrong_state. Idempotent.
  caf::replies_to<nd_pause_atom, std::string>::with<node_sandbox>,
  /// Thaws it. Errors: not_found, wrong_state. Idempotent.
  caf::replies_to<nd_resume_atom, std::string>::with<node_sandbox>,
  /// Destroys it and everything it holds. Idempotent: ok for an unknown id.
  caf::replies_to<nd_destroy_atom, std::string>::with<node_sandbox>,
  /// What this worker runs (for reconciliation). Idempotent.
  caf::replies_to<nd_list_atom>::with<std::vector<node_sandbox>>,
  /// Starts a process in sandbox `id`. Errors: not_found (sandbox), wrong_state
  /// (paused), invalid_argument, resource_exhausted (process table full).
  caf::replies_to<dp_exec_atom, std::string, exec_spec>::with<process_view>,
  /// Output of a process. Errors: not_found, gone (offset before the
  /// retained window: resume from start_offset), invalid_argument (offset
  /// past the end). Idempotent.
  caf::replies_to<dp_output_atom, std::string, output_request>::with<output_batch>,
  /// Writes stdin (sandbox, process, bytes, then close if true). Errors:
  /// not_found, wrong_state (no stdin or closed), timeout (process not reading).
  caf::replies_to<dp_stdin_atom, std::string, std::string, std::string, bool>::with<bool>,
  /// Sends a signal number to the process group. Errors: not_found.
  caf::replies_to<dp_signal_atom, std::string, std::string, int32_t>::with<bool>,
  /// Resizes the process's PTY (rows, cols). Errors: not_found, wrong_state.
  caf::replies_to<dp_resize_atom, std::string, std::string, uint16_t, uint16_t>::with<bool>,
  /// One process; with wait_ms > 0 replies when it exits or the wait ends.
  caf::replies_to<dp_proc_atom, std::string, std::string, uint32_t>::with<process_view>,
  /// Running and recently ended processes of a sandbox.
  caf::replies_to<dp_procs_atom, std::string>::with<std::vector<process_view>>,
  /// A file operation. Errors: not_found, invalid_argument (a directory where
  /// a file is needed, a path escaping the root), too_large, wrong_state.
  caf::replies_to<dp_file_atom, std::string, file_spec>::with<file_result>>;

/// Where a sandbox goes, or where a worker is.
struct placement {
  std::string worker_id;
  std::string data_url;
  node_actor node;
};

/// What a procedure asks the scheduler for.
struct placement_request {
  std::string sandbox_id;
  std::string template_name;
  schema::resources needs; ///< sandboxes = 1
};

/// The scheduler's answer to a registration.
struct registration_ack {
  std::string worker_id;
  std::string token_public_key; ///< raw Ed25519 public key that signs data-plane tokens
  uint32_t heartbeat_interval_ms = 0;
};

/// One row of GET /v1/workers.
struct worker_view {
  schema::worker_registration registration;
  std::string state; ///< ready | cordoned | draining | lost
  schema::resources allocated;
  int64_t last_heartbeat_at_ms = 0;
};


template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, placement& x) {
  return f(caf::meta::type_name("placement"), x.worker_id, x.data_url, x.node);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, placement_request& x) {
  return f(caf::meta::type_name("placement_request"), x.sandbox_id, x.template_name,
           x.needs.cpu_millis, x.needs.memory_mb, x.needs.disk_mb, x.needs.sandboxes);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, registration_ack& x) {
  return f(caf::meta::type_name("registration_ack"), x.worker_id, x.token_public_key,
           x.heartbeat_interval_ms);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, worker_view& x) {
  return f(caf::meta::type_name("worker_view"), x.registration, x.state, x.allocated.cpu_millis,
           x.allocated.memory_mb, x.allocated.disk_mb, x.allocated.sandboxes,
           x.last_heartbeat_at_ms);
}

using scheduler_actor = caf::typed_actor<
  /// A worker joins (or rejoins after a restart or a lost connection: same
  /// id, new node handle). The scheduler monitors `node`; when it goes down
  /// the worker is marked lost. Idempotent.
  caf::replies_to<sc_register_atom, schema::worker_registration, node_actor>::with<
    registration_ack>,
  /// A heartbeat. Errors: not_found (unknown worker: register again).
  caf::replies_to<sc_beat_atom, schema::worker_heartbeat>::with<bool>,
  /// Picks a ready worker with room and reserves `needs` on it until
  /// released. Errors: resource_exhausted with a sentence naming the largest
  /// free capacity ("no worker has room for ...") or unavailable (no worker).
  /// Idempotent per sandbox id (a second call returns the first placement).
  caf::replies_to<sc_place_atom, placement_request>::with<placement>,
  /// Frees what sc_place reserved for (worker id, sandbox id). Idempotent.
  caf::replies_to<sc_release_atom, std::string, std::string>::with<bool>,
  /// Where worker `id` is. Errors: not_found, unavailable (lost).
  caf::replies_to<sc_node_atom, std::string>::with<placement>,
  /// The fleet. Idempotent.
  caf::replies_to<sc_workers_atom>::with<std::vector<worker_view>>>;

} // namespace airlock::actors
