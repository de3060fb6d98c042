#pragma once
// The scheduler actor: the control plane's fleet view. Workers register
// (sc_register) and beat (sc_beat); a worker that stops beating for
// heartbeat_timeout_ms, or whose node actor goes down (its host died or the
// connection broke), is lost until it registers again. Lifecycle procedures
// ask it where a sandbox goes (sc_place), which reserves room on that worker
// until sc_release. The interface is actors::scheduler_actor
// (actors/cluster_protocol.hpp); this header adds its options and spawn.
//
// Free room on a worker is its capacity minus what its last heartbeat says is
// allocated, minus the reservations of sandboxes that heartbeat does not yet
// list (once a worker reports a sandbox, its usage is in `allocated`).

#include <caf/actor_system.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "actors/audit_actor.hpp"
#include "actors/clock.hpp"
#include "actors/cluster_protocol.hpp"
#include "actors/credential_actor.hpp"
#include "scheduler/placement.hpp"

namespace airlock::scheduler {

struct scheduler_options {
  /// Interval at which workers are told to beat (in registration_ack).
  /// Default: 1000.
  uint32_t heartbeat_interval_ms = 1'000;
  /// A ready worker without a beat for this long is marked lost. Default: 5000.
  uint32_t heartbeat_timeout_ms = 5'000;
  /// How often the scheduler looks for silent workers. Default: 500.
  uint32_t check_interval_ms = 500;
  /// Workers the fleet may hold; a new one past it is refused with
  /// resource_exhausted. Default: 10000.
  size_t workers_max = 10'000;
  /// Reservations (placed and not yet released sandboxes) across the fleet;
  /// past it sc_place fails with resource_exhausted. Default: 1000000.
  size_t reservations_max = 1'000'000;
  /// Sandbox ids kept per worker from its heartbeats; a heartbeat listing
  /// more is refused with too_large. Default: 100000.
  size_t heartbeat_sandboxes_max = 100'000;
  /// Longest worker id, name, address or data URL accepted. Default: 1024.
  size_t registration_field_bytes_max = 1'024;
  /// Longest egress CA public key (PEM) accepted. Default: 4096.
  size_t egress_key_bytes_max = 4'096;
  /// Bound on a call delegated to the credential or audit actor.
  /// Default: 10000.
  uint32_t delegate_timeout_ms = 10'000;
  /// Policy knobs of the placement library.
  placement_options placement;
};

/// What the scheduler works with; the pointees outlive the actor.
struct scheduler_deps {
  /// Handed to every worker in registration_ack: the raw public key that
  /// verifies data-plane tokens. Opaque here.
  std::string token_public_key;
  /// Timestamps shown in worker views (last_heartbeat_at_ms). Silence is
  /// measured on the actor clock instead, so tests can drive it.
  const wall_clock* clock = nullptr;
  /// Randomness for placement's sampling.
  entropy_source* entropy = nullptr;
  /// Issues a worker's egress intermediate CA for its public key (PEM) and
  /// returns the chain PEM (intermediate, then root) for registration_ack.
  /// Runs on the scheduler's thread (one signature: cheap). Empty: workers
  /// get no chain.
  std::function<result<std::string>(std::string_view public_key_pem, std::string_view worker_id)>
    issue_egress_ca;
  /// Answers sc_creds; absent: unavailable.
  actors::credential_actor credentials;
  /// Answers sc_audit; absent: unavailable.
  actors::audit_actor audit;
  /// Checks a remote worker's identity: that `certificate` chains to the
  /// worker CA and is not revoked, and that `proof` is its key's signature of
  /// `message` (schema::registration_proof_message of the id and the
  /// caller's node); returns the worker id the certificate names, or
  /// gone (revoked) or permission_denied naming the reason. Runs on the scheduler's thread (a
  /// signature check: cheap). Empty: identities are not checked (tests of
  /// the actors' protocol).
  std::function<result<std::string>(const std::string& certificate, const std::string& proof,
                                    const std::string& message)>
    verify_member;
  /// Signs a renewed certificate for the key of a CSR (PEM), naming
  /// `worker_id` (sc_renew). Runs on the scheduler's thread (one
  /// signature). Empty: renewals answer unavailable.
  std::function<result<std::string>(std::string_view csr_pem, std::string_view worker_id)>
    issue_member;
  /// Told of every refused registration, on the scheduler's thread: a short
  /// reason for a metric label ("invalid", "fleet_full", "id_in_use",
  /// "egress_ca", "identity", "revoked"), the worker id it claimed (cut to 64 bytes) and the
  /// sentence the caller got. Must not block. Empty: not told.
  std::function<void(std::string_view reason, std::string_view worker_id,
                     const std::string& message)>
    on_refused;
};

/// Spawns the scheduler. Precondition: deps.clock and deps.entropy are set.
actors::scheduler_actor spawn_scheduler(caf::actor_system& system, scheduler_options options,
                                        scheduler_deps deps);

} // namespace airlock::scheduler
