#pragma once
// A blocking request from a test's thread to an actor on a real (threaded)
// actor system, bounded by a timeout.

#include <caf/scoped_actor.hpp>

#include <chrono>
#include <optional>
#include <utility>

#include "actors/errors.hpp"
#include "schema/errc.hpp"

namespace airlock::test {

/// Sends `xs...` from `self` to `dest` and waits at most `timeout` for a
/// reply of type `R`; an error (the timeout included) comes back as the status.
template <class R, class Handle, class... Ts>
result<R> ask(caf::scoped_actor& self, const Handle& dest, std::chrono::milliseconds timeout,
              Ts&&... xs) {
  std::optional<result<R>> out;
  self->request(dest, timeout, std::forward<Ts>(xs)...)
    .receive([&out](R& reply) { out.emplace(std::move(reply)); },
             [&out](caf::error& err) { out.emplace(to_status(err)); });
  return std::move(*out);
}

} // namespace airlock::test
