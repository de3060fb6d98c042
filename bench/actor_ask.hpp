#pragma once
// Blocking request-reply from a benchmark's main thread to an actor: the one
// helper the benchmarks that drive actors directly share.

#include <caf/scoped_actor.hpp>

#include <chrono>
#include <optional>
#include <utility>

#include "actors/errors.hpp"
#include "schema/errc.hpp"

namespace airlock::bench {

/// Sends `xs...` to `dest` and waits at most `timeout` for a reply of type
/// `R`; an error (a timeout included) comes back as the status.
template <class R, class Handle, class... Ts>
result<R> ask_within(caf::scoped_actor& self, std::chrono::milliseconds timeout, const Handle& dest,
                     Ts&&... xs) {
  std::optional<result<R>> out;
  self->request(dest, timeout, std::forward<Ts>(xs)...)
    .receive([&out](R& reply) { out.emplace(std::move(reply)); },
             [&out](caf::error& err) { out.emplace(to_status(err)); });
  return std::move(*out);
}

} // namespace airlock::bench
