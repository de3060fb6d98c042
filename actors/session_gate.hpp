#pragma once
// A worker's node actor behind a session secret, so that only the control
// plane it registered with can call it.
//
// CAF 0.17's BASP forwards a message from one connected peer to another and
// takes the message's source from what the sender writes: a peer that holds a
// valid certificate (a compromised worker) could otherwise address another
// worker's node actor through the control plane and run processes in its
// sandboxes. A worker therefore never exposes its node actor: it registers a
// gate, which passes a call on only when it carries the secret the worker sent
// in its registration (over its own TLS connection, so no other peer saw it).
// The control plane's side wraps every call to that worker in a local relay
// that adds the secret, so callers keep using a plain node_actor handle.
//
// CAF makes a local actor reachable by id from other nodes once its handle is
// serialized or it sends a message over the network (basp_broker puts it in
// the actor registry). The gate therefore answers each call itself (it asks
// the node and passes the answer on): the node actor never talks to another
// node, so no peer can address it past the gate. The relay delegates, so it
// never sends over the network itself and stays unreachable too.

#include <string>
#include <string_view>
#include <utility>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/duration.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/replies_to.hpp>
#include <caf/response_promise.hpp>
#include <caf/typed_actor.hpp>
#include <caf/unit.hpp>

#include "actors/cluster_protocol.hpp"

namespace airlock::actors {

using gate_call_atom = caf::atom_constant<caf::atom("gatecall")>;
using uplink_call_atom = caf::atom_constant<caf::atom("uplinkcall")>;

/// Bytes of entropy in a session secret (as hex: twice as many characters).
inline constexpr size_t session_secret_bytes = 32;

/// The worker's side: passes `(gate_call, secret, call)` to `node` as `call`
/// (the reply goes to the original caller) when `secret` is `session_secret`,
/// and refuses anything else with permission_denied. Ends with `node`.
node_actor spawn_node_gate(caf::actor_system& system, node_actor node, std::string session_secret);

/// The control plane's side: every message sent to it goes to `gate` as
/// `(gate_call, session_secret, message)`, the reply straight back to the
/// sender. A local actor; kill it when the registration it serves is replaced.
node_actor spawn_session_relay(caf::actor_system& system, node_actor gate,
                               std::string session_secret);

/// The worker's side of its own calls to the scheduler (the join actor's
/// voice on the network, so that the join actor never talks to another node
/// and cannot be addressed): passes `(uplink_call, secret, scheduler, call,
/// timeout_ms)` to `scheduler` as `call` when `secret` is `uplink_secret`
/// (which never leaves the process), answers with the reply itself, and
/// refuses anything else with permission_denied.
caf::actor spawn_scheduler_uplink(caf::actor_system& system, std::string uplink_secret);

/// A fresh secret's shape: 64 lower-case hex digits.
bool is_session_secret(std::string_view text);

/// Constant-time comparison of two secrets (false when either is empty).
bool same_session_secret(const std::string& a, const std::string& b);

namespace detail {

/// The one reply type of a message signature (caf::unit_t for reacts_to).
template <class Signature>
struct reply_of;
template <class Inputs, class Output>
struct reply_of<caf::typed_mpi<Inputs, caf::output_tuple<Output>>> {
  using type = Output;
};
template <class Inputs>
struct reply_of<caf::typed_mpi<Inputs, caf::output_tuple<void>>> {
  using type = caf::unit_t;
};

/// Hands a reply of type T to a caller's promise.
template <class T>
struct pass_on {
  caf::response_promise promise;
  void operator()(T& reply) { promise.deliver(std::move(reply)); }
};

/// A response handler for every reply type of `Interface`, and errors.
template <class... Signatures>
caf::behavior pass_answers_on(caf::typed_actor<Signatures...>*, caf::response_promise promise) {
  return caf::behavior{[promise](caf::error& error) mutable { promise.deliver(std::move(error)); },
                       pass_on<typename reply_of<Signatures>::type>{promise}...};
}

} // namespace detail

/// Asks `whom` (an actor of `Interface`) for `call` on behalf of the message
/// `self` is handling, and answers that message's sender with the reply (or
/// the error), as `self`: whoever `whom` is, it never answers the original
/// caller itself.
template <class Interface>
caf::response_promise ask_for_caller(caf::event_based_actor* self, const caf::actor& whom,
                                     caf::message call, caf::duration timeout) {
  auto promise = self->make_response_promise();
  auto handle = self->request(whom, timeout, std::move(call));
  self->add_multiplexed_response_handler(
    handle.id(), detail::pass_answers_on(static_cast<Interface*>(nullptr), promise));
  return promise;
}

} // namespace airlock::actors
