#pragma once
// The messages between the control plane and workers. These are the only
// way the control plane reaches a worker: in `airlockd serve` they are local
// messages, between `airlockd control` and `airlockd worker` they cross hosts
// as CAF remote messages. Everything here is serializable: every value
// message is a schema:: type that travels as its Cap'n Proto bytes
// (schema/cluster.capnp, schema/worker.capnp, schema/sandbox.capnp), so a
// control plane and workers of different versions still read each other.
// The one exception is `placement`, whose actor handle only CAF can encode.
// (The control-plane values at the end of the schema section never leave
// their host; some of them go field by field.)
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
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "actors/errors.hpp"
#include "schema/cluster.hpp"
#include "schema/egress.hpp"
#include "schema/page.hpp"
#include "schema/sandbox.hpp"
#include "schema/template_record.hpp"
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
typename Inspector::result_type inspect(Inspector& f, snapshot_record& x) {
  return inspect_as_capnp(f, x, "snapshot_record",
                          [](std::string_view bytes) { return decode_snapshot(bytes); });
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, worker_registration& x) {
  return inspect_as_capnp(f, x, "worker_registration",
                          [](std::string_view bytes) { return decode_worker_registration(bytes); });
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, worker_heartbeat& x) {
  return inspect_as_capnp(f, x, "worker_heartbeat",
                          [](std::string_view bytes) { return decode_worker_heartbeat(bytes); });
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, node_sandbox& x) {
  return inspect_as_capnp(f, x, "node_sandbox",
                          [](std::string_view bytes) { return decode_node_sandbox(bytes); });
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, exec_spec& x) {
  return inspect_as_capnp(f, x, "exec_spec",
                          [](std::string_view bytes) { return decode_exec_spec(bytes); });
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, process_view& x) {
  return inspect_as_capnp(f, x, "process_view",
                          [](std::string_view bytes) { return decode_process_view(bytes); });
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, output_request& x) {
  return inspect_as_capnp(f, x, "output_request",
                          [](std::string_view bytes) { return decode_output_request(bytes); });
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, output_segment& x) {
  return inspect_as_capnp(f, x, "output_segment",
                          [](std::string_view bytes) { return decode_output_segment(bytes); });
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, output_batch& x) {
  return inspect_as_capnp(f, x, "output_batch",
                          [](std::string_view bytes) { return decode_output_batch(bytes); });
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, file_spec& x) {
  return inspect_as_capnp(f, x, "file_spec",
                          [](std::string_view bytes) { return decode_file_spec(bytes); });
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, file_entry& x) {
  return inspect_as_capnp(f, x, "file_entry",
                          [](std::string_view bytes) { return decode_file_entry(bytes); });
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, file_result& x) {
  return inspect_as_capnp(f, x, "file_result",
                          [](std::string_view bytes) { return decode_file_result(bytes); });
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, template_build& x) {
  return inspect_as_capnp(f, x, "template_build",
                          [](std::string_view bytes) { return decode_template_build(bytes); });
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, template_built& x) {
  return inspect_as_capnp(f, x, "template_built",
                          [](std::string_view bytes) { return decode_template_built(bytes); });
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, template_progress& x) {
  return inspect_as_capnp(f, x, "template_progress",
                          [](std::string_view bytes) { return decode_template_progress(bytes); });
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, template_record& x) {
  return inspect_as_capnp(f, x, "template_record",
                          [](std::string_view bytes) { return decode_template(bytes); });
}
/// A version travels as a record holding only it: one codec for both.
inline std::string encode(const template_version& x) {
  template_record holder;
  holder.versions.push_back(x);
  return encode(holder);
}
inline result<template_version> decode_template_version(std::string_view bytes) {
  auto holder = decode_template(bytes);
  if (!holder)
    return holder.error();
  if (holder->versions.size() != 1)
    return make_status(errc::corrupt_record, "a template version message holds no version");
  return std::move(holder->versions.front());
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, template_version& x) {
  return inspect_as_capnp(f, x, "template_version",
                          [](std::string_view bytes) { return decode_template_version(bytes); });
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, sandbox_usage& x) {
  return inspect_as_capnp(f, x, "sandbox_usage",
                          [](std::string_view bytes) { return decode_sandbox_usage(bytes); });
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, watch_request& x) {
  return inspect_as_capnp(f, x, "watch_request",
                          [](std::string_view bytes) { return decode_watch_request(bytes); });
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, watch_batch& x) {
  return inspect_as_capnp(f, x, "watch_batch",
                          [](std::string_view bytes) { return decode_watch_batch(bytes); });
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, placement_request& x) {
  return inspect_as_capnp(f, x, "placement_request",
                          [](std::string_view bytes) { return decode_placement_request(bytes); });
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, registration_ack& x) {
  return inspect_as_capnp(f, x, "registration_ack",
                          [](std::string_view bytes) { return decode_registration_ack(bytes); });
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, worker_view& x) {
  return inspect_as_capnp(f, x, "worker_view",
                          [](std::string_view bytes) { return decode_worker_view(bytes); });
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, credential_grant& x) {
  return inspect_as_capnp(f, x, "credential_grant",
                          [](std::string_view bytes) { return decode_credential_grant(bytes); });
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, audit_record& x) {
  return inspect_as_capnp(f, x, "audit_record",
                          [](std::string_view bytes) { return decode_audit_record(bytes); });
}

// Control-plane values that stay on one host (registry, audit and credential
// actors): a stored record keeps its Cap'n Proto bytes, the rest go field by field.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, credential_record& x) {
  return inspect_as_capnp(f, x, "credential_record",
                          [](std::string_view bytes) { return decode_credential(bytes); });
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, audit_query& x) {
  return f(caf::meta::type_name("audit_query"), x.tenant_id, x.sandbox_id, x.kind, x.since_ms,
           x.limit, x.cursor, x.scan_max);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, egress_policy& x) {
  return f(caf::meta::type_name("egress_policy"), x.profile, x.allow);
}
template <class Inspector, class T>
typename Inspector::result_type inspect(Inspector& f, page<T>& x) {
  return f(caf::meta::type_name("page"), x.items, x.next_cursor);
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
using sc_creds_atom = caf::atom_constant<caf::atom("sccreds")>;
using sc_audit_atom = caf::atom_constant<caf::atom("scaudit")>;
using sc_remove_atom = caf::atom_constant<caf::atom("scremove")>;
using sc_renew_atom = caf::atom_constant<caf::atom("screnew")>;
using nd_egress_atom = caf::atom_constant<caf::atom("ndegress")>;
using nd_metrics_atom = caf::atom_constant<caf::atom("ndmetrics")>;
using nd_load_atom = caf::atom_constant<caf::atom("ndload")>;
using nd_ckpt_atom = caf::atom_constant<caf::atom("ndckpt")>;
using nd_ckptdel_atom = caf::atom_constant<caf::atom("ndckptdel")>;
using nd_ckpts_atom = caf::atom_constant<caf::atom("ndckpts")>;
using nd_recreate_atom = caf::atom_constant<caf::atom("ndrecreate")>;
using dp_quiet_atom = caf::atom_constant<caf::atom("dpquiet")>;
using nd_spool_atom = caf::atom_constant<caf::atom("ndspool")>;
using nd_tbuild_atom = caf::atom_constant<caf::atom("ndtbuild")>;
using nd_tdel_atom = caf::atom_constant<caf::atom("ndtdel")>;
using nd_twatch_atom = caf::atom_constant<caf::atom("ndtwatch")>;
using nd_claim_atom = caf::atom_constant<caf::atom("ndclaim")>;
using dp_watch_atom = caf::atom_constant<caf::atom("dpwatch")>;
using dp_usage_atom = caf::atom_constant<caf::atom("dpusage")>;

/// The owner of warm pool members until a create claims one (nd_claim).
/// Tenant ids may not start with '_', so no API key acts as it.
inline constexpr const char* pool_tenant = "_pool";

// The value messages are defined in schema/cluster.hpp (their Cap'n Proto
// codecs live there); these names keep them part of this contract.
using schema::exec_spec;
using schema::file_entry;
using schema::file_result;
using schema::file_spec;
using schema::file_verb;
using schema::node_sandbox;
using schema::output_batch;
using schema::output_request;
using schema::output_segment;
using schema::process_view;
using schema::sandbox_usage;
using schema::template_build;
using schema::template_built;
using schema::template_progress;
using schema::watch_batch;
using schema::watch_request;
using schema::watch_verb;

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
  caf::replies_to<dp_file_atom, std::string, file_spec>::with<file_result>,
  /// Applies `record.spec.egress` to sandbox `record.id`: new connections of
  /// the sandbox use it (open ones keep theirs). Errors: not_found,
  /// unimplemented (a worker without an egress proxy). Idempotent.
  caf::replies_to<nd_egress_atom, schema::sandbox_record>::with<node_sandbox>,
  /// This worker's own figures (its sandboxes by state, its egress proxy's
  /// counters) as Prometheus text, metric families that the control plane's
  /// own never use: `serve` appends them to its /metrics, a split-mode
  /// worker serves them on its data listener. Idempotent.
  caf::replies_to<nd_metrics_atom>::with<std::string>,
  /// The load fields of this worker's next heartbeat (worker_id, sequence
  /// and sent_at_ms empty): requested, limited and used resources, memory
  /// pressure, sandbox ids.
  caf::replies_to<nd_load_atom>::with<schema::worker_heartbeat>,
  /// Takes checkpoint (sandbox id, checkpoint id, include memory) of the
  /// sandbox's files, consistent (frozen while its root is snapshotted), and
  /// with `include memory` its memory and running processes (microvm only;
  /// a namespace sandbox refuses it with unimplemented). Errors: not_found,
  /// wrong_state, already_exists (the checkpoint id is taken),
  /// invalid_argument (a bad id), unavailable. Not idempotent: a repeat
  /// after a lost reply gets already_exists, which means it was taken.
  /// Answers its size in bytes (what the sandbox held beyond its template).
  caf::replies_to<nd_ckpt_atom, std::string, std::string, bool>::with<uint64_t>,
  /// Deletes a checkpoint this worker holds. Idempotent.
  caf::replies_to<nd_ckptdel_atom, std::string>::with<bool>,
  /// The checkpoints this worker holds (for reconciliation). Idempotent.
  caf::replies_to<nd_ckpts_atom>::with<std::vector<std::string>>,
  /// Brings back the sandbox `record` describes from the root filesystem it
  /// left on this worker when the worker stopped or crashed: its files are
  /// kept, its processes are not. Errors: not_found (its files did not
  /// survive: nothing is created), and those of nd_create. Idempotent.
  caf::replies_to<nd_recreate_atom, schema::sandbox_record>::with<node_sandbox>,
  /// How long ago, in milliseconds, a data-plane call (exec, stdin, signal,
  /// resize, output, file operation, process wait) last reached this worker
  /// for sandbox `id`; -1 when none has since the worker started. Clients
  /// of a split-mode worker's own listener bypass the control plane, so its
  /// idle policy asks. A duration, so the two hosts' clocks need not agree.
  caf::replies_to<dp_quiet_atom, std::string>::with<int64_t>,
  /// Appends a chunk of an upload to spool file `spool_id` on this worker
  /// (id, offset of the chunk, bytes, last chunk). Answers the file's size.
  /// A chunk at the wrong offset fails with wrong_state naming the size the
  /// file has, so a repeat after a lost answer is recognised; after the last
  /// chunk the file is complete and nd_tbuild may use it.
  caf::replies_to<nd_spool_atom, std::string, uint64_t, std::string, bool>::with<uint64_t>,
  /// Makes a template version from a spooled archive (docs/templates.md);
  /// the spool file is deleted whatever the outcome. Idempotent: a version
  /// already made answers what it holds. Errors: invalid_argument (not an
  /// image, a path that escapes the root, a device node), resource_exhausted
  /// (a limit), not_found (no such spool file).
  caf::replies_to<nd_tbuild_atom, template_build>::with<template_built>,
  /// Where the build of template version `name` (its worker name) stands,
  /// with its log from `log_offset` (a chunk of at most 64 KiB); with
  /// `cancel`, the build is also told to stop (it then fails with
  /// cancelled). An ended build answers building = false and the log it
  /// kept. Errors: not_found (no build of that name on this worker).
  caf::replies_to<nd_twatch_atom, std::string /*name*/, uint64_t /*log_offset*/,
                  bool /*cancel*/>::with<template_progress>,
  /// Deletes a template version's files on this worker. Idempotent.
  caf::replies_to<nd_tdel_atom, std::string>::with<bool>,
  /// A create claims the running warm pool member `record.id` (docs/pools.md):
  /// from now on it is `record`'s sandbox (tenant, env for processes started
  /// after, egress policy, CPU and memory limits set in place). Errors:
  /// not_found (no such sandbox here), wrong_state (not a running member),
  /// already_exists (claimed by another tenant). A repeat of the same claim
  /// answers running.
  caf::replies_to<nd_claim_atom, schema::sandbox_record>::with<node_sandbox>,
  /// A directory watch in sandbox `id` (schema::watch_request: open, read
  /// with a wait, close). Open answers the watch id once the sandbox's guest
  /// watches; a read answers the changes since the last one, and `ended`
  /// (with the reason) once, last. Errors: not_found (sandbox, directory, or
  /// an unknown or expired watch), invalid_argument (not a directory, a
  /// relative path), resource_exhausted (too many watches), wrong_state
  /// (paused). Close is idempotent.
  caf::replies_to<dp_watch_atom, std::string, watch_request>::with<watch_batch>,
  /// Sandbox `id`'s resource use now (schema::sandbox_usage); its CPU share
  /// is over the time since the previous reading. Errors: not_found. Not
  /// activity.
  caf::replies_to<dp_usage_atom, std::string>::with<sandbox_usage>>;

using schema::placement_request;
using schema::registration_ack;
using schema::worker_view;

/// Where a sandbox goes, or where a worker is. Carries an actor handle, so it
/// is the one message here that CAF serializes field by field: the handle
/// is CAF's to encode (node id and actor id), the strings are plain.
struct placement {
  std::string worker_id;
  std::string data_url;
  node_actor node;
  /// The request reserved there (defaults filled in); zero for a sandbox
  /// placed before.
  schema::resources reserved;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, placement& x) {
  return f(caf::meta::type_name("placement"), x.worker_id, x.data_url, x.node,
           x.reserved.cpu_millis, x.reserved.memory_mb, x.reserved.disk_mb, x.reserved.sandboxes);
}

/// Internal to the scheduler: its periodic look for silent workers.
using sc_check_atom = caf::atom_constant<caf::atom("sccheck")>;

using scheduler_actor = caf::typed_actor<
  /// A worker joins (or rejoins after a restart or a lost connection: same
  /// id, new node handle). The scheduler monitors `node`; when it goes down
  /// the worker is marked lost. Idempotent.
  caf::replies_to<sc_register_atom, schema::worker_registration,
                  node_actor>::with<registration_ack>,
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
  /// The fleet, ordered by worker id. Idempotent.
  caf::replies_to<sc_workers_atom>::with<std::vector<worker_view>>,
  /// The credentials that apply to sandbox `id`, narrowest scope first, the
  /// secret rendered into each value (a worker's egress proxy keeps them
  /// in memory only). Errors: not_found, unavailable (no credential service).
  /// Idempotent.
  caf::replies_to<sc_creds_atom,
                  std::string /*sandbox id*/>::with<std::vector<schema::credential_grant>>,
  /// Appends a worker's audit records. Errors: unavailable (no audit log),
  /// too_large. Not idempotent (a resend appends again).
  caf::replies_to<sc_audit_atom, std::vector<schema::audit_record>>::with<bool>,
  /// Forgets worker `id` (the control plane's own callers only; its
  /// certificate is revoked by the caller first). Errors: not_found,
  /// wrong_state (it is not lost: stop it first). Its sandboxes'
  /// reservations go with it.
  caf::replies_to<sc_remove_atom, std::string>::with<bool>,
  /// A registered worker's new certificate for the key of a certificate
  /// signing request (PEM), naming the caller's own worker id whatever the
  /// request says. Errors: permission_denied (not a registered worker),
  /// invalid_argument (a bad request), unavailable (no issuer).
  caf::replies_to<sc_renew_atom, std::string>::with<std::string>,
  /// Internal: marks workers lost whose last heartbeat is older than the
  /// heartbeat timeout, then schedules the next check.
  caf::reacts_to<sc_check_atom>>;

} // namespace airlock::actors
