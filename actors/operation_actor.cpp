#include "actors/operation_actor.hpp"

#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "schema/assert.hpp"
#include "storage/operation_store.hpp"

namespace airlock::actors {

namespace {

using schema::operation_record;
using schema::operation_state;
using record_promise = caf::typed_response_promise<operation_record>;

struct operation_actor_state {
  static inline const char* name = "airlock.operation";

  operation_context ctx;
  operation_record durable;               ///< as last acknowledged by the journal
  std::optional<operation_record> saving; ///< the transition being written
  uint32_t persist_failures = 0;
  bool ambiguous = false;   ///< the current step must be reconciled first
  bool interrupted = false; ///< ambiguous because a restart cut the step short
  bool step_in_flight = false;
  uint64_t step_call = 0; ///< replies of abandoned calls are ignored
  std::optional<std::pair<step_outcome, bool>> deferred_outcome; ///< arrived mid-write
  uint32_t unknown_in_row = 0;
  bool retry_scheduled = false;
  bool deadline_hit = false;
  bool cancel_wanted = false;
  std::vector<record_promise> cancel_promises;
  std::map<uint64_t, record_promise> waiters;
  uint64_t next_waiter = 0;
  std::vector<caf::actor> watchers;
};

using self_ptr = operation_actor::stateful_pointer<operation_actor_state>;

void drive(self_ptr self);
void on_outcome(self_ptr self, step_outcome outcome, bool was_check);

std::chrono::milliseconds retry_delay(const operation_options& options, uint32_t failures) {
  auto shift = std::min<uint32_t>(failures > 0 ? failures - 1 : 0, 20);
  auto delay = std::min<uint64_t>(options.retry_delay_ms << shift, options.retry_delay_max_ms);
  return std::chrono::milliseconds(delay);
}

void schedule_retry(self_ptr self, uint32_t failures) {
  if (self->state.retry_scheduled)
    return;
  self->state.retry_scheduled = true;
  self->delayed_send(self, retry_delay(self->state.ctx.options, failures), op_retry_atom::value);
}

void submit(self_ptr self) {
  auto& st = self->state;
  storage::write_batch batch;
  storage::operation_store::stage_put(batch, *st.saving);
  operation_actor handle = caf::actor_cast<operation_actor>(self);
  auto sequence = st.saving->sequence;
  st.ctx.journal->submit(std::move(batch), [handle, sequence](status result) {
    caf::error err = result ? caf::error{} : make_error(result);
    caf::anon_send(handle, op_saved_atom::value, sequence, std::move(err));
  });
}

/// Starts writing `next` as the operation's new state. Precondition: no write
/// in flight (transitions of one operation are strictly sequential).
void save(self_ptr self, operation_record next) {
  auto& st = self->state;
  AIRLOCK_ASSERT(!st.saving, "transition started while another is in flight", st.durable.id);
  next.sequence = st.durable.sequence + 1;
  next.updated_at_ms = st.ctx.clock->now_ms();
  st.saving = std::move(next);
  submit(self);
}

operation_record ended(const operation_record& from, operation_state state, std::string code,
                       std::string message) {
  auto next = from;
  next.state = state;
  next.step_started = false;
  next.error = schema::error_info{std::move(code), std::move(message)};
  return next;
}

void deliver_all(std::vector<record_promise>& promises, const operation_record& record) {
  for (auto& promise : promises)
    promise.deliver(record);
  promises.clear();
}

void publish(self_ptr self) {
  auto& st = self->state;
  for (auto& watcher : st.watchers)
    caf::anon_send(watcher, op_event_atom::value, st.durable);
  if (st.durable.cancel_requested || schema::is_terminal(st.durable.state))
    deliver_all(st.cancel_promises, st.durable);
  if (!schema::is_terminal(st.durable.state))
    return;
  for (auto& [id, promise] : st.waiters)
    promise.deliver(st.durable);
  st.waiters.clear();
  if (st.ctx.engine)
    caf::anon_send(st.ctx.engine, op_event_atom::value, st.durable);
}

void on_saved(self_ptr self, uint64_t sequence, const caf::error& err) {
  auto& st = self->state;
  if (!st.saving || st.saving->sequence != sequence)
    return; // a late duplicate
  if (err) {
    if (++st.persist_failures < st.ctx.options.persist_attempts_max) {
      schedule_retry(self, st.persist_failures);
      return;
    }
    // The store keeps refusing: stop here. The last acknowledged state is
    // durable, so the next recovery resumes from it.
    auto failure =
      make_error(errc::unavailable, "operation " + st.durable.id
                                      + " cannot persist its state: " + to_status(err).message);
    for (auto& promise : st.cancel_promises)
      promise.deliver(failure);
    for (auto& [id, promise] : st.waiters)
      promise.deliver(failure);
    self->quit(failure);
    return;
  }
  st.durable = std::move(*st.saving);
  st.saving.reset();
  st.persist_failures = 0;
  publish(self);
  drive(self);
}

step_request make_step_request(self_ptr self, const operation_record& record) {
  return step_request{record.id,        record.kind,        record.target_id,
                      record.tenant_id, record.params_json, record.step,
                      record.step_data, record.attempts,    caf::actor_cast<caf::actor>(self)};
}

/// A step's progress: kept with the record (the next transition writes it)
/// and told to watchers at once.
bool on_progress(self_ptr self, std::string progress_json) {
  auto& st = self->state;
  if (schema::is_terminal(st.durable.state))
    return true; // nothing left to report to: stop
  if (st.durable.progress_json != progress_json) {
    st.durable.progress_json = progress_json;
    if (st.saving)
      st.saving->progress_json = progress_json;
    for (auto& watcher : st.watchers)
      caf::anon_send(watcher, op_progress_atom::value, st.durable);
  }
  return st.durable.cancel_requested || st.cancel_wanted;
}

void call_step(self_ptr self, bool check) {
  auto& st = self->state;
  st.step_in_flight = true;
  auto call = ++st.step_call;
  auto timeout = std::chrono::milliseconds(st.ctx.options.step_timeout_ms);
  auto request = make_step_request(self, st.durable);
  auto on_reply = [self, call, check](step_outcome& outcome) {
    if (call != self->state.step_call || !self->state.step_in_flight)
      return;
    self->state.step_in_flight = false;
    on_outcome(self, std::move(outcome), check);
  };
  auto on_error = [self, call, check](caf::error& err) {
    if (call != self->state.step_call || !self->state.step_in_flight)
      return;
    self->state.step_in_flight = false;
    auto outcome = step_outcome::unknown();
    outcome.error_message = to_status(err).message;
    on_outcome(self, std::move(outcome), check);
  };
  if (check)
    self->request(st.ctx.runner, timeout, step_check_atom::value, std::move(request))
      .then(on_reply, on_error);
  else
    self->request(st.ctx.runner, timeout, step_run_atom::value, std::move(request))
      .then(on_reply, on_error);
}

void on_unknown(self_ptr self, const step_outcome& outcome) {
  auto& st = self->state;
  st.ambiguous = true;
  if (++st.unknown_in_row > st.ctx.options.reconcile_attempts_max) {
    save(self,
         ended(st.durable, operation_state::failed, std::string(to_string(errc::outcome_unknown)),
               "step " + std::to_string(st.durable.step) + " of " + st.durable.kind
                 + " has an unknown outcome after "
                 + std::to_string(st.ctx.options.reconcile_attempts_max) + " checks (last: "
                 + outcome.error_message + "); inspect the target and retry the operation"));
    return;
  }
  schedule_retry(self, st.unknown_in_row);
}

void on_outcome(self_ptr self, step_outcome outcome, bool was_check) {
  auto& st = self->state;
  if (schema::is_terminal(st.durable.state))
    return; // e.g. the deadline failed the operation while the step ran
  if (st.saving) {
    st.deferred_outcome.emplace(std::move(outcome), was_check);
    return;
  }
  const auto& d = st.durable;
  if (outcome.verdict == step_verdict::not_done && !was_check)
    outcome.verdict = step_verdict::unknown;
  if (outcome.verdict != step_verdict::unknown && outcome.verdict != step_verdict::not_done)
    st.interrupted = false;
  if (outcome.verdict != step_verdict::unknown) {
    st.ambiguous = false;
    st.unknown_in_row = 0;
  }
  switch (outcome.verdict) {
    case step_verdict::advance: {
      auto next = d;
      next.step = d.step + 1;
      next.step_data = std::move(outcome.step_data);
      next.step_started = true;
      next.attempts = 1;
      if (d.cancel_requested || st.cancel_wanted) {
        next = ended(next, operation_state::cancelled, std::string(to_string(errc::cancelled)),
                     "cancelled on request after step " + std::to_string(d.step));
        next.cancel_requested = true;
      }
      save(self, std::move(next));
      return;
    }
    case step_verdict::complete: {
      auto next = d;
      next.state = operation_state::succeeded;
      next.step_started = false;
      next.result_json = outcome.result_json.empty() ? "{}" : std::move(outcome.result_json);
      save(self, std::move(next));
      return;
    }
    case step_verdict::fail: {
      // A step that stopped because it was asked to ends the operation cancelled.
      const bool on_request = (d.cancel_requested || st.cancel_wanted)
                              && outcome.error_code == to_string(errc::cancelled);
      auto next = ended(d, on_request ? operation_state::cancelled : operation_state::failed,
                        std::move(outcome.error_code), std::move(outcome.error_message));
      next.cancel_requested = next.cancel_requested || on_request;
      save(self, std::move(next));
      return;
    }
    case step_verdict::not_done: {
      // A step cut short by our own restart did not get a fair try: only
      // attempts that ran to an answer count (the deadline bounds the rest).
      bool counts = !std::exchange(st.interrupted, false);
      if (counts && d.attempts >= st.ctx.options.step_attempts_max) {
        save(self,
             ended(d, operation_state::failed, "step_attempts_exhausted",
                   "step " + std::to_string(d.step) + " of " + d.kind
                     + " did not take effect after " + std::to_string(d.attempts) + " attempts"));
        return;
      }
      auto next = d;
      next.attempts = counts ? d.attempts + 1 : d.attempts;
      next.step_started = true;
      save(self, std::move(next));
      return;
    }
    case step_verdict::unknown: on_unknown(self, outcome); return;
  }
}

/// Decides the next move from the acknowledged state. Runs after start,
/// after every acknowledged transition and after every timer.
void drive(self_ptr self) {
  auto& st = self->state;
  if (st.saving)
    return;
  const auto& d = st.durable;
  if (schema::is_terminal(d.state)) {
    self->quit(); // on_saved has published the terminal record
    return;
  }
  if (st.deferred_outcome) {
    auto [outcome, was_check] = std::move(*st.deferred_outcome);
    st.deferred_outcome.reset();
    on_outcome(self, std::move(outcome), was_check);
    return;
  }
  auto now = st.ctx.clock->now_ms();
  if (st.deadline_hit || (d.deadline_ms > 0 && now >= d.deadline_ms)) {
    save(self, ended(d, operation_state::failed, std::string(to_string(errc::deadline_exceeded)),
                     d.kind + " did not finish before its deadline (step " + std::to_string(d.step)
                       + " may have partly applied); retry it"));
    return;
  }
  if (!st.ctx.runner) {
    save(self, ended(d, operation_state::failed, std::string(to_string(errc::unknown_kind)),
                     "this airlock has no procedure for operation kind '" + d.kind
                       + "'; run a version that has it"));
    return;
  }
  bool cancel_now = d.cancel_requested || st.cancel_wanted;
  if (cancel_now && (d.state == operation_state::pending || !st.step_in_flight)) {
    auto next = ended(d, operation_state::cancelled, std::string(to_string(errc::cancelled)),
                      "cancelled on request before step " + std::to_string(d.step));
    next.cancel_requested = true;
    save(self, std::move(next));
    return;
  }
  if (st.cancel_wanted && !d.cancel_requested) {
    auto next = d;
    next.cancel_requested = true;
    save(self, std::move(next));
    return;
  }
  if (d.state == operation_state::pending || !d.step_started) {
    auto next = d;
    next.state = operation_state::running;
    next.step_started = true;
    next.attempts = d.attempts + 1;
    save(self, std::move(next));
    return;
  }
  if (st.step_in_flight || st.retry_scheduled)
    return;
  call_step(self, st.ambiguous);
}

bool visible(const operation_record& record, const std::string& tenant) {
  return tenant.empty() || tenant == record.tenant_id;
}

caf::error not_found(const operation_record& record) {
  return make_error(errc::not_found, "no operation " + record.id);
}

operation_actor::behavior_type make_behavior(self_ptr self) {
  return {
    [self](op_get_atom, const std::string& tenant) -> caf::result<operation_record> {
      if (!visible(self->state.durable, tenant))
        return not_found(self->state.durable);
      return self->state.durable;
    },
    [self](op_cancel_atom, const std::string& tenant) -> caf::result<operation_record> {
      auto& st = self->state;
      if (!visible(st.durable, tenant))
        return not_found(st.durable);
      if (schema::is_terminal(st.durable.state))
        return make_error(errc::wrong_state, "operation " + st.durable.id + " already "
                                               + std::string(to_string(st.durable.state)));
      if (st.durable.cancel_requested)
        return st.durable;
      st.cancel_wanted = true;
      st.cancel_promises.push_back(self->make_response_promise<operation_record>());
      auto promise = st.cancel_promises.back();
      drive(self);
      return promise;
    },
    [self](op_wait_atom, const std::string& tenant,
           uint64_t wait_ms) -> caf::result<operation_record> {
      auto& st = self->state;
      if (!visible(st.durable, tenant))
        return not_found(st.durable);
      if (schema::is_terminal(st.durable.state) || wait_ms == 0)
        return st.durable;
      if (st.waiters.size() >= st.ctx.options.waiters_max)
        return make_error(errc::resource_exhausted, "too many waiters on " + st.durable.id);
      auto id = st.next_waiter++;
      auto promise = self->make_response_promise<operation_record>();
      st.waiters.emplace(id, promise);
      auto wait = std::chrono::milliseconds(std::min(wait_ms, st.ctx.options.wait_max_ms));
      self->delayed_send(self, wait, op_waited_atom::value, id);
      return promise;
    },
    [self](op_watch_atom, const std::string& tenant,
           caf::actor watcher) -> caf::result<operation_record> {
      auto& st = self->state;
      if (!visible(st.durable, tenant))
        return not_found(st.durable);
      if (st.watchers.size() >= st.ctx.options.watchers_max)
        return make_error(errc::resource_exhausted, "too many watchers on " + st.durable.id);
      self->monitor(watcher);
      st.watchers.push_back(std::move(watcher));
      return st.durable;
    },
    [self](op_progress_atom, std::string& progress_json) {
      return on_progress(self, std::move(progress_json));
    },
    [self](op_saved_atom, uint64_t sequence, const caf::error& err) {
      on_saved(self, sequence, err);
    },
    [self](op_timer_atom) {
      self->state.deadline_hit = true;
      drive(self);
    },
    [self](op_waited_atom, uint64_t id) {
      auto& st = self->state;
      auto i = st.waiters.find(id);
      if (i == st.waiters.end())
        return;
      i->second.deliver(st.durable);
      st.waiters.erase(i);
    },
    [self](op_retry_atom) {
      auto& st = self->state;
      st.retry_scheduled = false;
      if (st.saving)
        submit(self);
      else
        drive(self);
    },
  };
}

operation_actor::behavior_type operation_impl(self_ptr self, operation_record record,
                                              bool recovered, operation_context context) {
  auto& st = self->state;
  st.ctx = std::move(context);
  st.ambiguous = recovered && record.step_started;
  st.interrupted = st.ambiguous;
  st.durable = std::move(record);
  self->set_down_handler([self](const caf::down_msg& down) {
    auto& watchers = self->state.watchers;
    watchers.erase(
      std::remove_if(watchers.begin(), watchers.end(),
                     [&down](const caf::actor& w) { return w.address() == down.source; }),
      watchers.end());
  });
  const auto& d = st.durable;
  if (d.deadline_ms > 0 && !schema::is_terminal(d.state)) {
    auto left_ms = std::max<int64_t>(0, d.deadline_ms - st.ctx.clock->now_ms());
    self->delayed_send(self, std::chrono::milliseconds(left_ms), op_timer_atom::value);
  }
  // Start once the behavior is installed: drive() may already send and quit.
  self->send(self, op_retry_atom::value);
  st.retry_scheduled = true;
  return make_behavior(self);
}

} // namespace

operation_actor spawn_operation(caf::actor_system& system, schema::operation_record record,
                                bool recovered, operation_context context) {
  return system.spawn(operation_impl, std::move(record), recovered, std::move(context));
}

} // namespace airlock::actors
