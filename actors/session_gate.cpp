#include "actors/session_gate.hpp"

#include <openssl/crypto.h>

#include <chrono>
#include <cstdint>
#include <utility>

#include <caf/event_based_actor.hpp>
#include <caf/message_view.hpp>

#include "actors/errors.hpp"

namespace airlock::actors {

namespace {

bool same_secret(const std::string& a, const std::string& b) {
  return a.size() == b.size() && !a.empty() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

caf::error refused() {
  return make_error(errc::permission_denied,
                    "this actor takes only calls that carry its session's secret");
}

/// The default handler of a gate: anything that is not a gated call.
caf::result<caf::message> refuse_unexpected(caf::scheduled_actor*, caf::message_view&) {
  return refused();
}

caf::behavior node_gate(caf::event_based_actor* self, caf::actor node, std::string secret) {
  self->link_to(node); // the gate lives as long as the node it guards
  self->set_default_handler(refuse_unexpected);
  return {
    [self, node, secret = std::move(secret)](gate_call_atom, const std::string& presented,
                                             caf::message& call) -> caf::result<caf::message> {
      if (!same_secret(presented, secret))
        return refused();
      return ask_for_caller<node_actor>(self, node, std::move(call), caf::infinite);
    },
  };
}

caf::behavior scheduler_uplink(caf::event_based_actor* self, std::string secret) {
  self->set_default_handler(refuse_unexpected);
  return {
    [self, secret = std::move(secret)](uplink_call_atom, const std::string& presented,
                                       const caf::actor& scheduler, caf::message& call,
                                       uint32_t timeout_ms) -> caf::result<caf::message> {
      if (!same_secret(presented, secret))
        return refused();
      return ask_for_caller<scheduler_actor>(self, scheduler, std::move(call),
                                             caf::duration(std::chrono::milliseconds(timeout_ms)));
    },
  };
}

caf::behavior session_relay(caf::event_based_actor* self, caf::actor gate, std::string secret) {
  // delegate keeps the caller as the sender: the relay itself never sends
  // over the network, so no other node can address it.
  self->set_default_handler([gate, secret](caf::scheduled_actor* relay,
                                           caf::message_view& call) -> caf::result<caf::message> {
    auto* local = static_cast<caf::event_based_actor*>(relay);
    return local->delegate(gate, gate_call_atom::value, secret, call.move_content_to_message());
  });
  // A behavior of its own keeps the actor alive; every real message takes
  // the default handler above.
  return {[](gate_call_atom) {}};
}

} // namespace

node_actor spawn_node_gate(caf::actor_system& system, node_actor node, std::string session_secret) {
  return caf::actor_cast<node_actor>(system.spawn(
    node_gate, caf::actor_cast<caf::actor>(std::move(node)), std::move(session_secret)));
}

node_actor spawn_session_relay(caf::actor_system& system, node_actor gate,
                               std::string session_secret) {
  return caf::actor_cast<node_actor>(system.spawn(
    session_relay, caf::actor_cast<caf::actor>(std::move(gate)), std::move(session_secret)));
}

caf::actor spawn_scheduler_uplink(caf::actor_system& system, std::string uplink_secret) {
  return system.spawn(scheduler_uplink, std::move(uplink_secret));
}

bool is_session_secret(std::string_view text) {
  return text.size() == 2 * session_secret_bytes
         && text.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

bool same_session_secret(const std::string& a, const std::string& b) { return same_secret(a, b); }

} // namespace airlock::actors
