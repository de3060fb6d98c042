#pragma once
// The scheduler actor's state and the parts of it that more than one of its
// files use (internal to scheduler/: scheduler_actor.cpp the behaviour,
// placement and liveness; membership.cpp registrations and heartbeats).
// Not a public header: scheduler_actor.hpp is the contract.

#include <caf/actor_clock.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <map>
#include <set>
#include <string>

#include "scheduler/scheduler_actor.hpp"

namespace airlock::scheduler::detail {

using actors::node_actor;
using actors::placement;
using actors::registration_ack;
using actors::scheduler_actor;
using clock_point = caf::actor_clock::time_point;

/// What a placed sandbox holds on its worker until a heartbeat reports it.
struct reservation {
  schema::resources requested;
  schema::resources limits;
};

/// One worker as the scheduler knows it.
struct worker_entry {
  schema::worker_registration registration; ///< its session secret cleared once used
  node_actor node;                          ///< what it registered: its node gate over the network
  /// What callers are given: a local relay that adds the session secret to
  /// every call to the gate (actors/session_gate.hpp); the node itself in
  /// `serve`.
  node_actor relay;
  bool lost = false;
  bool node_down = false;      ///< lost because its node actor went down
  schema::resources allocated; ///< requested, as its last heartbeat said
  schema::resources limited;   ///< limits, as its last heartbeat said
  schema::resources used;      ///< in use, as its last heartbeat said
  bool memory_pressure = false;
  std::string pressure_reason;
  std::set<std::string> running; ///< sandbox ids of its last heartbeat
  uint64_t last_sequence = 0;
  int64_t last_heartbeat_at_ms = 0;
  clock_point last_beat;
  std::map<std::string, reservation> reservations; ///< by sandbox id
};

struct scheduler_state {
  static inline const char* name = "airlock.scheduler";

  scheduler_options options;
  scheduler_deps deps;
  std::map<std::string, worker_entry> workers;
  std::map<std::string, std::string> placed; ///< sandbox id -> worker id
  /// The CAF node each live worker's node actor is on -> worker id: who is
  /// calling, without a walk over the fleet per message.
  std::map<caf::node_id, std::string> worker_of_node;
};

using self_ptr = scheduler_actor::stateful_pointer<scheduler_state>;

// --- Who is calling --------------------------------------------------------
//
// The caller of a message is the CAF node its sender lives on, which CAF takes
// from the connection, not a field the caller fills in. A peer can still name
// another node (this process's included) as the source of a routed message,
// but the reply then goes to the node it named, never back to it; and a
// control plane that checks identities gives worker calls no trust for
// coming from this process (docs/cluster.md: what this does and does not
// stop).

/// True for a message sent from inside this process (the control plane's own
/// actors, serve's worker).
inline bool from_this_process(self_ptr self) {
  const auto& sender = self->current_sender();
  return sender && sender->node() == self->node();
}

/// True for a worker's call from inside this process that needs no proof:
/// `serve`'s own worker. A control plane that checks identities (it listens
/// for workers) trusts no such call, because a peer can name this process's
/// node as the source of a routed message (docs/cluster.md).
inline bool trusted_local_worker(self_ptr self) {
  return !self->state.deps.verify_member && from_this_process(self);
}

/// True when the message comes from the CAF node of `w`'s live node actor.
inline bool sent_by(self_ptr self, const worker_entry& w) {
  const auto& sender = self->current_sender();
  return sender && w.node && !w.node_down && w.node.node() == sender->node();
}

/// The worker whose live node is on the caller's CAF node, if any.
inline const worker_entry* calling_worker(self_ptr self) {
  const auto& sender = self->current_sender();
  if (!sender)
    return nullptr;
  auto& st = self->state;
  auto id = st.worker_of_node.find(sender->node());
  if (id == st.worker_of_node.end())
    return nullptr;
  auto w = st.workers.find(id->second);
  return w != st.workers.end() && sent_by(self, w->second) ? &w->second : nullptr;
}

/// Ends the relay of a registration that is replaced or forgotten.
void retire_relay(worker_entry& w);

/// sc_register: checks the caller's identity and the registration, then
/// (re)admits the worker with a relay for its node gate.
caf::result<registration_ack> on_register(self_ptr self, schema::worker_registration& r,
                                          node_actor& node);

/// sc_beat: the worker's load and sandboxes, from its own node only.
caf::result<bool> on_beat(self_ptr self, schema::worker_heartbeat& beat);

} // namespace airlock::scheduler::detail
