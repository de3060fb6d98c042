// The scheduler's membership: registrations (identity, shape, the fleet's
// rules, the node gate's relay) and heartbeats.

#include <caf/send.hpp>

#include <string>

#include "actors/errors.hpp"
#include "actors/session_gate.hpp"
#include "scheduler/scheduler_state.hpp"

namespace airlock::scheduler::detail {

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

} // namespace airlock::scheduler::detail
