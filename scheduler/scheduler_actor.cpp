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
#include "scheduler/scheduler_state.hpp"
#include "schema/assert.hpp"

namespace airlock::scheduler {

namespace {

using namespace detail;

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
