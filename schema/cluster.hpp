#pragma once
// C++ value types of the cluster messages (schema/cluster.capnp) and their
// codecs. actors/cluster_protocol.hpp names them in airlock::actors and sends
// them between control plane and workers as these bytes. They live here, not
// in actors/, because schema/ is the one place that turns values into
// Cap'n Proto bytes and it depends on nothing above it.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "schema/errc.hpp"
#include "schema/sandbox.hpp"
#include "schema/worker.hpp"

namespace airlock::schema {

/// Version written into every cluster message; readers refuse newer ones.
inline constexpr uint16_t cluster_schema_version = 1;

/// One sandbox as a worker reports it.
struct node_sandbox {
  std::string sandbox_id;
  sandbox_state state = sandbox_state::creating;
  bool operator==(const node_sandbox&) const = default;
};

/// Who a process runs as: exec_spec::user as the worker resolved it in the
/// sandbox's /etc/passwd.
struct process_user {
  bool set_user = false; ///< false: as the guest runs (root)
  uint32_t uid = 0;
  uint32_t gid = 0;
  std::string home; ///< empty when unknown
  bool operator==(const process_user&) const = default;
};

/// What to run (POST /v1/sandboxes/{id}/processes), from the API down to the
/// guest: the worker fills in `run_as`, the whole `env` and
/// `report_start_failure`, and the guest protocol's start message is encoded
/// from it (guest/protocol.cpp). Exactly one of argv and cmd (cmd runs
/// `/bin/sh -c cmd`).
struct exec_spec {
  std::vector<std::string> argv;
  std::string cmd;
  /// From a client: added to the sandbox's env. Once the worker resolved the
  /// spec: the whole environment.
  std::vector<std::pair<std::string, std::string>> env;
  std::string cwd;  ///< empty: /, or a named user's home (the worker decides)
  std::string user; ///< empty or "root": root; else a name or uid
  bool pty = false;
  uint16_t rows = 24;
  uint16_t cols = 80;
  bool stdin_open = false; ///< false: the process reads EOF at once
  uint32_t timeout_s = 0;  ///< 0: none; else the process is killed (SIGKILL) after it
  process_user run_as;     ///< set by the worker from `user`
  /// When the guest cannot run the program (not_found, permission_denied,
  /// io_error), the worker replies with the process anyway: `failed`, exit
  /// code 127, the reason in `error`. False: it replies with the error.
  bool report_start_failure = false;
  std::string tag{}; ///< the client's name for the process (E2B's tag); may be empty
  /// The client's env as asked, kept for listings once `env` is merged (set by the worker).
  std::vector<std::pair<std::string, std::string>> request_env{};
  bool operator==(const exec_spec&) const = default;
};

/// Where a process is in its life. The API shows two states: starting counts
/// as running, failed as exited (see has_ended).
enum class process_state : uint8_t { starting, running, exited, failed };

std::string_view to_string(process_state state) noexcept;
std::optional<process_state> parse_process_state(std::string_view text) noexcept;

inline bool has_ended(process_state state) noexcept {
  return state == process_state::exited || state == process_state::failed;
}

/// A process as the data plane reports it. Times are Unix ms once they leave
/// the worker's node actor; inside the worker (sandbox actor replies) they are
/// its actor clock's monotonic ms, which the node actor translates.
struct process_view {
  std::string process_id;
  process_state state = process_state::starting;
  int32_t exit_code = 0; ///< -1 when killed by a signal; 127 when it never started
  int32_t signal = 0;    ///< the signal that ended it, 0 if none
  int64_t started_at_ms = 0;
  int64_t ended_at_ms = 0; ///< 0 while running
  std::string error;       ///< why it failed (then exit_code 127 if it never started)
  int32_t pid = 0;         ///< in the sandbox's pid namespace
  uint64_t stdout_bytes = 0;
  uint64_t stderr_bytes = 0;
  bool pty = false;
  // What was asked to run, as the client gave it:
  std::vector<std::string> argv{};
  std::string cmd{};
  std::string cwd{};
  std::vector<std::pair<std::string, std::string>> env{}; ///< the client's only
  std::string tag{};
  bool operator==(const process_view&) const = default;
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
  bool operator==(const output_request&) const = default;
};

/// A run of bytes from one stream. `end_offset` is the combined-stream offset
/// just past its last byte (the SSE event id).
struct output_segment {
  uint8_t fd = 1; ///< 1 stdout, 2 stderr
  uint64_t end_offset = 0;
  std::string bytes;
  bool operator==(const output_segment&) const = default;
};

struct output_batch {
  std::vector<output_segment> segments; ///< in order; filtered streams omitted
  uint64_t next_offset = 0;             ///< where to read next
  uint64_t start_offset = 0;            ///< oldest byte still retained
  bool exited = false;                  ///< the process ended and next_offset is the end
  int32_t exit_code = 0;                ///< valid when exited
  int32_t signal = 0;                   ///< valid when exited
  bool operator==(const output_batch&) const = default;
};

/// write is one message with the whole file; write_open .. write_commit (or
/// write_abort) move a larger one in parts, each at most one message.
enum class file_verb : uint8_t {
  read,
  write,
  list,
  stat,
  mkdir,
  remove,
  rename,
  write_open,
  write_part,
  write_commit,
  write_abort
};

/// One file operation, resolved inside the sandbox (symlinks and `..` never
/// leave its root).
struct file_spec {
  file_verb verb = file_verb::stat;
  std::string path;
  std::string to;   ///< rename target
  std::string data; ///< write, write_part
  uint64_t offset = 0;
  uint64_t length = 0; ///< read; 0: to the end (bounded by the worker's limit)
  uint32_t mode = 0644;
  bool recursive = false; ///< remove
  uint64_t session = 0;   ///< write_part, write_commit, write_abort: from write_open
  bool operator==(const file_spec&) const = default;
};

struct file_entry {
  std::string name;
  std::string type; ///< "file" | "dir" | "symlink" | "other"
  uint64_t size_bytes = 0;
  uint32_t mode = 0;
  int64_t modified_at_ms = 0;
  uint32_t uid = 0;
  uint32_t gid = 0;
  std::string owner;          ///< the uid's name in the sandbox, else the uid as text
  std::string group;          ///< the gid's name in the sandbox, else the gid as text
  std::string symlink_target; ///< a symlink's target, absolute; empty otherwise
  bool operator==(const file_entry&) const = default;
};

struct file_result {
  std::string data;     ///< read
  uint64_t written = 0; ///< write, write_commit; write_part: the session's bytes so far
  std::vector<file_entry> entries;
  bool truncated = false;
  file_entry info;      ///< stat (name = the path's last component)
  uint64_t session = 0; ///< write_open
  bool operator==(const file_result&) const = default;
};

/// Directory watches: open answers the watch id (and no changes), read
/// answers the changes since the last read (waiting up to wait_ms for one),
/// close stops the watch (idempotent).
enum class watch_verb : uint8_t { open, read, close };

struct watch_request {
  watch_verb verb = watch_verb::read;
  std::string watch_id;   ///< read, close
  std::string path;       ///< open: an absolute directory
  bool recursive = false; ///< open
  uint32_t wait_ms = 0;   ///< read
  bool operator==(const watch_request&) const = default;
};

/// A sandbox's resource use as its worker reads it now (dp_usage).
struct sandbox_usage {
  int64_t sampled_at_ms = 0;    ///< Unix ms
  uint64_t cpu_usage_ns = 0;    ///< since the sandbox started
  double cpu_used_pct = 0;      ///< of one CPU, since the previous reading (or the start)
  uint64_t memory_bytes = 0;    ///< its cgroup's charge
  uint64_t disk_used_bytes = 0; ///< what its root filesystem references
  uint64_t processes = 0;
  bool operator==(const sandbox_usage&) const = default;
};

struct watch_change {
  std::string name; ///< relative to the watched directory ("sub/f.txt")
  std::string kind; ///< "create" | "write" | "remove" | "rename" | "chmod"
  bool operator==(const watch_change&) const = default;
};

struct watch_batch {
  std::string watch_id;
  std::vector<watch_change> changes; ///< in the order they happened
  bool ended = false;                ///< the watch is over (after these changes)
  std::string error_code;            ///< why it ended (an errc name); empty: closed
  std::string error_message;
  bool operator==(const watch_batch&) const = default;
};

/// What a procedure asks the scheduler for.
struct placement_request {
  std::string sandbox_id;
  std::string template_name;
  resources needs; ///< the sandbox's limits; sandboxes = 1
  /// What to reserve; a zero field takes the chosen worker's default request.
  resources requests;
  /// The worker holding what the sandbox starts from: a snapshot (restore,
  /// fork) or a template version built there; empty: any worker.
  std::string snapshot_worker;
  /// The runtime it runs in: only a worker offering it fits. Empty: namespace.
  std::string runtime;
  bool operator==(const placement_request&) const = default;
};

/// A template version for a worker to make from an uploaded archive.
struct template_build {
  std::string worker_name; ///< the version's name in the worker's rootfs
  std::string spool_id;    ///< the archive, uploaded with nd_spool
  std::string format;      ///< oci | docker | tar
  uint64_t compressed_bytes_max = 0;
  uint64_t uncompressed_bytes_max = 0;
  uint64_t entries_max = 0;
  uint32_t path_bytes_max = 0;
  std::string start_cmd; ///< replaces the image's Entrypoint and Cmd when set
  /// Format "recipe" (POST /v1/templates): the build's source, run steps and
  /// defaults as JSON; spool_id is empty.
  std::string recipe_json;
  /// A recipe from another template: that version's name in this worker's rootfs.
  std::string base_worker_name;
  bool operator==(const template_build&) const = default;
};

/// What a built template version holds and defaults to.
struct template_built {
  std::string digest;
  uint64_t size_bytes = 0;
  uint64_t files = 0;
  std::vector<std::pair<std::string, std::string>> env;
  std::string workdir;
  std::string user;
  std::string start_cmd;
  std::string log_tail;
  bool operator==(const template_built&) const = default;
};

/// Where a template build on a worker stands, with a piece of its log.
struct template_progress {
  bool building = false; ///< false: the build ended (or ran before this worker started)
  std::string step;      ///< e.g. "debootstrap", "layer 2/5", "run 3/4"
  int32_t percent = -1;  ///< of the whole build; -1 = unknown
  uint64_t bytes_done = 0;
  uint64_t bytes_total = 0; ///< of the step's input; 0 = unknown
  uint64_t log_offset = 0;  ///< where `log` starts in the whole build log
  std::string log;
  uint64_t log_end = 0; ///< the log's size so far
  bool operator==(const template_progress&) const = default;
};

/// The scheduler's answer to a registration.
struct registration_ack {
  std::string worker_id;
  std::string token_public_key; ///< raw Ed25519 public key that signs data-plane tokens
  uint32_t heartbeat_interval_ms = 0;
  /// PEM: the worker's egress intermediate certificate, then the cluster
  /// root. Empty when the worker sent no egress key or none could be issued.
  std::string egress_ca_chain;
  bool operator==(const registration_ack&) const = default;
};

/// One row of GET /v1/workers.
struct worker_view {
  worker_registration registration;
  std::string state;   ///< ready | cordoned | draining | lost
  resources allocated; ///< as the worker's last heartbeat reported it
  int64_t last_heartbeat_at_ms = 0;
  resources reserved; ///< placed by the scheduler, not yet released nor in a heartbeat
  std::vector<std::string> sandbox_ids; ///< as the worker's last heartbeat reported them
  resources limited;                    ///< sum of its sandboxes' limits, last reported
  resources used;                       ///< what its sandboxes use, last reported
  bool memory_pressure = false;
  std::string pressure_reason;
  bool operator==(const worker_view&) const = default;
};

// Codecs. Decoders fail with corrupt_record (bytes that do not decode) or
// unsupported_version (written by a newer airlock).
std::string encode(const node_sandbox& x);
result<node_sandbox> decode_node_sandbox(std::string_view bytes);
std::string encode(const exec_spec& x);
result<exec_spec> decode_exec_spec(std::string_view bytes);
std::string encode(const process_view& x);
result<process_view> decode_process_view(std::string_view bytes);
std::string encode(const output_request& x);
result<output_request> decode_output_request(std::string_view bytes);
std::string encode(const output_segment& x);
result<output_segment> decode_output_segment(std::string_view bytes);
std::string encode(const output_batch& x);
result<output_batch> decode_output_batch(std::string_view bytes);
std::string encode(const file_spec& x);
result<file_spec> decode_file_spec(std::string_view bytes);
std::string encode(const file_entry& x);
result<file_entry> decode_file_entry(std::string_view bytes);
std::string encode(const file_result& x);
result<file_result> decode_file_result(std::string_view bytes);
std::string encode(const sandbox_usage& x);
result<sandbox_usage> decode_sandbox_usage(std::string_view bytes);
std::string encode(const watch_request& x);
result<watch_request> decode_watch_request(std::string_view bytes);
std::string encode(const watch_batch& x);
result<watch_batch> decode_watch_batch(std::string_view bytes);
std::string encode(const placement_request& x);
result<placement_request> decode_placement_request(std::string_view bytes);
std::string encode(const template_build& x);
result<template_build> decode_template_build(std::string_view bytes);
std::string encode(const template_built& x);
result<template_built> decode_template_built(std::string_view bytes);
std::string encode(const template_progress& x);
result<template_progress> decode_template_progress(std::string_view bytes);
std::string encode(const registration_ack& x);
result<registration_ack> decode_registration_ack(std::string_view bytes);
std::string encode(const worker_view& x);
result<worker_view> decode_worker_view(std::string_view bytes);

} // namespace airlock::schema
