#include "worker/worker_actor.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <caf/actor_system.hpp>
#include <caf/blocking_actor.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>

#include "actors/errors.hpp"
#include "actors/runtime_choice.hpp"
#include "worker/rootfs/fs_util.hpp"
#include "worker/sandbox_start.hpp"
#include "worker/worker_load.hpp"

namespace airlock::worker {

namespace {

struct tracked_sandbox {
  schema::sandbox_record record;
  sandbox_actor actor; ///< invalid while creating
};

/// Where the create thread leaves a new sandbox's parts for the actor: they
/// hold the guest channel, which no message may carry.
struct created_parts_slot {
  std::mutex mutex;
  std::optional<sandbox_parts> parts;
};

struct pending_create {
  create_sandbox_request request;
  caf::typed_response_promise<sandbox_actor> promise;
  std::shared_ptr<created_parts_slot> slot;
};

} // namespace

struct worker_state {
  static inline const char* name = "worker";
  worker_context context;
  load_sample last_load; ///< the CPU reading the next load's rate starts from
  std::map<std::string, tracked_sandbox> sandboxes;
  std::map<uint64_t, pending_create> creates;
  std::map<uint64_t, caf::typed_response_promise<recover_report>> recovers;
  /// Blocking jobs in flight: what answers each when it is done.
  std::map<uint64_t, std::function<void(status&, uint64_t)>> jobs;
  uint64_t next_token = 0;
};

namespace {

using self_ptr = worker_actor::stateful_pointer<worker_state>;

status persist(self_ptr self, const schema::sandbox_record& record) {
  return self->state.context.store->put(storage::keyspace::sandboxes, record.id,
                                        schema::encode(record));
}

/// A forwarded request that timed out may still take effect: say so.
caf::error reconcile_timeout(const caf::error& err) {
  auto failure = to_status(err);
  if (failure.code == errc::timeout) {
    return make_error(errc::outcome_unknown,
                      "the sandbox did not answer in time; the change may still happen: "
                      "read the sandbox's state before retrying ("
                        + failure.message + ")");
  }
  return err;
}

void forget(self_ptr self, const std::string& id) {
  if (self->state.context.egress)
    self->state.context.egress->detach(id);
  self->state.sandboxes.erase(id);
  storage::write_batch batch;
  batch.erase(storage::keyspace::sandboxes, id);
  (void)self->state.context.store->write(batch);
}

caf::result<sandbox_actor> handle_create(self_ptr self, const create_sandbox_request& request) {
  auto& st = self->state;
  if (st.sandboxes.count(request.id) != 0)
    return make_error(errc::already_exists, "sandbox " + request.id + " exists on this worker");
  if (st.sandboxes.size() >= st.context.options.sandboxes_max) {
    return make_error(errc::resource_exhausted,
                      "this worker runs its maximum of "
                        + std::to_string(st.context.options.sandboxes_max)
                        + " sandboxes; destroy one or use another worker");
  }
  if (auto pressure = probe_memory_pressure(st.context.options.pressure);
      pressure && pressure->under)
    return make_error(errc::resource_exhausted,
                      "this host is under memory pressure (" + pressure->reason
                        + "); it takes no sandbox until it recovers: retry later or elsewhere");
  auto req = with_default_requests(request, st.context.options.default_request);
  tracked_sandbox entry;
  entry.record.id = req.id;
  // A sandbox brought back stays recorded as stopped until it runs: a crash
  // meanwhile must keep its root, not clean it up as a half-made create.
  entry.record.state =
    req.reuse_root ? schema::sandbox_state::suspended : schema::sandbox_state::creating;
  entry.record.tenant_id = req.egress.tenant_id;
  entry.record.spec.template_name = req.template_name;
  entry.record.spec.cpu_millis = req.limits.cpu_millis;
  entry.record.spec.memory_mb = req.limits.memory_mb;
  entry.record.spec.disk_mb = static_cast<uint32_t>(req.disk_mb);
  entry.record.spec.cpu_request_millis = req.limits.cpu_request_millis;
  entry.record.spec.memory_request_mb = req.memory_request_mb;
  entry.record.spec.disk_request_mb = req.disk_request_mb;
  actors::set_runtime(entry.record.spec, req.runtime);
  entry.record.worker_id = st.context.options.worker_id;
  // Recorded before anything exists, so a crash mid-create is cleaned up by recover.
  if (auto saved = persist(self, entry.record); !saved)
    return make_error(saved);
  st.sandboxes.emplace(req.id, std::move(entry));
  const uint64_t token = ++st.next_token;
  auto promise = self->make_response_promise<sandbox_actor>();
  auto slot = std::make_shared<created_parts_slot>();
  st.creates.emplace(token, pending_create{req, promise, slot});
  auto ctx = st.context;
  worker_actor me = self;
  // The slot, not the message, carries the parts; if the worker is gone by
  // then, the last reference to the slot closes the guest channel.
  self->home_system().spawn([ctx, req, me, token, slot](caf::blocking_actor*) {
    auto created = start_sandbox(ctx, req);
    status outcome;
    if (created) {
      std::lock_guard<std::mutex> lock(slot->mutex);
      slot->parts = std::move(*created);
    } else {
      outcome = created.error();
    }
    caf::anon_send(me, wk_created_atom::value, token, std::move(outcome));
  });
  return promise;
}

void on_created(self_ptr self, uint64_t token, const status& outcome) {
  auto& st = self->state;
  auto it = st.creates.find(token);
  if (it == st.creates.end())
    return;
  auto pending = std::move(it->second);
  st.creates.erase(it);
  const auto& id = pending.request.id;
  std::optional<sandbox_parts> parts;
  {
    std::lock_guard<std::mutex> lock(pending.slot->mutex);
    parts.swap(pending.slot->parts);
  }
  if (!outcome || !parts) { // the thread fills the slot before it reports success
    if (pending.request.reuse_root && outcome.code != errc::not_found)
      st.sandboxes.erase(id); // still recorded as stopped, root kept
    else
      forget(self, id);
    pending.promise.deliver(make_error(
      outcome ? make_status(errc::internal, "sandbox " + id + " lost its parts") : outcome));
    return;
  }
  auto actor = spawn_sandbox(self->home_system(), std::move(*parts), st.context.options.sandbox);
  auto& entry = st.sandboxes[id];
  entry.actor = actor;
  entry.record.state = schema::sandbox_state::running;
  if (auto saved = persist(self, entry.record); !saved) {
    // Not recorded as running: a crash now would still be cleaned up (it is
    // recorded as creating), so serve it.
  }
  // Linked: when the worker goes away its sandbox actors go too (closing their
  // guest channels); monitored: a sandbox actor that ends is forgotten.
  self->link_to(actor);
  self->monitor(actor);
  pending.promise.deliver(actor);
}

/// The actor of sandbox `id`, or why there is none to ask.
result<sandbox_actor> actor_of(self_ptr self, const std::string& id) {
  auto it = self->state.sandboxes.find(id);
  if (it == self->state.sandboxes.end())
    return make_status(errc::not_found, "no sandbox " + id + " on this worker");
  if (!it->second.actor)
    return make_status(errc::wrong_state, "sandbox " + id + " is still being created");
  return it->second.actor;
}

caf::result<bool> forward_freeze(self_ptr self, const std::string& id, bool pause) {
  auto actor = actor_of(self, id);
  if (!actor)
    return make_error(actor.error());
  auto promise = self->make_response_promise<bool>();
  auto timeout = std::chrono::milliseconds(self->state.context.options.freeze_timeout_ms);
  auto on_done = [self, id, promise, pause](bool) mutable {
    if (auto found = self->state.sandboxes.find(id); found != self->state.sandboxes.end()) {
      found->second.record.state =
        pause ? schema::sandbox_state::paused : schema::sandbox_state::running;
      (void)persist(self, found->second.record);
    }
    promise.deliver(true);
  };
  auto on_error = [promise](caf::error& err) mutable { promise.deliver(reconcile_timeout(err)); };
  if (pause)
    self->request(*actor, timeout, sbx_pause_atom::value).then(on_done, on_error);
  else
    self->request(*actor, timeout, sbx_resume_atom::value).then(on_done, on_error);
  return promise;
}

/// Runs `work` on a fresh blocking actor (own thread); answers its value
/// (`to_answer` of it) or its error.
template <class T>
caf::result<T> run_blocking_as(self_ptr self, std::function<result<uint64_t>()> work,
                               T (*to_answer)(uint64_t)) {
  auto promise = self->make_response_promise<T>();
  const uint64_t token = ++self->state.next_token;
  self->state.jobs.emplace(token, [promise, to_answer](status& outcome, uint64_t value) mutable {
    if (outcome)
      promise.deliver(to_answer(value));
    else
      promise.deliver(make_error(outcome));
  });
  worker_actor me = self;
  self->home_system().spawn([me, token, work = std::move(work)](caf::blocking_actor*) {
    auto done = work();
    caf::anon_send(me, wk_jobdone_atom::value, token, done ? status::ok() : done.error(),
                   done ? *done : uint64_t{0});
  });
  return promise;
}

caf::result<uint64_t> run_blocking_value(self_ptr self, std::function<result<uint64_t>()> work) {
  return run_blocking_as<uint64_t>(self, std::move(work), [](uint64_t value) { return value; });
}

/// The same for work without a value: answers true or its error.
caf::result<bool> run_blocking(self_ptr self, std::function<status()> work) {
  return run_blocking_as<bool>(
    self,
    [work = std::move(work)]() -> result<uint64_t> {
      auto done = work();
      if (!done)
        return done;
      return uint64_t{0};
    },
    [](uint64_t) { return true; });
}

caf::result<uint64_t> forward_checkpoint(self_ptr self, const std::string& id,
                                         const std::string& checkpoint_id, bool include_memory) {
  auto actor = actor_of(self, id);
  if (!actor && actor.code() == errc::not_found && include_memory)
    return make_error(errc::wrong_state, "sandbox " + id
                                           + " does not run on this worker (a restart ended it): "
                                             "its memory is gone; checkpoint its files only");
  if (!actor && actor.code() == errc::not_found && self->state.context.rootfs) {
    // Stopped by a restart (its root kept): nothing runs in it, so its root
    // is snapshotted as it is. A suspend cut short by the restart finishes so.
    auto rootfs = self->state.context.rootfs;
    auto store = self->state.context.store;
    return run_blocking_value(self, [rootfs, store, id, checkpoint_id]() -> result<uint64_t> {
      auto stored = store->get(storage::keyspace::sandboxes, id);
      if (!stored || !stored->has_value())
        return make_status(errc::not_found, "no sandbox " + id + " on this worker");
      return rootfs->checkpoint(id, checkpoint_id);
    });
  }
  if (!actor)
    return make_error(actor.error());
  auto promise = self->make_response_promise<uint64_t>();
  // A freeze, a snapshot and a thaw. The rootfs driver checks the id.
  auto timeout = std::chrono::milliseconds(2 * self->state.context.options.freeze_timeout_ms
                                           + self->state.context.options.destroy_timeout_ms);
  self->request(*actor, timeout, sbx_ckpt_atom::value, checkpoint_id, include_memory)
    .then([promise](uint64_t size) mutable { promise.deliver(size); },
          [promise](caf::error& err) mutable { promise.deliver(reconcile_timeout(err)); });
  return promise;
}

/// Destroys a sandbox or, with keep_root, stops it keeping its root and its
/// record (as stopped: suspended) for a create with reuse_root.
caf::result<bool> end_sandbox(self_ptr self, const std::string& id, bool keep_root) {
  auto& ctx = self->state.context;
  auto it = self->state.sandboxes.find(id);
  if (it == self->state.sandboxes.end()) {
    if (keep_root || !ctx.rootfs)
      return true;
    // Maybe stopped by an earlier run: its kept root and record go.
    auto rootfs = ctx.rootfs;
    auto store = ctx.store;
    return run_blocking(self, [rootfs, store, id] {
      if (auto gone = rootfs->delete_sandbox(id); !gone)
        return gone;
      storage::write_batch batch;
      batch.erase(storage::keyspace::sandboxes, id);
      return store->write(batch);
    });
  }
  if (!it->second.actor)
    return make_error(errc::wrong_state, "sandbox " + id + " is still being created; retry");
  auto promise = self->make_response_promise<bool>();
  auto timeout = std::chrono::milliseconds(ctx.options.destroy_timeout_ms);
  if (!keep_root) {
    it->second.record.state = schema::sandbox_state::destroying;
    (void)persist(self, it->second.record);
  }
  // No new connection leaves a sandbox that is going away.
  if (ctx.egress)
    ctx.egress->detach(id);
  auto on_done = [self, id, promise, keep_root](bool) mutable {
    auto found = self->state.sandboxes.find(id);
    if (keep_root && found != self->state.sandboxes.end()) {
      found->second.record.state = schema::sandbox_state::suspended;
      (void)persist(self, found->second.record);
      self->state.sandboxes.erase(found);
    } else {
      forget(self, id);
    }
    promise.deliver(true);
  };
  auto on_error = [promise](caf::error& err) mutable { promise.deliver(reconcile_timeout(err)); };
  if (keep_root)
    self->request(it->second.actor, timeout, sbx_release_atom::value).then(on_done, on_error);
  else
    self->request(it->second.actor, timeout, sbx_destroy_atom::value).then(on_done, on_error);
  return promise;
}

/// The blocking part of recover (see worker_actor.hpp).
recover_report recover_blocking(const worker_context& ctx) {
  recover_report report;
  std::set<std::string> ids;
  if (auto adopted = ctx.runtime->adopt(); adopted) {
    ids.insert(adopted->adopted.begin(), adopted->adopted.end());
    for (const auto& id : adopted->cleaned)
      ids.insert(id);
    for (const auto& failure : adopted->failures)
      report.failures.push_back("runtime adopt: " + failure.message);
  } else {
    report.failures.push_back("runtime adopt: " + adopted.error().message);
  }
  // VMs a crash left running are ended: their sandboxes come back from their
  // roots as a namespace sandbox whose init died does.
  if (ctx.microvm) {
    if (auto vms = ctx.microvm->adopt(); vms) {
      ids.insert(vms->cleaned.begin(), vms->cleaned.end());
      for (const auto& failure : vms->failures)
        report.failures.push_back("microvm adopt: " + failure.message);
    } else {
      report.failures.push_back("microvm adopt: " + vms.error().message);
    }
  }
  // Sandboxes that ran (or were stopped) keep their root, recorded as
  // stopped; half-made creates and destroys go.
  std::map<std::string, schema::sandbox_record> keep;
  (void)ctx.store->scan(storage::keyspace::sandboxes, "", "",
                        [&ids, &keep](std::string_view key, std::string_view bytes) {
                          ids.emplace(key);
                          auto record = schema::decode_sandbox(bytes);
                          using schema::sandbox_state;
                          if (record
                              && (record->state == sandbox_state::running
                                  || record->state == sandbox_state::paused
                                  || record->state == sandbox_state::suspended))
                            keep.emplace(key, std::move(*record));
                          return true;
                        });
  if (auto on_disk = ctx.rootfs->list_sandboxes(); on_disk)
    ids.insert(on_disk->begin(), on_disk->end());
  for (const auto& id : ids) {
    auto gone = ctx.runtime->destroy(id);
    if (auto kept = keep.find(id); gone && kept != keep.end() && ctx.rootfs->sandbox_path(id)) {
      kept->second.state = schema::sandbox_state::suspended;
      if (auto saved =
            ctx.store->put(storage::keyspace::sandboxes, id, schema::encode(kept->second));
          saved) {
        report.kept.push_back(id);
        continue;
      }
    }
    if (gone)
      gone = ctx.rootfs->delete_sandbox(id);
    if (!gone) {
      report.failures.push_back(id + ": " + gone.message);
      continue;
    }
    storage::write_batch batch;
    batch.erase(storage::keyspace::sandboxes, id);
    if (auto erased = ctx.store->write(batch); !erased) {
      report.failures.push_back(id + ": " + erased.message);
      continue;
    }
    report.cleaned.push_back(id);
  }
  return report;
}

worker_actor::behavior_type worker_impl(self_ptr self, worker_context context) {
  self->state.context = std::move(context);
  self->set_down_handler([self](caf::down_msg& down) {
    for (auto it = self->state.sandboxes.begin(); it != self->state.sandboxes.end(); ++it) {
      if (it->second.actor && it->second.actor.address() == down.source) {
        // Destroyed through the sandbox actor directly, or it failed: forget it.
        forget(self, it->first);
        return;
      }
    }
  });
  return {
    [self](wk_create_atom, const create_sandbox_request& req) { return handle_create(self, req); },
    [self](wk_get_atom, const std::string& id) -> caf::result<sandbox_actor> {
      auto it = self->state.sandboxes.find(id);
      if (it == self->state.sandboxes.end() || !it->second.actor)
        return make_error(errc::not_found, "no running sandbox " + id + " on this worker");
      return it->second.actor;
    },
    [self](wk_pause_atom, const std::string& id) { return forward_freeze(self, id, true); },
    [self](wk_resume_atom, const std::string& id) { return forward_freeze(self, id, false); },
    [self](wk_destroy_atom, const std::string& id) { return end_sandbox(self, id, false); },
    [self](wk_release_atom, const std::string& id) { return end_sandbox(self, id, true); },
    [self](wk_list_atom) {
      std::vector<sandbox_entry> out;
      for (const auto& [id, entry] : self->state.sandboxes)
        out.push_back(sandbox_entry{id, entry.record.state, entry.actor});
      return out;
    },
    [self](wk_recover_atom) -> caf::result<recover_report> {
      if (!self->state.sandboxes.empty()) {
        return make_error(errc::wrong_state,
                          "recover cleans up an earlier run; this worker already runs sandboxes "
                          "(destroy them instead)");
      }
      auto promise = self->make_response_promise<recover_report>();
      const uint64_t token = ++self->state.next_token;
      self->state.recovers.emplace(token, promise);
      auto ctx = self->state.context;
      worker_actor me = self;
      self->home_system().spawn([ctx, me, token](caf::blocking_actor*) {
        caf::anon_send(me, wk_recovered_atom::value, token, recover_blocking(ctx));
      });
      return promise;
    },
    [self](wk_ckpt_atom, const std::string& id, const std::string& checkpoint_id,
           bool include_memory) {
      return forward_checkpoint(self, id, checkpoint_id, include_memory);
    },
    [self](wk_ckptdel_atom, const std::string& checkpoint_id) -> caf::result<bool> {
      auto rootfs = self->state.context.rootfs;
      if (!rootfs)
        return make_error(errc::unavailable, "this worker has no rootfs driver: no checkpoints");
      // A VM's checkpoint has a machine snapshot beside its root's: it goes first.
      auto machines = self->state.context.microvm;
      return run_blocking(self, [rootfs, machines, checkpoint_id] {
        if (machines)
          if (auto gone = machines->delete_machine(checkpoint_id); !gone)
            return gone;
        return rootfs->delete_checkpoint(checkpoint_id);
      });
    },
    [self](wk_claim_atom, const std::string& id, const std::string& tenant, uint32_t cpu_millis,
           uint32_t memory_mb) -> caf::result<bool> {
      auto it = self->state.sandboxes.find(id);
      if (it == self->state.sandboxes.end() || !it->second.actor)
        return make_error(errc::not_found, "no running sandbox " + id + " on this worker");
      auto& record = it->second.record;
      record.tenant_id = tenant;
      record.spec.cpu_millis = cpu_millis;
      record.spec.memory_mb = memory_mb;
      if (auto saved = persist(self, record); !saved)
        return make_error(saved);
      auto runtime = actors::runtime_of(record.spec) == actors::microvm_runtime_name
                       ? self->state.context.microvm
                       : self->state.context.runtime;
      if (!runtime)
        return make_error(errc::unavailable, "this worker runs no microvm sandboxes");
      return run_blocking(self, [runtime, id, cpu_millis, memory_mb] {
        return runtime->set_limits(id, cpu_millis, memory_mb);
      });
    },
    [self](wk_ckpts_atom) -> caf::result<std::vector<std::string>> {
      if (!self->state.context.rootfs)
        return std::vector<std::string>{};
      auto held = self->state.context.rootfs->list_checkpoints();
      if (!held)
        return make_error(held.error());
      return std::move(*held);
    },
    [self](wk_jobdone_atom, uint64_t token, status& outcome, uint64_t value) {
      auto it = self->state.jobs.find(token);
      if (it == self->state.jobs.end())
        return;
      auto answer = std::move(it->second);
      self->state.jobs.erase(it);
      answer(outcome, value);
    },
    [self](wk_recovered_atom, uint64_t token, recover_report& report) {
      auto it = self->state.recovers.find(token);
      if (it == self->state.recovers.end())
        return;
      it->second.deliver(std::move(report));
      self->state.recovers.erase(it);
    },
    [self](wk_load_atom) {
      std::vector<const schema::sandbox_record*> records;
      records.reserve(self->state.sandboxes.size());
      for (const auto& [id, entry] : self->state.sandboxes)
        records.push_back(&entry.record);
      return measure_load(self->state.context, records, self->state.last_load);
    },
    [self](wk_created_atom, uint64_t token, const status& outcome) {
      on_created(self, token, outcome);
    },
  };
}

} // namespace

result<std::shared_ptr<const unique_fd>> open_guest_binary(const std::string& path) {
  auto fd = open_fd(path, O_RDONLY);
  if (!fd)
    return make_status(fd.error().code, "cannot open the guest agent " + path + ": "
                                          + fd.error().message
                                          + " (build airlock-guest or set its path)");
  struct stat st {};
  if (::fstat(fd->get(), &st) != 0 || !S_ISREG(st.st_mode) || (st.st_mode & S_IXOTH) == 0)
    return make_status(errc::invalid_argument,
                       "the guest agent " + path
                         + " must be a regular file that everyone may execute (mode o+x): "
                           "sandboxes run it under their own ids");
  return std::make_shared<const unique_fd>(std::move(*fd));
}

worker_actor spawn_worker(caf::actor_system& system, worker_context context) {
  return system.spawn(worker_impl, std::move(context));
}

} // namespace airlock::worker
