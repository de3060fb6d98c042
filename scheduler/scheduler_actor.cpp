#include "scheduler/scheduler_actor.hpp"

#include <caf/actor_cast.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <vector>

#include "actors/errors.hpp"
#include "actors/session_gate.hpp"
#include "schema/assert.hpp"

namespace airlock::scheduler {

namespace {

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
bool from_this_process(self_ptr self) {
  const auto& sender = self->current_sender();
  return sender && sender->node() == self->node();
}

/// True for a worker's call from inside this process that needs no proof:
/// `serve`'s own worker. A control plane that checks identities (it listens
/// for workers) trusts no such call, because a peer can name this process's
/// node as the source of a routed message (docs/cluster.md).
bool trusted_local_worker(self_ptr self) {
  return !self->state.deps.verify_member && from_this_process(self);
}

/// True when the message comes from the CAF node of `w`'s live node actor.
bool sent_by(self_ptr self, const worker_entry& w) {
  const auto& sender = self->current_sender();
  return sender && w.node && !w.node_down && w.node.node() == sender->node();
}

/// The worker whose live node is on the caller's CAF node, if any.
const worker_entry* calling_worker(self_ptr self) {
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

caf::error not_for_workers(std::string_view what) {
  return make_error(errc::permission_denied,
                    std::string(what) + " is answered only to the control plane itself");
}

/// `from` less `taken`, each field at least 0.
schema::resources minus(const schema::resources& from, const schema::resources& taken) {
  auto less = [](uint32_t a, uint32_t b) { return a > b ? a - b : 0; };
  return schema::resources{less(from.cpu_millis, taken.cpu_millis),
                           less(from.memory_mb, taken.memory_mb), less(from.disk_mb, taken.disk_mb),
                           less(from.sandboxes, taken.sandboxes)};
}

/// Reservations the worker's heartbeats do not cover yet.
reservation pending_reservations(const worker_entry& w) {
  reservation sum;
  for (const auto& [sandbox_id, held] : w.reservations) {
    if (w.running.count(sandbox_id))
      continue;
    sum.requested += held.requested;
    sum.limits += held.limits;
  }
  return sum;
}

actors::worker_view view_of(const worker_entry& w) {
  actors::worker_view view;
  view.registration = w.registration;
  view.state = w.lost ? "lost" : "ready";
  view.allocated = w.allocated;
  view.last_heartbeat_at_ms = w.last_heartbeat_at_ms;
  view.reserved = pending_reservations(w).requested;
  view.sandbox_ids.assign(w.running.begin(), w.running.end());
  view.limited = w.limited;
  view.used = w.used;
  view.memory_pressure = w.memory_pressure;
  view.pressure_reason = w.pressure_reason;
  return view;
}

placement placement_of(const worker_entry& w) {
  return placement{w.registration.id, w.registration.data_url, w.relay ? w.relay : w.node, {}};
}

/// Ends the relay of a registration that is replaced or forgotten.
void retire_relay(worker_entry& w) {
  if (w.relay && w.relay != w.node)
    caf::anon_send_exit(w.relay, caf::exit_reason::user_shutdown);
  w.relay = nullptr;
}

/// The largest certificate (PEM) and proof (hex signature) a registration
/// may carry: checked before either is parsed.
constexpr size_t member_certificate_bytes_max = 16 * 1024;
constexpr size_t registration_proof_bytes_max = 1024;

/// The registration's shape and sizes, before anything in it is parsed.
std::optional<caf::error> validate_shape(const scheduler_state& st,
                                         const schema::worker_registration& r,
                                         const node_actor& node) {
  auto limit = st.options.registration_field_bytes_max;
  if (r.id.empty())
    return make_error(errc::invalid_argument, "a worker registration needs an id");
  if (!node)
    return make_error(errc::invalid_argument,
                      "worker " + r.id.substr(0, 64) + " registered without a node");
  for (const auto* field : {&r.id, &r.name, &r.cluster_address, &r.data_url})
    if (field->size() > limit)
      return make_error(errc::invalid_argument, "worker " + r.id.substr(0, 64)
                                                  + " has a registration field over "
                                                  + std::to_string(limit) + " bytes");
  if (r.egress_ca_public_key.size() > st.options.egress_key_bytes_max)
    return make_error(errc::invalid_argument,
                      "worker " + r.id.substr(0, 64) + " sent an egress CA key over "
                        + std::to_string(st.options.egress_key_bytes_max) + " bytes");
  if (r.certificate.size() > member_certificate_bytes_max
      || r.proof.size() > registration_proof_bytes_max)
    return make_error(errc::invalid_argument,
                      "worker " + r.id.substr(0, 64) + " sent a certificate over "
                        + std::to_string(member_certificate_bytes_max) + " bytes or a proof over "
                        + std::to_string(registration_proof_bytes_max) + " bytes");
  if (!r.session_secret.empty() && !actors::is_session_secret(r.session_secret))
    return make_error(errc::invalid_argument,
                      "worker " + r.id.substr(0, 64) + " sent a session secret that is not "
                        + std::to_string(2 * actors::session_secret_bytes) + " hex digits");
  return std::nullopt;
}

/// Whether the registration can be taken now (the fleet, a live id).
std::optional<caf::error> validate(const scheduler_state& st, const schema::worker_registration& r,
                                   const node_actor& node) {
  // A live worker keeps its id: another node registering it would silently
  // take over its sandboxes (clients' attach URLs, creates, credentials). A
  // restarted worker is a new node and is accepted once its old node is
  // down (its connection closed); the same node registering again is a
  // repeat and is answered as the first time.
  if (auto known = st.workers.find(r.id); known != st.workers.end() && known->second.node
                                          && !known->second.node_down && known->second.node != node)
    return make_error(errc::already_exists,
                      "worker " + r.id.substr(0, 64)
                        + " is registered from a node that is still connected: a second "
                          "registration of a live worker is refused (a restarted worker is "
                          "accepted once its old connection has closed)");
  if (!st.workers.count(r.id) && st.workers.size() >= st.options.workers_max)
    return make_error(errc::resource_exhausted,
                      "the fleet already holds " + std::to_string(st.options.workers_max)
                        + " workers; remove lost ones or raise workers_max");
  return std::nullopt;
}

/// The worker's egress CA chain, when it asked for one and the control
/// plane can issue it. A failure refuses the registration: a worker whose
/// egress proxy cannot terminate TLS must not look healthy.
result<std::string> egress_chain(const scheduler_state& st, const schema::worker_registration& r) {
  if (r.egress_ca_public_key.empty() || !st.deps.issue_egress_ca)
    return std::string{};
  auto chain = st.deps.issue_egress_ca(r.egress_ca_public_key, r.id);
  if (!chain)
    return make_status(chain.code(),
                       "cannot issue worker " + r.id + "'s egress CA: " + chain.error().message);
  return chain;
}

/// What a refusal counts as, from the errc validate() answered with.
std::string_view refusal_reason(errc code) {
  switch (code) {
    case errc::already_exists: return "id_in_use";
    case errc::resource_exhausted: return "fleet_full";
    default: return "invalid";
  }
}

caf::result<registration_ack> on_register(self_ptr self, schema::worker_registration& r,
                                          node_actor& node) {
  auto& st = self->state;
  auto refuse = [&st, &r](std::string_view reason, caf::error error) {
    if (st.deps.on_refused)
      st.deps.on_refused(reason, std::string_view(r.id).substr(0, 64), to_status(error).message);
    return error;
  };
  // A worker registers its own node: a handle it learned of another's would
  // let it stand in for that worker.
  const auto& sender = self->current_sender();
  if (node && sender && sender->node() != node.node() && !trusted_local_worker(self))
    return refuse("invalid", make_error(errc::permission_denied,
                                        "worker " + r.id.substr(0, 64)
                                          + " registered a node that is not on its own host"));
  if (auto refused = validate_shape(st, r, node))
    return refuse("invalid", std::move(*refused));
  // Who the caller is comes from the certificate whose key signed this
  // registration on this connection, never from the id it sends.
  if (st.deps.verify_member) {
    const std::string caller = sender ? caf::to_string(sender->node()) : std::string{};
    auto member = st.deps.verify_member(r.certificate, r.proof,
                                        schema::registration_proof_message(r.id, caller));
    if (!member)
      return refuse(
        member.error().code == errc::gone ? "revoked" : "identity",
        make_error(errc::permission_denied,
                   "worker " + r.id.substr(0, 64) + " is refused: " + member.error().message));
    if (*member != r.id)
      return refuse("identity",
                    make_error(errc::permission_denied, "a certificate for " + member->substr(0, 64)
                                                          + " registers as " + member->substr(0, 64)
                                                          + " only, not as " + r.id.substr(0, 64)));
    // Over the network a node is called only through its gate.
    if (r.session_secret.empty())
      return refuse("invalid", make_error(errc::invalid_argument,
                                          "worker " + r.id.substr(0, 64)
                                            + " registered without a session secret: upgrade it"));
  }
  if (auto refused = validate(st, r, node)) {
    const auto reason = refusal_reason(to_status(*refused).code);
    return refuse(reason, std::move(*refused));
  }
  auto chain = egress_chain(st, r);
  if (!chain)
    return refuse("egress_ca", make_error(chain.error()));
  auto& w = st.workers[r.id];
  // A rejoin keeps the reservations: its sandboxes may still run there.
  // Monitoring again after a down lets CAF say whether this node is alive:
  // a dead one yields another down at once.
  if (w.node != node || w.node_down) {
    if (w.node) {
      self->demonitor(w.node.address());
      st.worker_of_node.erase(w.node.node());
    }
    self->monitor(node);
    w.node = node;
    st.worker_of_node[node.node()] = r.id;
  }
  retire_relay(w);
  w.relay = r.session_secret.empty()
              ? node
              : actors::spawn_session_relay(self->system(), node, std::move(r.session_secret));
  r.session_secret.clear(); // kept by the relay only: views and logs never see it
  w.registration = std::move(r);
  w.lost = false;
  w.node_down = false;
  w.last_sequence = 0;
  w.last_beat = self->clock().now();
  return registration_ack{w.registration.id, st.deps.token_public_key,
                          st.options.heartbeat_interval_ms, std::move(*chain)};
}

caf::result<bool> on_beat(self_ptr self, schema::worker_heartbeat& beat) {
  auto& st = self->state;
  auto i = st.workers.find(beat.worker_id);
  if (i == st.workers.end() || i->second.node_down)
    return make_error(errc::not_found,
                      "worker " + beat.worker_id + " is not registered: register again");
  if (!trusted_local_worker(self) && !sent_by(self, i->second))
    return make_error(errc::permission_denied, "a heartbeat for worker "
                                                 + beat.worker_id.substr(0, 64)
                                                 + " comes only from that worker's node");
  if (beat.sandbox_ids.size() > st.options.heartbeat_sandboxes_max)
    return make_error(errc::too_large, "a heartbeat lists more than "
                                         + std::to_string(st.options.heartbeat_sandboxes_max)
                                         + " sandboxes");
  auto& w = i->second;
  // Messages of one connection arrive in order; a lower sequence is a beat
  // that an earlier session of this worker sent.
  if (w.last_sequence != 0 && beat.sequence <= w.last_sequence)
    return true;
  w.last_sequence = beat.sequence;
  w.allocated = beat.allocated;
  w.limited = beat.limited;
  w.used = beat.used;
  w.memory_pressure = beat.memory_pressure;
  w.pressure_reason = std::move(beat.pressure_reason);
  w.running = std::set<std::string>(std::make_move_iterator(beat.sandbox_ids.begin()),
                                    std::make_move_iterator(beat.sandbox_ids.end()));
  // After a control-plane restart the heartbeats say where sandboxes run:
  // their placements are known again (so a release or a repeated place
  // finds them), and the beat's figures already count them.
  for (const auto& sandbox_id : w.running)
    st.placed.emplace(sandbox_id, beat.worker_id);
  w.last_heartbeat_at_ms = st.deps.clock->now_ms();
  w.last_beat = self->clock().now();
  // Silent but connected: a beat brings it back.
  w.lost = false;
  return true;
}

/// The fleet as the placement library sees it: lost workers are kept (so the
/// failure message can say what exists) but not schedulable.
std::vector<worker_view> fleet_for_placement(const scheduler_state& st) {
  std::vector<worker_view> fleet;
  fleet.reserve(st.workers.size());
  for (const auto& [id, w] : st.workers) {
    worker_view v;
    v.id = id;
    v.capacity = w.registration.capacity;
    auto pending = pending_reservations(w);
    v.allocated = w.allocated;
    v.allocated += pending.requested;
    v.limited = w.limited;
    v.limited += pending.limits;
    v.default_request = w.registration.default_request;
    v.memory_limit_percent = w.registration.memory_limit_percent;
    v.schedulable = !w.lost;
    v.memory_pressure = w.memory_pressure;
    v.runtimes = w.registration.runtimes;
    fleet.push_back(std::move(v));
  }
  return fleet;
}

bool any_ready(const scheduler_state& st) {
  for (const auto& [id, w] : st.workers)
    if (!w.lost)
      return true;
  return false;
}

caf::result<placement> already_placed(const scheduler_state& st, const std::string& sandbox_id,
                                      const std::string& worker_id) {
  const auto& w = st.workers.at(worker_id);
  if (w.lost)
    return make_error(errc::unavailable, "sandbox " + sandbox_id + " is placed on worker "
                                           + worker_id
                                           + ", which is lost; release it to place it again");
  auto where = placement_of(w);
  if (auto held = w.reservations.find(sandbox_id); held != w.reservations.end())
    where.reserved = held->second.requested;
  return where;
}

caf::result<placement> on_place(self_ptr self, actors::placement_request& request) {
  auto& st = self->state;
  if (request.sandbox_id.empty())
    return make_error(errc::invalid_argument, "a placement needs a sandbox id");
  if (auto i = st.placed.find(request.sandbox_id); i != st.placed.end())
    return already_placed(st, request.sandbox_id, i->second);
  if (!any_ready(st))
    return make_error(errc::unavailable,
                      st.workers.empty()
                        ? "no worker is registered: start one with airlockd worker --join"
                        : "no worker is ready: every registered worker is lost");
  if (st.placed.size() >= st.options.reservations_max)
    return make_error(errc::resource_exhausted, "the scheduler holds "
                                                  + std::to_string(st.options.reservations_max)
                                                  + " placed sandboxes; release some first");
  placement_request wanted{request.needs, request.requests, request.template_name,
                           request.snapshot_worker, request.runtime};
  auto fleet = fleet_for_placement(st);
  auto chosen = place(fleet, wanted, st.options.placement, *st.deps.entropy);
  if (!chosen)
    return make_error(chosen.error());
  auto& w = st.workers.at(*chosen);
  const auto& chosen_view = *std::find_if(fleet.begin(), fleet.end(),
                                          [&](const worker_view& v) { return v.id == *chosen; });
  reservation held{effective_request(chosen_view, request.requests), request.needs};
  held.limits.sandboxes = 1;
  w.reservations[request.sandbox_id] = held;
  st.placed.emplace(request.sandbox_id, *chosen);
  auto where = placement_of(w);
  where.reserved = held.requested;
  return where;
}

bool on_release(self_ptr self, const std::string& worker_id, const std::string& sandbox_id) {
  auto& st = self->state;
  auto i = st.placed.find(sandbox_id);
  if (i == st.placed.end() || i->second != worker_id)
    return true;
  st.placed.erase(i);
  auto w = st.workers.find(worker_id);
  if (w == st.workers.end())
    return true;
  auto& worker = w->second;
  auto held = worker.reservations.find(sandbox_id);
  // Counted in the last beat's figures: what it held comes off them now, so
  // that a create right after a delete finds the room the next beat would
  // show (the beat then replaces the figures).
  if (held != worker.reservations.end() && worker.running.erase(sandbox_id) != 0) {
    worker.allocated = minus(worker.allocated, held->second.requested);
    worker.limited = minus(worker.limited, held->second.limits);
  }
  if (held != worker.reservations.end())
    worker.reservations.erase(held);
  return true;
}

caf::result<placement> on_node(self_ptr self, const std::string& worker_id) {
  auto& st = self->state;
  auto i = st.workers.find(worker_id);
  if (i == st.workers.end())
    return make_error(errc::not_found, "no worker " + worker_id);
  if (i->second.lost)
    return make_error(errc::unavailable, "worker " + worker_id + " is lost");
  return placement_of(i->second);
}

/// Forwards a worker's call to the control-plane actor that owns the answer.
template <class Reply, class Handle, class... Ts>
caf::result<Reply> delegate_to(self_ptr self, const Handle& dest, const char* what, Ts... xs) {
  if (!dest)
    return make_error(errc::unavailable, std::string("this control plane has no ") + what);
  auto promise = self->make_response_promise<Reply>();
  self
    ->request(dest, std::chrono::milliseconds(self->state.options.delegate_timeout_ms),
              std::move(xs)...)
    .then([promise](Reply& reply) mutable { promise.deliver(std::move(reply)); },
          [promise](caf::error& error) mutable { promise.deliver(std::move(error)); });
  return promise;
}

void schedule_check(self_ptr self) {
  self->delayed_send(self, std::chrono::milliseconds(self->state.options.check_interval_ms),
                     actors::sc_check_atom::value);
}

void on_check(self_ptr self) {
  auto& st = self->state;
  auto now = self->clock().now();
  auto timeout = std::chrono::milliseconds(st.options.heartbeat_timeout_ms);
  for (auto& [id, w] : st.workers)
    if (!w.lost && now - w.last_beat > timeout)
      w.lost = true;
  schedule_check(self);
}

void on_down(self_ptr self, const caf::down_msg& down) {
  for (auto& [id, w] : self->state.workers) {
    if (w.node && w.node.address() == down.source) {
      w.lost = true;
      w.node_down = true;
      self->state.worker_of_node.erase(w.node.node());
      return;
    }
  }
}

scheduler_actor::behavior_type scheduler(self_ptr self, scheduler_options options,
                                         scheduler_deps deps) {
  AIRLOCK_ASSERT(deps.clock != nullptr && deps.entropy != nullptr, "scheduler_deps incomplete");
  AIRLOCK_ASSERT(options.check_interval_ms > 0, "check_interval_ms must be positive");
  self->state.options = std::move(options);
  self->state.deps = std::move(deps);
  self->set_down_handler([self](caf::down_msg& down) { on_down(self, down); });
  schedule_check(self);
  return {
    [self](actors::sc_register_atom, schema::worker_registration& r, node_actor& node) {
      return on_register(self, r, node);
    },
    [self](actors::sc_beat_atom, schema::worker_heartbeat& beat) { return on_beat(self, beat); },
    [self](actors::sc_place_atom, actors::placement_request& request) -> caf::result<placement> {
      if (!from_this_process(self))
        return not_for_workers("placement");
      return on_place(self, request);
    },
    [self](actors::sc_release_atom, const std::string& worker_id,
           const std::string& sandbox_id) -> caf::result<bool> {
      // The gateway releases with anon_send (no sender): only a remote
      // sender is refused.
      if (self->current_sender() && !from_this_process(self))
        return not_for_workers("release");
      return on_release(self, worker_id, sandbox_id);
    },
    [self](actors::sc_node_atom, const std::string& worker_id) -> caf::result<placement> {
      // A worker never gets another worker's node: it could call it.
      if (!from_this_process(self))
        return not_for_workers("a worker's node");
      return on_node(self, worker_id);
    },
    [self](actors::sc_workers_atom) -> caf::result<std::vector<actors::worker_view>> {
      if (!from_this_process(self))
        return not_for_workers("the fleet's list");
      std::vector<actors::worker_view> views;
      views.reserve(self->state.workers.size());
      for (const auto& [id, w] : self->state.workers)
        views.push_back(view_of(w));
      return views;
    },
    [self](actors::sc_creds_atom,
           const std::string& sandbox_id) -> caf::result<std::vector<schema::credential_grant>> {
      // A worker reads the credentials of its own sandboxes only (as a
      // kubelet reads only its own pods' secrets).
      // Heartbeats add the sandboxes a worker runs to `placed` too.
      if (!trusted_local_worker(self)) {
        auto& st = self->state;
        auto placed = st.placed.find(sandbox_id);
        auto worker =
          placed == st.placed.end() ? st.workers.end() : st.workers.find(placed->second);
        if (worker == st.workers.end() || !sent_by(self, worker->second))
          return make_error(errc::permission_denied, "credentials of sandbox "
                                                       + sandbox_id.substr(0, 64)
                                                       + " go only to the worker it is placed on");
      }
      return delegate_to<std::vector<schema::credential_grant>>(
        self, self->state.deps.credentials, "credential service", actors::cr_grants_atom::value,
        sandbox_id);
    },
    [self](actors::sc_audit_atom, std::vector<schema::audit_record>& records) -> caf::result<bool> {
      if (!trusted_local_worker(self)) {
        const worker_entry* caller = calling_worker(self);
        if (caller == nullptr)
          return make_error(errc::permission_denied, "audit records come only from workers");
        // A worker speaks for its own sandboxes only: one record about
        // another's refuses the batch.
        const auto& placed = self->state.placed;
        for (const auto& record : records) {
          auto on = placed.find(record.sandbox_id);
          if (on == placed.end() || on->second != caller->registration.id)
            return make_error(errc::permission_denied,
                              "audit records of sandbox " + record.sandbox_id.substr(0, 64)
                                + " come only from the worker it is placed on");
        }
      }
      return delegate_to<bool>(self, self->state.deps.audit, "audit log",
                               actors::au_append_atom::value, std::move(records));
    },
    [self](actors::sc_remove_atom, const std::string& worker_id) -> caf::result<bool> {
      if (!from_this_process(self))
        return not_for_workers("removing a worker");
      auto& st = self->state;
      auto i = st.workers.find(worker_id);
      if (i == st.workers.end())
        return make_error(errc::not_found, "no worker " + worker_id.substr(0, 64));
      if (!i->second.lost && !i->second.node_down)
        return make_error(errc::wrong_state,
                          "worker " + worker_id.substr(0, 64)
                            + " is ready: stop it and wait until it is lost, then remove it");
      if (i->second.node) {
        self->demonitor(i->second.node.address());
        st.worker_of_node.erase(i->second.node.node());
      }
      retire_relay(i->second);
      for (auto p = st.placed.begin(); p != st.placed.end();)
        p = p->second == worker_id ? st.placed.erase(p) : std::next(p);
      st.workers.erase(i);
      return true;
    },
    [self](actors::sc_renew_atom, const std::string& csr) -> caf::result<std::string> {
      const worker_entry* caller = calling_worker(self);
      if (caller == nullptr)
        return make_error(errc::permission_denied,
                          "certificates are renewed only for a registered worker, over its "
                          "own connection");
      if (!self->state.deps.issue_member)
        return make_error(errc::unavailable, "this control plane issues no certificates");
      auto issued = self->state.deps.issue_member(csr, caller->registration.id);
      if (!issued)
        return make_error(issued.error());
      return std::move(*issued);
    },
    [self](actors::sc_check_atom) { on_check(self); },
  };
}

} // namespace

actors::scheduler_actor spawn_scheduler(caf::actor_system& system, scheduler_options options,
                                        scheduler_deps deps) {
  return system.spawn(scheduler, std::move(options), std::move(deps));
}

} // namespace airlock::scheduler
