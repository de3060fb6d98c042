#include "actors/operation_engine.hpp"

#include <caf/exit_reason.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <algorithm>
#include <optional>
#include <vector>

#include "storage/operation_store.hpp"

namespace airlock::actors {

namespace {

using schema::operation_record;
using reply_promise = caf::typed_response_promise<create_reply>;

/// A create whose record is being written: everyone waiting on it.
struct pending_creation {
  operation_record record;
  std::vector<reply_promise> first;      ///< the request that created it
  std::vector<reply_promise> duplicates; ///< later requests with the same key
  std::string index_key;                 ///< idempotency index key, if any
};

struct engine_state {
  static inline const char* name = "airlock.operation_engine";

  operation_engine_options options;
  operation_engine_deps deps;
  std::optional<storage::operation_store> operations;
  std::map<std::string, operation_actor> live;
  std::map<caf::actor_addr, std::string> live_ids;
  std::map<std::string, pending_creation> creating; ///< by operation id
  std::map<std::string, std::string> creating_keys; ///< index key -> operation id
  engine_stats stats;
};

using self_ptr = operation_engine_actor::stateful_pointer<engine_state>;

bool same_request(const operation_record& record, const operation_request& request) {
  return record.kind == request.kind && record.target_id == request.target_id
         && record.params_json == request.params_json;
}

caf::error key_conflict(const std::string& key) {
  return make_error(errc::conflict, "Idempotency-Key '" + key
                                      + "' was already used for a different request; use a "
                                        "new key");
}

std::optional<caf::error> validate(const engine_state& st, const operation_request& request) {
  auto limit = st.options.key_bytes_max;
  if (request.kind.empty() || !st.deps.procedures.count(request.kind))
    return make_error(errc::invalid_argument, "unknown operation kind '" + request.kind + "'");
  if (request.target_id.size() > limit || request.idempotency_key.size() > limit)
    return make_error(errc::invalid_argument, "target id and idempotency key are limited to "
                                                + std::to_string(limit) + " bytes");
  if (request.params_json.size() > st.options.params_bytes_max)
    return make_error(errc::invalid_argument, "operation parameters exceed "
                                                + std::to_string(st.options.params_bytes_max)
                                                + " bytes");
  if (st.live.size() + st.creating.size() >= st.options.live_operations_max)
    return make_error(errc::resource_exhausted,
                      "too many operations in flight; retry when some have ended");
  return std::nullopt;
}

operation_record new_record(self_ptr self, const operation_request& request) {
  auto& st = self->state;
  auto now = st.deps.clock->now_ms();
  operation_record record;
  record.id = make_id("op_", now, *st.deps.entropy);
  record.kind = request.kind;
  record.target_id = request.target_id;
  record.tenant_id = request.tenant_id;
  record.params_json = request.params_json;
  record.idempotency_key = request.idempotency_key;
  record.created_at_ms = now;
  record.updated_at_ms = now;
  auto timeout = request.timeout_ms == 0 ? st.options.default_timeout_ms
                                         : std::min(request.timeout_ms, st.options.timeout_max_ms);
  record.deadline_ms = now + static_cast<int64_t>(timeout);
  record.sequence = 1;
  return record;
}

void start_operation(self_ptr self, operation_record record, bool recovered) {
  auto& st = self->state;
  operation_context context;
  context.journal = st.deps.journal;
  context.clock = st.deps.clock;
  if (auto i = st.deps.procedures.find(record.kind); i != st.deps.procedures.end())
    context.runner = i->second;
  context.engine = caf::actor_cast<caf::actor>(self);
  context.options = st.options.operation;
  auto id = record.id;
  auto op = spawn_operation(self->system(), std::move(record), recovered, std::move(context));
  // Linked: the operation actors stop with the engine (their state is durable).
  self->link_to(op);
  st.live_ids.emplace(op.address(), id);
  st.live.emplace(std::move(id), std::move(op));
}

/// Looks up an operation that no actor drives (ended, or unknown).
caf::expected<operation_record> load(self_ptr self, const std::string& id,
                                     const std::string& tenant) {
  auto found = self->state.operations->get(id);
  if (!found)
    return make_error(errc::internal, found.error().message);
  if (!*found || (!tenant.empty() && (*found)->tenant_id != tenant))
    return make_error(errc::not_found, "no operation " + id);
  return std::move(**found);
}

/// The answer for an operation that no actor drives: ended, unknown, or
/// waiting for the next recovery.
caf::expected<operation_record> answer_from_store(self_ptr self, bool cancel, const std::string& id,
                                                  const std::string& tenant) {
  auto record = load(self, id, tenant);
  if (!record)
    return std::move(record.error());
  if (!cancel)
    return std::move(*record);
  if (schema::is_terminal(record->state))
    return make_error(errc::wrong_state,
                      "operation " + id + " already " + std::string(to_string(record->state)));
  return make_error(errc::unavailable, "operation " + id
                                         + " is not being driven right now; it resumes at the "
                                           "next recovery, retry then");
}

/// Forwards a query to the operation's actor; if it has just ended (its actor
/// is gone before we heard of it), answers from the store instead.
template <class Atom, class... Ts>
caf::result<operation_record> ask_operation(self_ptr self, Atom atom, const std::string& id,
                                            const std::string& tenant, Ts... xs) {
  constexpr bool cancel = std::is_same_v<Atom, op_cancel_atom>;
  auto i = self->state.live.find(id);
  if (i == self->state.live.end()) {
    auto answer = answer_from_store(self, cancel, id, tenant);
    if (!answer)
      return std::move(answer.error());
    return std::move(*answer);
  }
  auto promise = self->make_response_promise<operation_record>();
  auto timeout = std::chrono::milliseconds(self->state.options.operation.wait_max_ms
                                           + self->state.options.operation.step_timeout_ms);
  self->request(i->second, timeout, atom, tenant, std::move(xs)...)
    .then([promise](operation_record& record) mutable { promise.deliver(std::move(record)); },
          [self, promise, id, tenant](caf::error& err) mutable {
            if (err != caf::sec::request_receiver_down) {
              promise.deliver(std::move(err));
              return;
            }
            auto answer = answer_from_store(self, cancel, id, tenant);
            if (answer)
              promise.deliver(std::move(*answer));
            else
              promise.deliver(std::move(answer.error()));
          });
  return promise;
}

caf::result<create_reply> create(self_ptr self, operation_request request) {
  auto& st = self->state;
  if (auto invalid = validate(st, request))
    return std::move(*invalid);
  std::string index_key;
  if (!request.idempotency_key.empty()) {
    index_key =
      storage::operation_store::idempotency_index_key(request.tenant_id, request.idempotency_key);
    if (auto i = st.creating_keys.find(index_key); i != st.creating_keys.end()) {
      auto& pending = st.creating.at(i->second);
      if (!same_request(pending.record, request))
        return key_conflict(request.idempotency_key);
      pending.duplicates.push_back(self->make_response_promise<create_reply>());
      return pending.duplicates.back();
    }
    auto existing =
      st.operations->find_by_idempotency_key(request.tenant_id, request.idempotency_key);
    if (!existing)
      return make_error(existing.error());
    if (*existing) {
      auto record = load(self, **existing, request.tenant_id);
      if (!record)
        return std::move(record.error());
      if (!same_request(*record, request))
        return key_conflict(request.idempotency_key);
      ++st.stats.deduplicated;
      return create_reply{std::move(*record), true};
    }
  }
  auto record = new_record(self, request);
  auto id = record.id;
  storage::write_batch batch;
  storage::operation_store::stage_put(batch, record);
  pending_creation pending{std::move(record), {}, {}, index_key};
  pending.first.push_back(self->make_response_promise<create_reply>());
  auto promise = pending.first.back();
  st.creating.emplace(id, std::move(pending));
  if (!index_key.empty())
    st.creating_keys.emplace(index_key, id);
  operation_engine_actor handle = caf::actor_cast<operation_engine_actor>(self);
  st.deps.journal->submit(std::move(batch), [handle, id](status result) {
    caf::error err = result ? caf::error{} : make_error(result);
    caf::anon_send(handle, op_saved_atom::value, id, std::move(err));
  });
  return promise;
}

void on_created(self_ptr self, const std::string& id, const caf::error& err) {
  auto& st = self->state;
  auto i = st.creating.find(id);
  if (i == st.creating.end())
    return;
  auto pending = std::move(i->second);
  st.creating.erase(i);
  if (!pending.index_key.empty())
    st.creating_keys.erase(pending.index_key);
  if (err) {
    for (auto& promise : pending.first)
      promise.deliver(err);
    for (auto& promise : pending.duplicates)
      promise.deliver(err);
    return;
  }
  ++st.stats.created;
  st.stats.deduplicated += pending.duplicates.size();
  for (auto& promise : pending.first)
    promise.deliver(create_reply{pending.record, false});
  for (auto& promise : pending.duplicates)
    promise.deliver(create_reply{pending.record, true});
  start_operation(self, std::move(pending.record), false);
}

engine_stats recover(self_ptr self) {
  auto& st = self->state;
  auto active = st.operations->load_active(
    [self](std::string_view, const status&) { ++self->state.stats.unreadable; });
  if (!active) {
    ++st.stats.unreadable;
    return st.stats;
  }
  for (auto& record : *active) {
    if (st.live.count(record.id) || st.creating.count(record.id))
      continue;
    ++st.stats.recovered;
    start_operation(self, std::move(record), true);
  }
  return st.stats;
}

void count_terminal(engine_state& st, const operation_record& record) {
  switch (record.state) {
    case schema::operation_state::succeeded: ++st.stats.succeeded; break;
    case schema::operation_state::failed: ++st.stats.failed; break;
    case schema::operation_state::cancelled: ++st.stats.cancelled; break;
    default: break;
  }
}

operation_engine_actor::behavior_type engine_impl(self_ptr self, operation_engine_options options,
                                                  operation_engine_deps deps) {
  auto& st = self->state;
  st.options = std::move(options);
  st.deps = std::move(deps);
  st.operations.emplace(*st.deps.store);
  // An operation actor that stops abnormally (its store refused writes) must
  // not take the engine down; its operation resumes at the next recovery.
  self->set_exit_handler([self](const caf::exit_msg& msg) {
    if (msg.reason == caf::exit_reason::normal)
      return; // an operation ended; op_event already told us
    auto i = self->state.live_ids.find(msg.source);
    if (i == self->state.live_ids.end()) {
      self->quit(msg.reason); // our own supervisor told us to stop
      return;
    }
    self->state.live.erase(i->second);
    self->state.live_ids.erase(i);
  });
  return {
    [self](op_create_atom, operation_request& request) -> caf::result<create_reply> {
      return create(self, std::move(request));
    },
    [self](op_get_atom, const std::string& id,
           const std::string& tenant) -> caf::result<operation_record> {
      return ask_operation(self, op_get_atom::value, id, tenant);
    },
    [self](op_cancel_atom, const std::string& id,
           const std::string& tenant) -> caf::result<operation_record> {
      return ask_operation(self, op_cancel_atom::value, id, tenant);
    },
    [self](op_wait_atom, const std::string& id, const std::string& tenant,
           uint64_t wait_ms) -> caf::result<operation_record> {
      return ask_operation(self, op_wait_atom::value, id, tenant, wait_ms);
    },
    [self](op_watch_atom, const std::string& id, const std::string& tenant,
           caf::actor watcher) -> caf::result<operation_record> {
      return ask_operation(self, op_watch_atom::value, id, tenant, std::move(watcher));
    },
    [self](op_recover_atom) -> engine_stats { return recover(self); },
    [self](op_stats_atom) -> engine_stats {
      auto stats = self->state.stats;
      stats.live = self->state.live.size();
      return stats;
    },
    [self](op_saved_atom, const std::string& id, const caf::error& err) {
      on_created(self, id, err);
    },
    [self](op_event_atom, const operation_record& record) {
      auto& engine = self->state;
      count_terminal(engine, record);
      if (engine.deps.on_terminal)
        engine.deps.on_terminal(record);
      if (auto i = engine.live.find(record.id); i != engine.live.end()) {
        engine.live_ids.erase(i->second.address());
        engine.live.erase(i);
      }
    },
  };
}

} // namespace

operation_engine_actor spawn_operation_engine(caf::actor_system& system,
                                              operation_engine_options options,
                                              operation_engine_deps deps) {
  return system.spawn(engine_impl, std::move(options), std::move(deps));
}

} // namespace airlock::actors
