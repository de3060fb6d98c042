#include "actors/audit_actor.hpp"

#include <caf/typed_event_based_actor.hpp>

#include <chrono>
#include <memory>

#include "actors/errors.hpp"
#include "storage/egress_store.hpp"

namespace airlock::actors {

namespace {

struct audit_state {
  // Not an aggregate: CAF would otherwise try to build it from the actor pointer.
  audit_state() = default;
  static inline const char* name = "airlock.audit";
  std::unique_ptr<storage::audit_store> store;
  const wall_clock* clock = nullptr;
  audit_options options;
};

using audit_pointer = audit_actor::stateful_pointer<audit_state>;

void cut(std::string& field, size_t max) {
  if (field.size() > max)
    field.resize(max);
}

caf::result<bool> on_append(audit_pointer self, std::vector<schema::audit_record>& records) {
  auto& st = self->state;
  if (records.size() > st.options.append_records_max)
    return make_error(errc::too_large, "an audit batch holds more than "
                                         + std::to_string(st.options.append_records_max)
                                         + " records");
  auto now = st.clock->now_ms();
  for (auto& r : records) {
    if (r.at_ms <= 0)
      r.at_ms = now;
    for (auto* field :
         {&r.tenant_id, &r.sandbox_id, &r.kind, &r.decision, &r.reason, &r.target, &r.detail})
      cut(*field, st.options.field_bytes_max);
  }
  if (auto appended = st.store->append(records); !appended)
    return make_error(appended);
  return true;
}

uint64_t sweep(audit_pointer self) {
  auto& st = self->state;
  auto cutoff = st.clock->now_ms() - int64_t{st.options.audit_retention_hours} * 3'600'000;
  uint64_t deleted = 0;
  constexpr size_t step = 10'000; // records per write batch
  while (deleted < st.options.sweep_records_max) {
    auto removed = st.store->delete_older_than(cutoff, step);
    if (!removed || *removed == 0)
      break;
    deleted += *removed;
    if (*removed < step)
      break;
  }
  return deleted;
}

} // namespace

schema::audit_record lifecycle_audit(const schema::operation_record& record) {
  schema::audit_record out;
  out.at_ms = record.updated_at_ms;
  out.tenant_id = record.tenant_id;
  if (record.kind.rfind("sandbox.", 0) == 0)
    out.sandbox_id = record.target_id;
  out.kind = "lifecycle";
  out.decision = std::string(schema::to_string(record.state));
  if (record.error)
    out.reason = record.error->code + ": " + record.error->message;
  out.target = record.kind;
  out.detail = record.id;
  return out;
}

audit_actor spawn_audit_actor(caf::actor_system& system, storage::kv_store& store,
                              const wall_clock& clock, audit_options options) {
  return system.spawn([&store, &clock, options](audit_pointer self) -> audit_actor::behavior_type {
    // Keys of the same millisecond never collide with an earlier run's.
    auto seed = static_cast<uint64_t>(clock.now_ms()) << 20;
    self->state.store = std::make_unique<storage::audit_store>(store, seed);
    self->state.clock = &clock;
    self->state.options = options;
    self->delayed_send(self, std::chrono::milliseconds(options.sweep_interval_ms),
                       au_tick_atom::value);
    return {
      [self](au_append_atom, std::vector<schema::audit_record>& records) {
        return on_append(self, records);
      },
      [self](au_query_atom, const schema::audit_query& query) -> caf::result<audit_page> {
        auto found = self->state.store->query(query);
        if (!found)
          return make_error(found.error());
        return std::move(*found);
      },
      [self](au_sweep_atom) -> uint64_t { return sweep(self); },
      [self](au_tick_atom) {
        sweep(self);
        self->delayed_send(self, std::chrono::milliseconds(self->state.options.sweep_interval_ms),
                           au_tick_atom::value);
      },
    };
  });
}

} // namespace airlock::actors
