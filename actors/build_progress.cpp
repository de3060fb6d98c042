#include "actors/build_progress.hpp"

#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>

#include <limits>
#include <memory>

#include <nlohmann/json.hpp>

#include "actors/messages.hpp"

namespace airlock::actors {
namespace {

using nlohmann::json;

// Atom of the relay's poll (at most 10 characters, unique in airlock).
using tp_poll_atom = caf::atom_constant<caf::atom("tppoll")>;

json progress_json(const schema::template_progress& at, const std::string& prefix) {
  return {{"step", prefix + at.step},
          {"percent", at.percent < 0 ? json(nullptr) : json(at.percent)},
          {"bytes_done", at.bytes_done},
          {"bytes_total", at.bytes_total},
          {"log_bytes", at.log_end}};
}

caf::behavior progress_relay(caf::event_based_actor* self, node_actor node, std::string worker_name,
                             caf::actor operation, progress_relay_options options) {
  auto cancel = std::make_shared<bool>(false);
  self->delayed_send(self, options.every / 4, tp_poll_atom::value);
  const auto until = std::chrono::steady_clock::now() + options.lifetime;
  auto next = [self, every = options.every, until] {
    if (std::chrono::steady_clock::now() >= until)
      return self->quit();
    self->delayed_send(self, every, tp_poll_atom::value);
  };
  return {
    [=](tp_poll_atom) {
      self
        ->request(node, options.call_timeout, nd_twatch_atom::value, worker_name,
                  std::numeric_limits<uint64_t>::max(), *cancel)
        .then(
          [=](schema::template_progress& at) {
            if (!at.building)
              return next();
            self
              ->request(operation, options.call_timeout, op_progress_atom::value,
                        progress_json(at, options.step_prefix).dump())
              .then(
                [=](bool cancel_requested) {
                  *cancel = options.forward_cancel && cancel_requested;
                  next();
                },
                [=](caf::error&) { next(); });
          },
          [=](caf::error&) { next(); });
    },
  };
}

} // namespace

caf::actor spawn_progress_relay(caf::actor_system& system, node_actor node, std::string worker_name,
                                caf::actor operation, progress_relay_options options) {
  return system.spawn(progress_relay, std::move(node), std::move(worker_name), std::move(operation),
                      std::move(options));
}

void stop_progress_relay(const caf::actor& relay) {
  if (relay)
    caf::anon_send_exit(relay, caf::exit_reason::user_shutdown);
}

} // namespace airlock::actors
