#pragma once
// How an HTTP handler asks an actor without blocking its I/O thread: a
// short-lived event-based actor sends the request and runs the reply or the
// error handler (on a CAF thread), then ends. Handlers answer the exchange
// from there; exchange::respond is thread-safe.

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>

#include <chrono>
#include <utility>

namespace airlock::gateway {

/// Sends `xs...` to `dest` and calls `on_reply(reply...)` or
/// `on_error(caf::error&)` (a timeout included). Both handlers must have
/// concrete parameter types (CAF matches the reply against them).
template <class Handle, class OnReply, class OnError, class... Ts>
void call_actor(caf::actor_system& system, const Handle& dest, std::chrono::milliseconds timeout,
                OnReply on_reply, OnError on_error, Ts... xs) {
  system.spawn([dest, timeout, on_reply = std::move(on_reply), on_error = std::move(on_error),
                xs...](caf::event_based_actor* self) mutable {
    // Without a behavior the actor ends once this response is handled.
    self->request(dest, timeout, std::move(xs)...).then(std::move(on_reply), std::move(on_error));
  });
}

} // namespace airlock::gateway
