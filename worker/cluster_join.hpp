#pragma once
// The worker's end of the cluster transport: connects to the control plane's
// published scheduler (scheduler/cluster_listener.hpp) through CAF's
// middleman, registers this worker's node actor, then beats at the interval
// the scheduler's registration_ack names. When the connection is lost (a
// down message for the scheduler, or beats failing in a row) it reconnects
// with exponential backoff, bounded by backoff_max_ms, and registers again.
// It never blocks: the TCP connect runs in the middleman, asked by request.
// See docs/cluster.md.

#include <caf/actor_system.hpp>
#include <caf/atom.hpp>
#include <caf/io/middleman_actor.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <cstdint>
#include <functional>
#include <string>

#include "actors/clock.hpp"
#include "actors/cluster_protocol.hpp"

namespace airlock::worker {

using cj_load_atom = caf::atom_constant<caf::atom("cjload")>;
using cj_status_atom = caf::atom_constant<caf::atom("cjstatus")>;
using cj_audit_atom = caf::atom_constant<caf::atom("cjaudit")>;
using cj_creds_atom = caf::atom_constant<caf::atom("cjcreds")>;
using cj_renew_atom = caf::atom_constant<caf::atom("cjrenew")>;
// Internal to the join actor.
using cj_flush_atom = caf::atom_constant<caf::atom("cjflush")>;
using cj_connect_atom = caf::atom_constant<caf::atom("cjconnect")>;
using cj_beat_atom = caf::atom_constant<caf::atom("cjbeat")>;

struct cluster_join_options {
  /// The control plane's cluster listener.
  std::string host = "127.0.0.1";
  /// Its port. Default: 0 (must be set).
  uint16_t port = 0;
  /// Bound on one TCP connect and handshake. Default: 10000.
  uint32_t connect_timeout_ms = 10'000;
  /// Bound on sc_register and on each sc_beat. Default: 10000.
  uint32_t request_timeout_ms = 10'000;
  /// First wait before reconnecting; doubles per failed attempt. Default: 200.
  uint32_t backoff_initial_ms = 200;
  /// Longest wait between reconnect attempts. Default: 30000.
  uint32_t backoff_max_ms = 30'000;
  /// Beat interval when the scheduler's ack names none. Default: 1000.
  uint32_t heartbeat_interval_ms = 1'000;
  /// Beats that fail in a row (timeouts) before the connection counts as
  /// lost and the worker reconnects. Default: 3.
  uint32_t beat_failures_max = 3;
  /// Audit records waiting for the control plane; beyond it the oldest are
  /// dropped (and counted in the log). Default: 10000.
  size_t audit_buffer_max = 10'000;
  /// How long records gather before one batch goes out. Default: 200.
  uint32_t audit_flush_ms = 200;
  /// Records per batch. Default: 500.
  size_t audit_batch_max = 500;
};

/// What the join actor is given at spawn.
struct cluster_join_deps {
  /// Who this worker is; its id is the worker id in every heartbeat.
  schema::worker_registration registration;
  /// The actor the control plane will call (nd_*, dp_*).
  actors::node_actor node;
  /// The scheduler of this same process (`airlockd serve`): joined directly,
  /// with no connection and no port anyone else could reach; `host` and
  /// `port` are then unused. Default: null (connect to host:port).
  actors::scheduler_actor local_scheduler;
  /// Who makes the connection to host:port: the middleman's actor (plain
  /// TCP) or the TLS module's (caf::openssl, mutual TLS with the files the
  /// system was configured with). Default: null, the plain middleman.
  caf::io::middleman_actor connector;
  /// The worker's current certificate (PEM) and a signature of a
  /// registration's proof (schema::registration_proof_message) with its
  /// key, read at each registration (the certificate is renewed while the
  /// worker runs). Empty: no certificate and no proof (`serve`).
  std::function<std::string()> certificate;
  std::function<result<std::string>(const std::string& message)> prove;
  /// Timestamps of heartbeats (sent_at_ms). Outlives the actor.
  const wall_clock* clock = nullptr;
  /// Optional: called in the join actor's context after each successful
  /// registration (the first and every rejoin) with the scheduler's ack. It
  /// must not block; hand the ack to other threads by copy.
  std::function<void(const actors::registration_ack&)> on_joined;
};

using cluster_join_actor = caf::typed_actor<
  /// What the following heartbeats report: `allocated`, `sandbox_ids` and
  /// `load_milli` of the given heartbeat (worker_id, sequence and
  /// sent_at_ms are the join actor's). Replaces the previous report.
  caf::reacts_to<cj_load_atom, schema::worker_heartbeat>,
  /// Whether the worker is registered with a connected scheduler now, and
  /// the last registration_ack (the token public key; empty before the
  /// first join, kept while reconnecting). Idempotent.
  caf::replies_to<cj_status_atom>::with<bool, actors::registration_ack>,
  /// Audit records (the egress proxy's decisions) for the control plane:
  /// batched, sent while joined, kept (bounded) while not.
  caf::reacts_to<cj_audit_atom, std::vector<schema::audit_record>>,
  /// The credentials that apply to a sandbox, from the control plane.
  /// Errors: unavailable (not joined), those of sc_creds.
  caf::replies_to<cj_creds_atom, std::string>::with<std::vector<schema::credential_grant>>,
  /// A renewed certificate for the key of a CSR (PEM), from the control
  /// plane. Errors: unavailable (not joined), those of sc_renew.
  caf::replies_to<cj_renew_atom, std::string>::with<std::string>,
  /// Internal: send a batch of audit records.
  caf::reacts_to<cj_flush_atom>,
  /// Internal: connect (session number; stale sessions are ignored).
  caf::reacts_to<cj_connect_atom, uint64_t>,
  /// Internal: time for a heartbeat of a session.
  caf::reacts_to<cj_beat_atom, uint64_t>>;

/// Spawns the join actor; it starts connecting at once. Preconditions:
/// deps.node and deps.clock are set; without deps.local_scheduler, `system`
/// was configured with actors::use_middleman and options.port != 0. Stopping it (an exit message)
/// stops the beats; the scheduler then marks the worker lost after its
/// heartbeat timeout, or at once when the connection closes. It stops by
/// itself, with the node's exit reason, when deps.node terminates.
cluster_join_actor spawn_cluster_join(caf::actor_system& system, cluster_join_options options,
                                      cluster_join_deps deps);

} // namespace airlock::worker
