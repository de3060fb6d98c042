#include "actors/reconciler.hpp"

#include <caf/send.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <chrono>
#include <functional>
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

/// The sandbox should be on its worker: live, or a pause or resume under way
/// (whose operation, run again, needs it there).
bool should_exist(schema::sandbox_state state) {
  return claims_live(state) || state == schema::sandbox_state::pausing
         || state == schema::sandbox_state::resuming;
}

void audit(reconciler_pointer self, const schema::sandbox_record& record, const char* outcome,
           const std::string& what) {
  if (self->state.audit)
    caf::anon_send(self->state.audit, au_append_atom::value,
                   std::vector<schema::audit_record>{
                     schema::audit_record{0, record.tenant_id, record.id, "lifecycle", outcome,
                                          what, "sandbox.reconcile", record.worker_id}});
}

void save(reconciler_pointer self, schema::sandbox_record record) {
  self
    ->request(self->state.registry, milliseconds(self->state.options.call_timeout_ms),
              rg_save_atom::value, std::move(record))
    .then([](schema::sandbox_record&) {}, [](caf::error&) {});
}

void mark_lost(reconciler_pointer self, std::shared_ptr<pass> run, schema::sandbox_record record) {
  record.state = schema::sandbox_state::error;
  record.error_reason = schema::error_info{
    "unavailable", "worker " + record.worker_id
                     + " no longer has this sandbox (it restarted and the sandbox's files did "
                       "not survive); delete it and create a new one"};
  ++run->marked;
  audit(self, record, "error", record.error_reason->message);
  save(self, std::move(record));
}

/// Takes the worker's word on running versus paused (a sandbox brought back
/// after a restart runs) and on where it serves now (a restarted worker may
/// listen elsewhere), unless the record moved on since it was listed.
void refresh(reconciler_pointer self, const placement& where, const std::string& id,
             schema::sandbox_state on_worker) {
  self
    ->request(self->state.registry, milliseconds(self->state.options.call_timeout_ms),
              rg_get_atom::value, id, std::string{})
    .then(
      [self, where, on_worker](schema::sandbox_record& record) {
        if (!claims_live(record.state) || record.worker_id != where.worker_id
            || (record.state == on_worker && record.data_url == where.data_url))
          return;
        record.state = on_worker;
        record.data_url = where.data_url;
        save(self, std::move(record));
      },
      [](caf::error&) {});
}

/// A sandbox its worker no longer runs (the worker restarted): brought back
/// from the files it left there, processes lost; if the files are gone, it
/// is lost. The record is read again first: a sandbox deleted meanwhile
/// stays deleted.
void bring_back(reconciler_pointer self, std::shared_ptr<pass> run, const placement& where,
                const schema::sandbox_record& listed, std::function<void()> done) {
  auto timeout = milliseconds(self->state.options.call_timeout_ms);
  self->request(self->state.registry, timeout, rg_get_atom::value, listed.id, std::string{})
    .then(
      [self, run, where, done, timeout](schema::sandbox_record& record) {
        if (!should_exist(record.state) || record.worker_id != where.worker_id)
          return done();
        self->request(where.node, 3 * timeout, nd_recreate_atom::value, record)
          .then(
            [self, where, record, done](node_sandbox&) mutable {
              // It runs again; a pause or resume under way goes on from there.
              if (claims_live(record.state))
                record.state = schema::sandbox_state::running;
              record.data_url = where.data_url;
              audit(self, record, "restored",
                    "worker " + record.worker_id
                      + " restarted: the sandbox runs again with its files; its processes did "
                        "not survive");
              save(self, std::move(record));
              done();
            },
            [self, run, record, done](caf::error& error) {
              if (to_status(error).code == errc::not_found)
                mark_lost(self, run, record);
              done(); // anything else: the next pass tries again
            });
      },
      [done](caf::error&) { done(); });
}

void check_worker(reconciler_pointer self, std::shared_ptr<pass> run, std::string worker_id) {
  auto timeout = milliseconds(self->state.options.call_timeout_ms);
  self->request(self->state.scheduler, timeout, sc_node_atom::value, worker_id)
    .then(
      [self, run, worker_id, timeout](placement& where) {
        self->request(where.node, timeout, nd_list_atom::value)
          .then(
            [self, run, worker_id, where](std::vector<node_sandbox>& running) {
              std::map<std::string, schema::sandbox_state> present;
              for (const auto& entry : running)
                present.emplace(entry.sandbox_id, entry.state);
              auto& records = run->by_worker[worker_id];
              auto left = std::make_shared<size_t>(1);
              auto done = [run, left] {
                if (--*left == 0)
                  run->finish_one();
              };
              for (auto& record : records) {
                auto found = present.find(record.id);
                if (found == present.end()) {
                  ++*left;
                  bring_back(self, run, where, record, done);
                } else if (claims_live(found->second)
                           && (found->second != record.state
                               || record.data_url != where.data_url)) {
                  refresh(self, where, record.id, found->second);
                }
              }
              done();
            },
            [run](caf::error&) { run->finish_one(); });
      },
      // Lost or not yet rejoined: its sandboxes may come back.
      [run](caf::error&) { run->finish_one(); });
}

/// Snapshots a worker holds that no record names are deleted, never
/// adopted: a record is always stored before the worker is asked for its
/// snapshot and forgotten only after the worker deleted it, so such a
/// snapshot was left by a crash between the two.
void sweep_snapshots(reconciler_pointer self, std::shared_ptr<pass> run) {
  auto timeout = milliseconds(self->state.options.call_timeout_ms);
  ++run->pending_workers;
  self->request(self->state.scheduler, timeout, sc_workers_atom::value)
    .then(
      [self, run, timeout](std::vector<worker_view>& workers) {
        for (const auto& worker : workers) {
          if (worker.state == "lost")
            continue;
          ++run->pending_workers;
          auto done = [run] { run->finish_one(); };
          self->request(self->state.scheduler, timeout, sc_node_atom::value, worker.registration.id)
            .then(
              [self, run, timeout, done, worker_id = worker.registration.id](placement& where) {
                self->request(where.node, timeout, nd_ckpts_atom::value)
                  .then(
                    [self, run, timeout, done, worker_id,
                     node = where.node](std::vector<std::string>& held) {
                      for (const auto& id : held) {
                        ++run->pending_workers;
                        auto one_done = [run] { run->finish_one(); };
                        self
                          ->request(self->state.registry, timeout, rg_snapget_atom::value, id,
                                    std::string{})
                          .then([one_done](schema::snapshot_record&) { one_done(); },
                                [self, timeout, node, id, worker_id, one_done](caf::error& error) {
                                  if (to_status(error).code != errc::not_found)
                                    return one_done();
                                  schema::sandbox_record owner;
                                  owner.worker_id = worker_id;
                                  audit(self, owner, "deleted",
                                        "snapshot " + id + " on worker " + worker_id
                                          + " had no record (left by a crash): deleted");
                                  self->request(node, timeout, nd_ckptdel_atom::value, id)
                                    .then([one_done](bool) { one_done(); },
                                          [one_done](caf::error&) { one_done(); });
                                });
                      }
                      done();
                    },
                    [done](caf::error&) { done(); });
              },
              [done](caf::error&) { done(); });
        }
        run->finish_one();
      },
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
          if (should_exist(record.state) && !record.worker_id.empty())
            run->by_worker[record.worker_id].push_back(std::move(record));
        if (!page.next_cursor.empty())
          return scan(self, run, page.next_cursor);
        run->pending_workers = run->by_worker.size() + 1;
        for (const auto& [worker_id, records] : run->by_worker)
          check_worker(self, run, worker_id);
        sweep_snapshots(self, run);
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
