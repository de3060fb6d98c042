#include "actors/pool_actor.hpp"

#include <caf/actor_clock.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <algorithm>
#include <chrono>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "actors/errors.hpp"
#include "actors/runtime_choice.hpp"
#include "actors/sandbox_procedures.hpp"
#include "actors/template_records.hpp"
#include "metrics/metrics.hpp"

namespace airlock::actors {

using schema::sandbox_record;
using schema::sandbox_state;
using schema::template_record;

bool member_fits(const sandbox_record& member, const sandbox_record& wanted) {
  const auto& have = member.spec;
  const auto& want = wanted.spec;
  auto same_or_default = [](uint32_t wanted_value, uint32_t member_value) {
    return wanted_value == 0 || wanted_value == member_value;
  };
  // A VM's memory and vCPUs are fixed at boot: a claim cannot change them.
  const auto runtime = runtime_of(have);
  const bool vm_shape_fits =
    runtime != microvm_runtime_name
    || (have.memory_mb == want.memory_mb
        && schema::whole_cpus(have.cpu_millis) == schema::whole_cpus(want.cpu_millis));
  return have.template_name == want.template_name && have.template_version == want.template_version
         && runtime == runtime_of(want) && vm_shape_fits && want.from_checkpoint.empty()
         && have.disk_mb == want.disk_mb
         && same_or_default(want.cpu_request_millis, have.cpu_request_millis)
         && same_or_default(want.memory_request_mb, have.memory_request_mb)
         && same_or_default(want.disk_request_mb, have.disk_request_mb)
         && (want.template_worker_id.empty() || want.template_worker_id == member.worker_id);
}

namespace {

using std::chrono::milliseconds;

struct pool_member {
  sandbox_record record; ///< as last read from the registry
  bool ready = false;    ///< running: a create can claim it
  bool retiring = false; ///< its delete has been started
  int64_t started_ms = 0;
};

struct pool_entry {
  template_record record; ///< the template: its versions and pool settings
  uint64_t hits = 0;
  uint64_t misses = 0;
  /// Workers whose last member create failed, and when to try again.
  std::map<std::string, int64_t> retry_at_ms;
};

struct pool_state {
  // Not an aggregate: CAF would otherwise try to build it from the actor pointer.
  pool_state() = default;
  static inline const char* name = "pool_actor";
  pool_actor_deps deps;
  pool_actor_options options;
  std::map<std::string, pool_entry> pools;    ///< by template name
  std::map<std::string, pool_member> members; ///< by sandbox id
  bool loaded = false;
  bool passing = false;
  bool again = false;                        ///< a pass was asked for while one ran
  caf::actor_clock::time_point last_claim{}; ///< actor clock
};

using pool_pointer = pool_actor::stateful_pointer<pool_state>;

milliseconds call_timeout(pool_pointer self) {
  return milliseconds(self->state.options.call_timeout_ms);
}

int64_t now_ms(pool_pointer self) { return self->state.deps.clock->now_ms(); }

std::string pool_of(const sandbox_record& record) {
  auto found = record.spec.metadata.find(pool_metadata_key);
  return found == record.spec.metadata.end() ? std::string{} : found->second;
}

/// A member that a pool still wants: its pool has a size and it is of the
/// pool's current version.
bool wanted_member(const pool_state& st, const pool_member& member) {
  auto pool = st.pools.find(pool_of(member.record));
  return pool != st.pools.end() && pool->second.record.pool.size != 0
         && member.record.spec.template_version == pool->second.record.current_version;
}

pool_view view_of(const pool_state& st, const std::string& name) {
  pool_view view;
  auto pool = st.pools.find(name);
  if (pool == st.pools.end())
    return view;
  view.settings = pool->second.record.pool;
  view.hits_total = pool->second.hits;
  view.misses_total = pool->second.misses;
  for (const auto& [id, member] : st.members) {
    if (member.retiring || pool_of(member.record) != name || !wanted_member(st, member))
      continue;
    ++(member.ready ? view.ready : view.creating);
  }
  return view;
}

void publish_figures(pool_pointer self) {
  auto* figures = self->state.deps.metrics;
  if (figures == nullptr)
    return;
  for (const auto& [name, pool] : self->state.pools) {
    auto view = view_of(self->state, name);
    figures->gauge_set("airlock_pool_size", {{"template", name}}, view.settings.size);
    figures->gauge_set("airlock_pool_ready", {{"template", name}}, view.ready);
  }
}

void describe_figures(metrics::metrics_registry& figures) {
  figures.describe("airlock_pool_size", "Warm pool members wanted per worker, by template.",
                   "gauge");
  figures.describe("airlock_pool_ready", "Warm pool members ready to be claimed, by template.",
                   "gauge");
  figures.describe("airlock_pool_hits_total", "Creates that claimed a warm pool member.",
                   "counter");
  figures.describe("airlock_pool_misses_total",
                   "Creates of a pooled template that found no member to claim.", "counter");
  figures.describe("airlock_pool_refill_seconds",
                   "Time from a pool member's create to its being ready.", "histogram",
                   {0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60});
}

/// Starts `kind` on member `id` as the pool's own operation.
void start_operation(pool_pointer self, const char* kind, const std::string& id,
                     std::function<void(bool)> done) {
  operation_request request{kind, id, pool_tenant, "{}", std::string("pool-") + kind + "-" + id, 0};
  self->request(self->state.deps.engine, call_timeout(self), op_create_atom::value, request)
    .then([done](create_reply&) { done(true); }, [done](caf::error&) { done(false); });
}

void retire(pool_pointer self, pool_member& member) {
  member.retiring = true;
  start_operation(self, kind_sandbox_delete, member.record.id, [](bool) {});
}

/// Creates one member of `pool` on `worker_id`.
void start_member(pool_pointer self, pool_entry& pool, const std::string& worker_id) {
  const auto now = now_ms(self);
  sandbox_record record;
  record.id = make_id("sb_", now, *self->state.deps.entropy);
  record.tenant_id = pool_tenant;
  record.state = sandbox_state::creating;
  record.created_at_ms = now;
  record.last_active_at_ms = now;
  auto& spec = record.spec;
  // A member runs in the version's default runtime: a pool of a microvm
  // template holds VMs (clones of their shape's base machine).
  if (auto chosen = choose_template_version(pool.record, 0, spec, true); !chosen)
    return;
  spec.template_worker_id = worker_id; // a member is made where it is counted
  spec.cpu_millis = pool.record.pool.cpu_millis;
  spec.memory_mb = pool.record.pool.memory_mb;
  spec.disk_mb = pool.record.pool.disk_mb;
  spec.idle_timeout_s = 0;
  spec.on_idle = schema::idle_action::delete_sandbox;
  spec.metadata[pool_metadata_key] = pool.record.name;
  pool_member member;
  member.record = record;
  member.started_ms = now;
  self->state.members.emplace(record.id, member);
  const std::string name = pool.record.name;
  auto failed = [self, name, worker_id, id = record.id] {
    self->state.members.erase(id);
    if (auto found = self->state.pools.find(name); found != self->state.pools.end())
      found->second.retry_at_ms[worker_id] =
        now_ms(self) + self->state.options.retry_after_failure_ms;
  };
  self->request(self->state.deps.registry, call_timeout(self), rg_create_atom::value, record)
    .then(
      [self, failed](sandbox_record& stored) {
        start_operation(self, kind_sandbox_create, stored.id, [failed](bool started) {
          if (!started)
            failed();
        });
      },
      [failed](caf::error&) { failed(); });
}

/// The registry's answer about member `id`.
void on_member_read(pool_pointer self, const std::string& id, result<sandbox_record> read) {
  auto& st = self->state;
  auto it = st.members.find(id);
  if (it == st.members.end())
    return; // claimed meanwhile
  auto& member = it->second;
  if (!read) {
    if (read.code() == errc::not_found && member.record.state != sandbox_state::creating)
      st.members.erase(it);
    return;
  }
  member.record = std::move(*read);
  const auto state = member.record.state;
  if (member.record.tenant_id != pool_tenant) { // claimed
    st.members.erase(it);
    return;
  }
  if (state == sandbox_state::destroyed) {
    if (!member.ready && !member.retiring) // its create failed: not again at once
      if (auto pool = st.pools.find(pool_of(member.record)); pool != st.pools.end())
        pool->second.retry_at_ms[member.record.worker_id] =
          now_ms(self) + st.options.retry_after_failure_ms;
    st.members.erase(it);
    return;
  }
  if (state == sandbox_state::running) {
    if (!member.ready && st.deps.metrics != nullptr)
      st.deps.metrics->histogram_observe(
        "airlock_pool_refill_seconds", {{"template", pool_of(member.record)}},
        static_cast<double>(now_ms(self) - member.started_ms) / 1000.0);
    member.ready = true;
    return;
  }
  member.ready = false;
  if (state != sandbox_state::creating && !member.retiring) // error, paused...: replace it
    retire(self, member);
}

/// Deletes members no pool wants and starts creates where a worker is short.
void rebalance(pool_pointer self, const std::set<std::string>& ready_workers) {
  auto& st = self->state;
  // Members per (pool, worker), of the current version, not retiring.
  std::map<std::pair<std::string, std::string>, std::vector<std::string>> counted;
  size_t creating = 0;
  for (auto& [id, member] : st.members) {
    if (member.retiring)
      continue;
    if (!member.ready) {
      ++creating;
      continue;
    }
    if (!wanted_member(st, member)) {
      retire(self, member);
      continue;
    }
    counted[{pool_of(member.record), member.record.worker_id}].push_back(id);
  }
  for (auto& [id, member] : st.members)
    if (!member.retiring && !member.ready && wanted_member(st, member))
      counted[{pool_of(member.record), member.record.spec.template_worker_id}].push_back(id);
  const auto now = now_ms(self);
  const bool claims_recent =
    self->clock().now() - st.last_claim < milliseconds(st.options.refill_quiet_ms);
  for (auto& [name, pool] : st.pools) {
    const auto size = pool.record.pool.size;
    const auto* version = pool.record.find(pool.record.current_version);
    if (version == nullptr)
      continue;
    std::vector<std::string> workers;
    if (!version->worker_id.empty()) {
      if (ready_workers.count(version->worker_id) != 0)
        workers.push_back(version->worker_id);
    } else {
      workers.assign(ready_workers.begin(), ready_workers.end());
    }
    for (const auto& worker : workers) {
      auto& have = counted[{name, worker}];
      while (have.size() > size) { // the pool shrank: ready ones go
        auto& member = st.members.at(have.back());
        if (member.ready)
          retire(self, member);
        have.pop_back();
      }
      auto retry = pool.retry_at_ms.find(worker);
      if (retry != pool.retry_at_ms.end() && retry->second > now)
        continue;
      // During a burst of claims a refill would take CPU from the creates it
      // serves: it waits for a quiet moment unless half the pool is gone.
      const auto ready_here = std::count_if(
        have.begin(), have.end(), [&st](const std::string& id) { return st.members.at(id).ready; });
      if (claims_recent && static_cast<uint64_t>(ready_here) * 2 >= size)
        continue;
      for (auto missing = size - have.size(); missing > 0 && creating < st.options.refills_max;
           --missing, ++creating)
        start_member(self, pool, worker);
    }
  }
  publish_figures(self);
}

void run_pass(pool_pointer self);

void end_pass(pool_pointer self) {
  self->state.passing = false;
  if (self->state.again) {
    self->state.again = false;
    run_pass(self);
  }
}

/// Reads every member's record, then rebalances.
void read_members(pool_pointer self, std::set<std::string> ready_workers) {
  struct pending_reads {
    size_t left = 1;
  };
  auto reads = std::make_shared<pending_reads>();
  auto finish_one = [self, reads, ready_workers] {
    if (--reads->left != 0)
      return;
    rebalance(self, ready_workers);
    end_pass(self);
  };
  std::vector<std::string> ids;
  for (const auto& [id, member] : self->state.members)
    ids.push_back(id);
  for (const auto& id : ids) {
    ++reads->left;
    self
      ->request(self->state.deps.registry, call_timeout(self), rg_get_atom::value, id,
                std::string{})
      .then(
        [self, id, finish_one](sandbox_record& record) {
          on_member_read(self, id, std::move(record));
          finish_one();
        },
        [self, id, finish_one](caf::error& error) {
          on_member_read(self, id, to_status(error));
          finish_one();
        });
  }
  finish_one();
}

void run_pass(pool_pointer self) {
  auto& st = self->state;
  if (!st.loaded)
    return;
  if (st.passing) {
    st.again = true;
    return;
  }
  st.passing = true;
  auto failed = [self](caf::error&) { end_pass(self); };
  self->request(st.deps.registry, call_timeout(self), rg_tlist_atom::value, std::string{})
    .then(
      [self, failed](std::vector<template_record>& templates) {
        auto& pools = self->state.pools;
        std::set<std::string> present;
        for (auto& record : templates) {
          present.insert(record.name);
          if (record.pool.size != 0 || pools.count(record.name) != 0)
            pools[record.name].record = std::move(record);
        }
        for (auto it = pools.begin(); it != pools.end();)
          it = present.count(it->first) == 0 ? pools.erase(it) : std::next(it);
        self->request(self->state.deps.scheduler, call_timeout(self), sc_workers_atom::value)
          .then(
            [self](std::vector<schema::worker_view>& fleet) {
              std::set<std::string> ready;
              for (const auto& worker : fleet)
                if (worker.state == "ready")
                  ready.insert(worker.registration.id);
              read_members(self, std::move(ready));
            },
            failed);
      },
      failed);
}

/// Rebuilds the members from the registry: every record of pool_tenant not
/// yet destroyed, page by page; then the first pass.
void load_members(pool_pointer self, std::string cursor) {
  sandbox_query query;
  query.tenant_id = pool_tenant;
  query.limit = 1000;
  query.cursor = std::move(cursor);
  self->request(self->state.deps.registry, call_timeout(self), rg_list_atom::value, query)
    .then(
      [self](sandbox_page& page) {
        for (auto& record : page.items) {
          if (record.state == sandbox_state::destroyed)
            continue;
          pool_member member;
          member.ready = record.state == sandbox_state::running;
          member.started_ms = now_ms(self);
          member.record = std::move(record);
          auto id = member.record.id;
          self->state.members.emplace(std::move(id), std::move(member));
        }
        if (!page.next_cursor.empty())
          return load_members(self, page.next_cursor);
        self->state.loaded = true;
        run_pass(self);
      },
      [self](caf::error&) { self->state.members.clear(); }); // the next tick tries again
}

pool_actor::behavior_type pool_behavior(pool_pointer self, pool_actor_deps deps,
                                        pool_actor_options options) {
  self->state.deps = std::move(deps);
  self->state.options = options;
  if (self->state.deps.metrics != nullptr)
    describe_figures(*self->state.deps.metrics);
  load_members(self, {});
  self->delayed_send(self, milliseconds(options.tick_ms), pl_tick_atom::value);
  return {
    [self](pl_set_atom, const std::string& name, const std::string& tenant,
           const schema::pool_settings& settings) -> caf::result<pool_view> {
      auto promise = self->make_response_promise<pool_view>();
      self
        ->request(self->state.deps.registry, call_timeout(self), rg_tpool_atom::value, name, tenant,
                  settings)
        .then(
          [self, promise, name](template_record& record) mutable {
            self->state.pools[name].record = std::move(record);
            promise.deliver(view_of(self->state, name));
            run_pass(self);
          },
          [promise](caf::error& error) mutable { promise.deliver(std::move(error)); });
      return promise;
    },
    [self](pl_get_atom, const std::string& name,
           const std::string& tenant) -> caf::result<pool_view> {
      auto promise = self->make_response_promise<pool_view>();
      self
        ->request(self->state.deps.registry, call_timeout(self), rg_tget_atom::value, name, tenant)
        .then(
          [self, promise, name](template_record& record) mutable {
            auto view = view_of(self->state, name);
            view.settings = record.pool;
            promise.deliver(view);
          },
          [promise](caf::error& error) mutable { promise.deliver(std::move(error)); });
      return promise;
    },
    [self](pl_all_atom) -> std::map<std::string, pool_view> {
      std::map<std::string, pool_view> out;
      for (const auto& [name, pool] : self->state.pools)
        out.emplace(name, view_of(self->state, name));
      return out;
    },
    [self](pl_claim_atom, const sandbox_record& wanted) -> caf::result<sandbox_record> {
      auto& st = self->state;
      auto pool = st.pools.find(wanted.spec.template_name);
      if (pool == st.pools.end() || pool->second.record.pool.size == 0)
        return make_error(errc::not_found,
                          "template " + wanted.spec.template_name + " has no warm pool");
      for (auto it = st.members.begin(); it != st.members.end(); ++it) {
        const auto& member = it->second;
        if (!member.ready || member.retiring || pool_of(member.record) != pool->first
            || !member_fits(member.record, wanted))
          continue;
        auto claimed = member.record;
        st.members.erase(it);
        ++pool->second.hits;
        if (st.deps.metrics != nullptr)
          st.deps.metrics->counter_add("airlock_pool_hits_total", {{"template", pool->first}});
        st.last_claim = self->clock().now();
        run_pass(self); // refill now (or once claims pause), not at the next tick
        return claimed;
      }
      ++pool->second.misses;
      if (st.deps.metrics != nullptr)
        st.deps.metrics->counter_add("airlock_pool_misses_total", {{"template", pool->first}});
      return make_error(errc::not_found, "no warm pool member of " + pool->first + " fits");
    },
    [self](pl_tick_atom) {
      if (!self->state.loaded)
        load_members(self, {});
      else
        run_pass(self);
      self->delayed_send(self, milliseconds(self->state.options.tick_ms), pl_tick_atom::value);
    },
  };
}

} // namespace

pool_actor spawn_pool_actor(caf::actor_system& system, pool_actor_deps deps,
                            pool_actor_options options) {
  return system.spawn(pool_behavior, std::move(deps), options);
}

} // namespace airlock::actors
