#include "actors/lifecycle_policy.hpp"

#include <caf/typed_event_based_actor.hpp>

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "actors/errors.hpp"
#include "actors/sandbox_procedures.hpp"

namespace airlock::actors {

namespace {

using nlohmann::json;
using schema::sandbox_record;
using schema::sandbox_state;
using std::chrono::milliseconds;

/// What a sandbox's processes looked like at one look: a change between two
/// looks is activity.
struct activity_sample {
  uint64_t output_bytes = 0;
  int64_t latest_event_ms = 0; ///< the latest start or end of a process
  size_t processes = 0;
  bool operator==(const activity_sample&) const = default;
};

struct policy_state {
  // Not an aggregate: CAF would otherwise try to build it from the actor pointer.
  policy_state() = default;
  static inline const char* name = "lifecycle_policy";
  sandbox_registry_actor registry;
  scheduler_actor scheduler;
  operation_engine_actor engine;
  const wall_clock* clock = nullptr;
  lifecycle_policy_options options;
  /// The last look at each idle-looking sandbox's processes.
  std::map<std::string, activity_sample> samples;
};

using policy_pointer = lifecycle_policy_actor::stateful_pointer<policy_state>;

/// One pass: how many operations it started, and the calls still out.
struct pass {
  caf::typed_response_promise<uint64_t> promise;
  bool has_promise = false;
  size_t pending = 1; ///< the scan itself
  uint64_t started = 0;

  void finish_one() {
    if (--pending == 0 && has_promise)
      promise.deliver(started);
  }
};

milliseconds call_timeout(policy_pointer self) {
  return milliseconds(self->state.options.call_timeout_ms);
}

/// Starts operation `kind` on the sandbox for its tenant. The idempotency
/// key makes a decision taken twice (two passes before the first operation
/// moved the record) one operation.
void start(policy_pointer self, std::shared_ptr<pass> run, const sandbox_record& record,
           const char* kind, json params, std::string key) {
  operation_request request{kind, record.id, record.tenant_id, params.dump(), std::move(key), 0};
  ++run->pending;
  self->request(self->state.engine, call_timeout(self), op_create_atom::value, request)
    .then(
      [run](create_reply& reply) {
        if (!reply.existing)
          ++run->started;
        run->finish_one();
      },
      [run](caf::error&) { run->finish_one(); });
}

/// The idle rule's action: suspend (the API's way: the snapshot's record
/// first, then the operation that takes it) or delete.
void act_on_idle(policy_pointer self, std::shared_ptr<pass> run, const sandbox_record& record) {
  const auto since = std::to_string(record.last_active_at_ms);
  if (record.spec.on_idle == schema::idle_action::delete_sandbox)
    return start(self, run, record, kind_sandbox_delete,
                 json{{"idle_since", record.last_active_at_ms}, {"reason", "idle"}},
                 "idle-delete-" + record.id + "-" + since);
  // Named after the decision, so that a repeat stores the same record.
  auto snapshot =
    new_snapshot_record(record, schema::snapshot_kind::suspend,
                        "ckpt_idle_" + record.id + "_" + since, self->state.clock->now_ms());
  ++run->pending;
  self->request(self->state.registry, call_timeout(self), rg_snapsave_atom::value, snapshot)
    .then(
      [self, run, record, since](schema::snapshot_record& stored) {
        start(self, run, record, kind_sandbox_suspend,
              json{{"snapshot_id", stored.id},
                   {"from_state", std::string(schema::to_string(record.state))},
                   {"idle_since", record.last_active_at_ms}},
              "idle-suspend-" + record.id + "-" + since);
        run->finish_one();
      },
      [run](caf::error&) { run->finish_one(); });
}

activity_sample sample_of(const std::vector<process_view>& processes) {
  activity_sample out;
  out.processes = processes.size();
  for (const auto& process : processes) {
    out.output_bytes += process.stdout_bytes + process.stderr_bytes;
    out.latest_event_ms =
      std::max({out.latest_event_ms, process.started_at_ms, process.ended_at_ms});
  }
  return out;
}

/// Compares a look at an idle-looking sandbox's processes with the last one.
void judge(policy_pointer self, std::shared_ptr<pass> run, const sandbox_record& record,
           const activity_sample& now) {
  auto& samples = self->state.samples;
  auto before = samples.find(record.id);
  if (before == samples.end()) {
    samples.emplace(record.id, now);
    // A process started or ended after the last activity the registry
    // knows of (started on the worker's own listener).
    if (now.latest_event_ms > record.last_active_at_ms)
      caf::anon_send(self->state.registry, rg_touch_atom::value, record.id);
  } else if (before->second == now && now.latest_event_ms <= record.last_active_at_ms) {
    samples.erase(before);
    act_on_idle(self, run, record);
  } else {
    before->second = now;
    caf::anon_send(self->state.registry, rg_touch_atom::value, record.id);
  }
}

/// An idle-looking sandbox: first, whether a client of the worker's own
/// listener used it since the activity the registry knows of (that is
/// activity, at the time it happened); then its processes: unchanged since
/// the last pass's look, it is idle; changed, the change is activity.
void look(policy_pointer self, std::shared_ptr<pass> run, sandbox_record record) {
  ++run->pending;
  auto on_failure = [run](caf::error&) { run->finish_one(); }; // the next pass looks again
  auto with_processes = [self, run, record, on_failure](node_actor node) {
    self->request(node, call_timeout(self), dp_procs_atom::value, record.id)
      .then(
        [self, run, record](std::vector<process_view>& processes) {
          judge(self, run, record, sample_of(processes));
          run->finish_one();
        },
        on_failure);
  };
  self->request(self->state.scheduler, call_timeout(self), sc_node_atom::value, record.worker_id)
    .then(
      [self, run, record, on_failure, with_processes](placement& where) {
        self->request(where.node, call_timeout(self), dp_quiet_atom::value, record.id)
          .then(
            [self, run, record, with_processes, node = where.node](int64_t quiet_ms) {
              const int64_t used_at = self->state.clock->now_ms() - quiet_ms;
              if (quiet_ms >= 0 && used_at > record.last_active_at_ms) {
                self->state.samples.erase(record.id);
                caf::anon_send(self->state.registry, rg_touch_atom::value, record.id, used_at);
                return run->finish_one();
              }
              with_processes(node);
            },
            on_failure);
      },
      on_failure);
}

/// Automatic checkpoints of a running, active sandbox: one every
/// checkpoint_interval_s, and the oldest automatic ones beyond
/// checkpoints_max deleted (labelled and requested ones stay).
void automatic_checkpoints(policy_pointer self, std::shared_ptr<pass> run,
                           const sandbox_record& record, int64_t now) {
  const int64_t interval_ms = int64_t{record.spec.checkpoint_interval_s} * 1000;
  ++run->pending;
  self
    ->request(self->state.registry, call_timeout(self), rg_snaplist_atom::value, record.id,
              std::string{})
    .then(
      [self, run, record, now, interval_ms](std::vector<schema::snapshot_record>& snapshots) {
        std::vector<const schema::snapshot_record*> automatic; // oldest first
        int64_t latest = 0;
        for (const auto& snapshot : snapshots)
          if (snapshot.automatic && snapshot.kind == schema::snapshot_kind::checkpoint) {
            latest = std::max(latest, snapshot.created_at_ms);
            if (snapshot.complete)
              automatic.push_back(&snapshot);
          }
        const auto keep = std::max<size_t>(1, record.spec.checkpoints_max);
        for (size_t i = 0; i + keep < automatic.size(); ++i)
          start(self, run, record, kind_checkpoint_delete,
                json{{"checkpoint_id", automatic[i]->id}}, "auto-prune-" + automatic[i]->id);
        if (now - latest >= interval_ms) {
          // Named after its interval, so that a repeat stores the same record.
          const auto slot = std::to_string(now / interval_ms);
          auto snapshot = new_snapshot_record(record, schema::snapshot_kind::checkpoint,
                                              "ckpt_auto_" + record.id + "_" + slot, now);
          snapshot.automatic = true;
          ++run->pending;
          self->request(self->state.registry, call_timeout(self), rg_snapsave_atom::value, snapshot)
            .then(
              [self, run, record, slot](schema::snapshot_record& stored) {
                start(self, run, record, kind_checkpoint_create, json{{"checkpoint_id", stored.id}},
                      "auto-ckpt-" + record.id + "-" + slot);
                run->finish_one();
              },
              [run](caf::error&) { run->finish_one(); });
        }
        run->finish_one();
      },
      [run](caf::error&) { run->finish_one(); });
}

void judge(policy_pointer self, std::shared_ptr<pass> run, const sandbox_record& record,
           int64_t now) {
  const auto& spec = record.spec;
  if (spec.max_lifetime_s != 0) {
    auto used =
      record.lifetime_used_ms + (record.running_since_ms != 0 ? now - record.running_since_ms : 0);
    if (used >= int64_t{spec.max_lifetime_s} * 1000) {
      self->state.samples.erase(record.id);
      return start(self, run, record, kind_sandbox_delete, json{{"reason", "max_lifetime"}},
                   "lifetime-" + record.id);
    }
  }
  if (spec.checkpoint_interval_s != 0 && record.state == sandbox_state::running
      && now - record.last_active_at_ms < int64_t{spec.checkpoint_interval_s} * 1000)
    automatic_checkpoints(self, run, record, now);
  if (spec.idle_timeout_s != 0
      && now - record.last_active_at_ms >= int64_t{spec.idle_timeout_s} * 1000) {
    return look(self, run, record);
  }
  self->state.samples.erase(record.id); // active: the next idle spell looks afresh
}

void scan(policy_pointer self, std::shared_ptr<pass> run, std::string cursor) {
  sandbox_query query;
  query.limit = self->state.options.page_size;
  query.cursor = std::move(cursor);
  self->request(self->state.registry, call_timeout(self), rg_list_atom::value, query)
    .then(
      [self, run](sandbox_page& page) {
        const auto now = self->state.clock->now_ms();
        for (const auto& record : page.items)
          if ((record.state == sandbox_state::running || record.state == sandbox_state::paused)
              && !record.worker_id.empty())
            judge(self, run, record, now);
        if (!page.next_cursor.empty())
          return scan(self, run, page.next_cursor);
        run->finish_one();
      },
      [run](caf::error&) { run->finish_one(); });
}

lifecycle_policy_actor::behavior_type policy_behavior(policy_pointer self, policy_state init) {
  auto& st = self->state;
  st.registry = std::move(init.registry);
  st.scheduler = std::move(init.scheduler);
  st.engine = std::move(init.engine);
  st.clock = init.clock;
  st.options = init.options;
  self->delayed_send(self, milliseconds(st.options.interval_ms), lp_tick_atom::value);
  return {
    [self](lp_run_atom) -> caf::result<uint64_t> {
      auto run = std::make_shared<pass>();
      run->promise = self->make_response_promise<uint64_t>();
      run->has_promise = true;
      auto promise = run->promise;
      scan(self, run, {});
      return promise;
    },
    [self](lp_tick_atom) {
      scan(self, std::make_shared<pass>(), {});
      self->delayed_send(self, milliseconds(self->state.options.interval_ms), lp_tick_atom::value);
    },
  };
}

} // namespace

lifecycle_policy_actor
spawn_lifecycle_policy(caf::actor_system& system, sandbox_registry_actor registry,
                       scheduler_actor scheduler, operation_engine_actor engine,
                       const wall_clock& clock, lifecycle_policy_options options) {
  policy_state init;
  init.registry = std::move(registry);
  init.scheduler = std::move(scheduler);
  init.engine = std::move(engine);
  init.clock = &clock;
  init.options = options;
  return system.spawn(policy_behavior, std::move(init));
}

} // namespace airlock::actors
