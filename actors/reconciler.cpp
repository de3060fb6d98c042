#include "actors/reconciler.hpp"

#include <caf/send.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "actors/errors.hpp"

namespace airlock::actors {

namespace {

using std::chrono::milliseconds;

struct reconciler_state {
  // Not an aggregate: CAF would otherwise try to build it from the actor pointer.
  reconciler_state() = default;
  static inline const char* name = "reconciler";
  sandbox_registry_actor registry;
  scheduler_actor scheduler;
  reconciler_options options;
  audit_actor audit;
};

using reconciler_pointer = reconciler_actor::stateful_pointer<reconciler_state>;

/// One pass: the records that claim a live sandbox, grouped by worker.
struct pass {
  std::map<std::string, std::vector<schema::sandbox_record>> by_worker;
  caf::typed_response_promise<uint64_t> promise;
  bool has_promise = false;
  size_t pending_workers = 0;
  uint64_t marked = 0;

  void finish_one() {
    if (--pending_workers == 0 && has_promise)
      promise.deliver(marked);
  }
};

bool claims_live(schema::sandbox_state state) {
  return state == schema::sandbox_state::running || state == schema::sandbox_state::paused;
}

void mark_lost(reconciler_pointer self, std::shared_ptr<pass> run, schema::sandbox_record record) {
  record.state = schema::sandbox_state::error;
  record.error_reason = schema::error_info{
    "unavailable",
    "worker " + record.worker_id
      + " no longer runs this sandbox (it restarted); delete it and create a new one"};
  ++run->marked;
  if (self->state.audit)
    caf::anon_send(self->state.audit, au_append_atom::value,
                   std::vector<schema::audit_record>{schema::audit_record{
                     0, record.tenant_id, record.id, "lifecycle", "error",
                     record.error_reason->message, "sandbox.reconcile", record.worker_id}});
  self
    ->request(self->state.registry, milliseconds(self->state.options.call_timeout_ms),
              rg_save_atom::value, std::move(record))
    .then([](schema::sandbox_record&) {}, [](caf::error&) {});
}

void check_worker(reconciler_pointer self, std::shared_ptr<pass> run, std::string worker_id) {
  auto timeout = milliseconds(self->state.options.call_timeout_ms);
  self->request(self->state.scheduler, timeout, sc_node_atom::value, worker_id)
    .then(
      [self, run, worker_id, timeout](placement& where) {
        self->request(where.node, timeout, nd_list_atom::value)
          .then(
            [self, run, worker_id](std::vector<node_sandbox>& running) {
              std::set<std::string> present;
              for (const auto& entry : running)
                present.insert(entry.sandbox_id);
              for (auto& record : run->by_worker[worker_id])
                if (!present.count(record.id))
                  mark_lost(self, run, record);
              run->finish_one();
            },
            [run](caf::error&) { run->finish_one(); });
      },
      // Lost or not yet rejoined: its sandboxes may come back.
      [run](caf::error&) { run->finish_one(); });
}

void scan(reconciler_pointer self, std::shared_ptr<pass> run, std::string cursor) {
  sandbox_query query;
  query.limit = self->state.options.page_size;
  query.cursor = std::move(cursor);
  self
    ->request(self->state.registry, milliseconds(self->state.options.call_timeout_ms),
              rg_list_atom::value, query)
    .then(
      [self, run](sandbox_page& page) {
        for (auto& record : page.items)
          if (claims_live(record.state) && !record.worker_id.empty())
            run->by_worker[record.worker_id].push_back(std::move(record));
        if (!page.next_cursor.empty())
          return scan(self, run, page.next_cursor);
        run->pending_workers = run->by_worker.size() + 1;
        for (const auto& [worker_id, records] : run->by_worker)
          check_worker(self, run, worker_id);
        run->finish_one();
      },
      [run](caf::error&) {
        run->pending_workers = 1;
        run->finish_one();
      });
}

reconciler_actor::behavior_type reconciler_behavior(reconciler_pointer self,
                                                    sandbox_registry_actor registry,
                                                    scheduler_actor scheduler,
                                                    reconciler_options options, audit_actor audit) {
  self->state.registry = std::move(registry);
  self->state.audit = std::move(audit);
  self->state.scheduler = std::move(scheduler);
  self->state.options = options;
  self->delayed_send(self, milliseconds(options.interval_ms), rc_tick_atom::value);
  return {
    [self](rc_run_atom) -> caf::result<uint64_t> {
      auto run = std::make_shared<pass>();
      run->promise = self->make_response_promise<uint64_t>();
      run->has_promise = true;
      auto promise = run->promise;
      scan(self, run, {});
      return promise;
    },
    [self](rc_tick_atom) {
      scan(self, std::make_shared<pass>(), {});
      self->delayed_send(self, milliseconds(self->state.options.interval_ms), rc_tick_atom::value);
    },
  };
}

} // namespace

reconciler_actor spawn_reconciler(caf::actor_system& system, sandbox_registry_actor registry,
                                  scheduler_actor scheduler, reconciler_options options,
                                  audit_actor audit) {
  return system.spawn(reconciler_behavior, std::move(registry), std::move(scheduler), options,
                      std::move(audit));
}

} // namespace airlock::actors
