#include "worker/node_actor.hpp"

#include <caf/blocking_actor.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <charconv>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <vector>

#include "actors/errors.hpp"
#include "worker/node_state.hpp"
#include "worker/rootfs/fs_util.hpp"

namespace airlock::worker::node_detail {

namespace {

std::chrono::milliseconds ms(uint64_t value) { return std::chrono::milliseconds(value); }

// ---- lifecycle -------------------------------------------------------------

void start_destroy(self_ptr self, const std::string& id, std::vector<node_sandbox_promise> waiters);

void finish_create(self_ptr self, const std::string& id, const status& outcome) {
  auto& st = self->state;
  auto it = st.sandboxes.find(id);
  if (it == st.sandboxes.end())
    return;
  auto creates = std::move(it->second.create_waiters);
  auto destroys = std::move(it->second.destroy_waiters);
  auto after = std::move(it->second.after_create);
  st.waiting_creates -= std::min(st.waiting_creates, creates.size());
  if (!outcome) {
    st.sandboxes.erase(it);
    for (auto& waiter : creates)
      waiter.deliver(make_error(outcome));
    for (auto& waiter : destroys) // nothing was left behind
      waiter.deliver(node_sandbox{id, sandbox_state::destroyed});
  } else {
    it->second.state = sandbox_state::running;
    for (auto& waiter : creates)
      waiter.deliver(node_sandbox{id, sandbox_state::running});
    if (!destroys.empty())
      start_destroy(self, id, std::move(destroys));
  }
  for (auto& then : after)
    then();
}

void resolve_user(self_ptr self, const sandbox_actor& box, const std::string& user,
                  std::function<void(result<schema::process_user>)> then);

/// The template's start_cmd, started in the background (as the template's
/// user, in its workdir) once the sandbox runs; the create finishes once it
/// started.
void run_start_cmd(self_ptr self, const std::string& id, const sandbox_actor& box) {
  auto defaults = defaults_of(self, id);
  if (defaults.start_cmd.empty()) {
    finish_create(self, id, status::ok());
    return;
  }
  actors::exec_spec spec;
  spec.cmd = defaults.start_cmd;
  spec.cwd =
    defaults.workdir.empty() ? "/" : defaults.workdir; // not the user's home: Docker's rule
  resolve_user(
    self, box, defaults.user, [self, id, box, spec](result<schema::process_user> user) mutable {
      if (!user) { // a User the image names but its passwd lacks
        finish_create(self, id, status::ok());
        return;
      }
      auto resolved = resolve_exec(self, id, std::move(spec), *user);
      self->request(box, ms(opts(self).call_timeout_ms), sbx_exec_atom::value, std::move(resolved))
        .then([self, id](const std::string&) { finish_create(self, id, status::ok()); },
              // A program that cannot start is a failed process in
              // the list (resolve_exec); an error here means the
              // guest is gone, which the sandbox's state reports.
              [self, id](caf::error&) { finish_create(self, id, status::ok()); });
    });
}

/// The template is ready (or not): create the sandbox on the worker.
void continue_create(self_ptr self, const std::string& id, const status& ready) {
  auto it = self->state.sandboxes.find(id);
  if (it == self->state.sandboxes.end())
    return;
  if (!ready) {
    finish_create(self, id, ready);
    return;
  }
  auto req = to_create_request(it->second.record);
  req.reuse_root = it->second.reuse_root;
  // A VM restored from its memory still runs the start_cmd it ran before,
  // and a new VM is a clone of its shape's base, which started it
  // (sandbox_start.cpp); only a VM booted again after a restart starts it.
  const bool resumed = req.runtime == "microvm" && !req.reuse_root;
  self
    ->request(self->state.context.worker, ms(opts(self).create_timeout_ms), wk_create_atom::value,
              req)
    .then(
      [self, id, resumed](const sandbox_actor& box) {
        if (resumed)
          finish_create(self, id, status::ok());
        else
          run_start_cmd(self, id, box);
      },
      [self, id, name = req.template_name](caf::error& err) {
        auto failure = to_status(err);
        if (failure.code == errc::not_found) // the template went away since
          self->state.ready_templates.erase(name);
        finish_create(self, id, failure);
      });
}

caf::result<node_sandbox> handle_create(self_ptr self, const schema::sandbox_record& record,
                                        bool reuse_root) {
  auto& st = self->state;
  if (record.id.empty())
    return make_error(errc::invalid_argument, "a sandbox record needs an id");
  if (record.spec.template_name.empty())
    return make_error(errc::invalid_argument, "sandbox " + record.id + " names no template");
  if (auto it = st.sandboxes.find(record.id); it != st.sandboxes.end()) {
    if (it->second.record.tenant_id != record.tenant_id)
      return make_error(errc::already_exists,
                        "sandbox " + record.id + " exists on this worker for another tenant");
    if (it->second.state != sandbox_state::creating)
      return node_sandbox{record.id, it->second.state};
    auto promise = self->make_response_promise<node_sandbox>();
    it->second.create_waiters.push_back(promise); // a repeat joins the create under way
    ++st.waiting_creates;
    return promise;
  }
  if (st.waiting_creates >= opts(self).waiting_creates_max)
    return make_error(errc::resource_exhausted, "too many creates wait on this worker; retry");
  auto promise = self->make_response_promise<node_sandbox>();
  tracked_sandbox entry;
  entry.record = record;
  entry.reuse_root = reuse_root;
  entry.create_waiters.push_back(promise);
  ++st.waiting_creates;
  st.sandboxes.emplace(record.id, std::move(entry));
  const std::string id = record.id;
  ensure_template(self, worker_template_of(record.spec),
                  [self, id](const status& ready) { continue_create(self, id, ready); });
  return promise;
}

void start_destroy(self_ptr self, const std::string& id,
                   std::vector<node_sandbox_promise> waiters) {
  self
    ->request(self->state.context.worker, ms(opts(self).destroy_timeout_ms), wk_destroy_atom::value,
              id)
    .then(
      [self, id, waiters](bool) mutable {
        self->state.sandboxes.erase(id);
        for (auto& waiter : waiters)
          waiter.deliver(node_sandbox{id, sandbox_state::destroyed});
      },
      [waiters](caf::error& err) mutable {
        for (auto& waiter : waiters)
          waiter.deliver(err);
      });
}

caf::result<node_sandbox> handle_destroy(self_ptr self, const std::string& id) {
  auto promise = self->make_response_promise<node_sandbox>();
  auto it = self->state.sandboxes.find(id);
  if (it != self->state.sandboxes.end() && it->second.state == sandbox_state::creating) {
    it->second.destroy_waiters.push_back(promise); // runs once the create has ended
    return promise;
  }
  start_destroy(self, id, {promise});
  return promise;
}

caf::result<node_sandbox> handle_freeze(self_ptr self, const std::string& id, bool pause) {
  auto promise = self->make_response_promise<node_sandbox>();
  auto on_done = [self, id, promise, pause](bool) mutable {
    const auto state = pause ? sandbox_state::paused : sandbox_state::running;
    if (auto it = self->state.sandboxes.find(id); it != self->state.sandboxes.end())
      it->second.state = state;
    promise.deliver(node_sandbox{id, state});
  };
  auto on_error = [promise](caf::error& err) mutable { promise.deliver(err); };
  const auto timeout = ms(opts(self).call_timeout_ms);
  if (pause)
    self->request(self->state.context.worker, timeout, wk_pause_atom::value, id)
      .then(on_done, on_error);
  else
    self->request(self->state.context.worker, timeout, wk_resume_atom::value, id)
      .then(on_done, on_error);
  return promise;
}

/// Asks the worker and passes its answer (or error) on.
template <class Reply, class... Ts>
caf::result<Reply> forward_to_worker(self_ptr self, Ts&&... xs) {
  auto promise = self->make_response_promise<Reply>();
  self->request(self->state.context.worker, ms(opts(self).call_timeout_ms), std::forward<Ts>(xs)...)
    .then([promise](Reply& reply) mutable { promise.deliver(std::move(reply)); },
          [promise](caf::error& err) mutable { promise.deliver(std::move(err)); });
  return promise;
}

caf::result<std::vector<node_sandbox>> handle_list(self_ptr self) {
  auto promise = self->make_response_promise<std::vector<node_sandbox>>();
  self->request(self->state.context.worker, ms(opts(self).call_timeout_ms), wk_list_atom::value)
    .then(
      [self, promise](const std::vector<sandbox_entry>& entries) mutable {
        std::vector<node_sandbox> out;
        std::set<std::string> seen;
        for (const auto& entry : entries) {
          out.push_back(node_sandbox{entry.id, entry.state});
          seen.insert(entry.id);
        }
        // Creates still waiting for their template are not on the worker yet.
        for (const auto& [id, tracked] : self->state.sandboxes)
          if (seen.count(id) == 0)
            out.push_back(node_sandbox{id, tracked.state});
        promise.deliver(std::move(out));
      },
      [promise](caf::error& err) mutable { promise.deliver(err); });
  return promise;
}

// ---- data plane ------------------------------------------------------------

/// Looks up the sandbox actor of `id` and runs `then(box, promise)`; the
/// lookup's failure (not_found: no running sandbox) answers the promise.
template <class T, class Then>
caf::result<T> on_sandbox(self_ptr self, const std::string& id, Then then) {
  auto promise = self->make_response_promise<T>();
  self->request(self->state.context.worker, ms(opts(self).call_timeout_ms), wk_get_atom::value, id)
    .then([promise, then](const sandbox_actor& box) mutable { then(box, promise); },
          [promise](caf::error& err) mutable { promise.deliver(err); });
  return promise;
}

/// Resolves exec_spec.user: "" and "root" are root, digits a uid (and gid),
/// anything else a name looked up in the sandbox's /etc/passwd.
void resolve_user(self_ptr self, const sandbox_actor& box, const std::string& user,
                  std::function<void(result<schema::process_user>)> then) {
  if (auto known = user_without_passwd(user)) {
    then(std::move(*known));
    return;
  }
  file_request read;
  read.op = file_op::read;
  read.path = "/etc/passwd";
  read.length = opts(self).passwd_bytes_max;
  self->request(box, ms(opts(self).file_timeout_ms), sbx_file_atom::value, std::move(read))
    .then([then, user](const file_reply& passwd) { then(find_user(passwd.data, user)); },
          [then, user](caf::error& err) {
            auto failure = to_status(err);
            if (failure.code == errc::not_found)
              failure = make_status(errc::invalid_argument,
                                    "the sandbox has no /etc/passwd to look up user \"" + user
                                      + "\"; give a numeric uid");
            then(failure);
          });
}

/// This worker's figures for a scrape: its sandboxes by state, then what
/// the host adds (the egress proxy's counters). A fresh registry per scrape:
/// every figure is a current value, none accumulates here.
std::string render_worker_metrics(self_ptr self) {
  metrics::metrics_registry figures;
  figures.describe("airlock_worker_sandboxes", "Sandboxes this worker holds, by state.", "gauge");
  std::map<std::string, uint64_t> by_state;
  for (auto state : {sandbox_state::creating, sandbox_state::running, sandbox_state::paused})
    by_state[std::string(schema::to_string(state))] = 0;
  for (const auto& [id, tracked] : self->state.sandboxes)
    ++by_state[std::string(schema::to_string(tracked.state))];
  for (const auto& [state, count] : by_state)
    figures.gauge_set("airlock_worker_sandboxes", {{"state", state}}, static_cast<double>(count));
  figures.describe("airlock_worker_template_builds", "Template builds under way on this worker.",
                   "gauge");
  figures.gauge_set("airlock_worker_template_builds", {},
                    static_cast<double>(self->state.builds.size()));
  if (self->state.context.host_figures)
    self->state.context.host_figures(figures);
  return figures.render();
}

using view_promise = caf::typed_response_promise<actors::process_view>;

/// Starts the process and answers with its row (times in Unix ms).
void start_process(self_ptr self, const sandbox_actor& box, actors::exec_spec spec,
                   view_promise promise) {
  const auto timeout = ms(opts(self).call_timeout_ms);
  self->request(box, timeout, sbx_exec_atom::value, std::move(spec))
    .then(
      [self, box, promise, timeout](const std::string& process_id) mutable {
        self->request(box, timeout, sbx_status_atom::value, process_id)
          .then(
            [self, promise](process_view& row) mutable {
              promise.deliver(with_unix_times(self, std::move(row)));
            },
            [promise](caf::error& err) mutable { promise.deliver(err); });
      },
      [promise](caf::error& err) mutable { promise.deliver(err); });
}

caf::result<actors::process_view> handle_exec(self_ptr self, const std::string& id,
                                              actors::exec_spec spec) {
  if (spec.argv.empty() == spec.cmd.empty())
    return make_error(errc::invalid_argument, "give exactly one of argv and cmd");
  // An image's WorkingDir and User apply where the request names none. A
  // user the request names starts in its home when neither names a
  // directory (the agent falls back to / without one); the image's user in /,
  // as Docker runs it.
  auto defaults = defaults_of(self, id);
  if (spec.cwd.empty())
    spec.cwd = defaults.workdir;
  if (spec.user.empty()) {
    spec.user = defaults.user;
    if (spec.cwd.empty())
      spec.cwd = "/";
  }
  return on_sandbox<actors::process_view>(
    self, id, [self, id, spec](const sandbox_actor& box, view_promise promise) {
      resolve_user(self, box, spec.user,
                   [self, id, spec, box, promise](result<schema::process_user> user) mutable {
                     if (!user) {
                       promise.deliver(make_error(user.error()));
                       return;
                     }
                     start_process(self, box, resolve_exec(self, id, spec, *user), promise);
                   });
    });
}

caf::result<actors::output_batch> handle_output(self_ptr self, const std::string& id,
                                                const actors::output_request& req) {
  using batch_promise = caf::typed_response_promise<actors::output_batch>;
  return on_sandbox<actors::output_batch>(
    self, id, [self, req](const sandbox_actor& box, batch_promise promise) {
      output_read read{req.process_id,  req.offset,    req.want_stdout,
                       req.want_stderr, req.max_bytes, req.wait_ms};
      self
        ->request(box, ms(uint64_t{opts(self).call_timeout_ms} + req.wait_ms),
                  sbx_output_atom::value, std::move(read))
        .then([promise](output_reply& reply) mutable { promise.deliver(to_batch(reply)); },
              [promise](caf::error& err) mutable { promise.deliver(err); });
    });
}

caf::result<actors::watch_batch> handle_watch(self_ptr self, const std::string& id,
                                              const actors::watch_request& req) {
  using batch_promise = caf::typed_response_promise<actors::watch_batch>;
  return on_sandbox<actors::watch_batch>(
    self, id, [self, req](const sandbox_actor& box, batch_promise promise) {
      self
        ->request(box, ms(uint64_t{opts(self).call_timeout_ms} + req.wait_ms),
                  sbx_watch_atom::value, req)
        .then([promise](actors::watch_batch& batch) mutable { promise.deliver(std::move(batch)); },
              [promise](caf::error& err) mutable { promise.deliver(err); });
    });
}

/// Forwards a call that answers bool to the sandbox actor.
template <class... Ts>
caf::result<bool> forward_bool(self_ptr self, const std::string& id, Ts... xs) {
  return on_sandbox<bool>(
    self, id, [self, xs...](const sandbox_actor& box, caf::typed_response_promise<bool> promise) {
      self->request(box, ms(opts(self).call_timeout_ms), xs...)
        .then([promise](bool ok) mutable { promise.deliver(ok); },
              [promise](caf::error& err) mutable { promise.deliver(err); });
    });
}

caf::result<actors::process_view> handle_proc(self_ptr self, const std::string& id,
                                              const std::string& process_id, uint32_t wait_ms) {
  return on_sandbox<actors::process_view>(
    self, id, [self, process_id, wait_ms](const sandbox_actor& box, view_promise promise) {
      auto deliver = [self, promise](process_view& row) mutable {
        promise.deliver(with_unix_times(self, std::move(row)));
      };
      auto fail = [promise](caf::error& err) mutable { promise.deliver(err); };
      const auto timeout = ms(uint64_t{opts(self).call_timeout_ms} + wait_ms);
      if (wait_ms > 0)
        self->request(box, timeout, sbx_wait_atom::value, process_id, wait_ms).then(deliver, fail);
      else
        self->request(box, timeout, sbx_status_atom::value, process_id).then(deliver, fail);
    });
}

caf::result<std::vector<actors::process_view>> handle_procs(self_ptr self, const std::string& id) {
  using views_promise = caf::typed_response_promise<std::vector<actors::process_view>>;
  return on_sandbox<std::vector<actors::process_view>>(
    self, id, [self](const sandbox_actor& box, views_promise promise) {
      self->request(box, ms(opts(self).call_timeout_ms), sbx_procs_atom::value)
        .then(
          [self, promise](std::vector<process_view>& rows) mutable {
            for (auto& row : rows)
              row = with_unix_times(self, std::move(row));
            promise.deliver(std::move(rows));
          },
          [promise](caf::error& err) mutable { promise.deliver(err); });
    });
}

caf::result<actors::sandbox_usage> handle_usage(self_ptr self, const std::string& id) {
  using usage_promise = caf::typed_response_promise<actors::sandbox_usage>;
  return on_sandbox<actors::sandbox_usage>(
    self, id, [self](const sandbox_actor& box, usage_promise promise) {
      self->request(box, ms(opts(self).call_timeout_ms), sbx_usage_atom::value)
        .then(
          [self, promise](actors::sandbox_usage& usage) mutable {
            usage.sampled_at_ms = to_unix_ms(self, usage.sampled_at_ms);
            promise.deliver(std::move(usage));
          },
          [promise](caf::error& err) mutable { promise.deliver(err); });
    });
}

// ---- files -----------------------------------------------------------------

caf::result<actors::file_result> handle_file(self_ptr self, const std::string& id,
                                             actors::file_spec& spec) {
  using file_promise = caf::typed_response_promise<actors::file_result>;
  const bool is_stat = spec.verb == actors::file_verb::stat;
  auto req = std::make_shared<file_request>(to_file_request(spec));
  return on_sandbox<actors::file_result>(
    self, id, [self, req, is_stat](const sandbox_actor& box, file_promise promise) {
      const std::string path = req->path;
      self->request(box, ms(opts(self).file_timeout_ms), sbx_file_atom::value, std::move(*req))
        .then(
          [promise, path, is_stat](file_reply& reply) mutable {
            auto out = to_file_result(reply, path);
            if (!is_stat)
              out.info = {};
            promise.deliver(std::move(out));
          },
          [promise](caf::error& err) mutable { promise.deliver(err); });
    });
}

/// A data-plane call on sandbox `id` reached this worker: activity that the
/// control plane's idle policy asks for with dp_quiet.
const std::string& noting_activity(self_ptr self, const std::string& id) {
  if (auto it = self->state.sandboxes.find(id); it != self->state.sandboxes.end())
    it->second.last_data_plane = self->clock().now();
  return id;
}

int64_t quiet_ms(self_ptr self, const std::string& id) {
  auto it = self->state.sandboxes.find(id);
  if (it == self->state.sandboxes.end() || !it->second.last_data_plane)
    return -1;
  return std::chrono::duration_cast<std::chrono::milliseconds>(self->clock().now()
                                                               - *it->second.last_data_plane)
    .count();
}

node_impl_actor::behavior_type node_body(self_ptr self, node_context context) {
  self->state.context = std::move(context);
  return {
    [self](actors::nd_create_atom, const schema::sandbox_record& record) {
      return handle_create(self, record, false);
    },
    [self](actors::nd_recreate_atom, const schema::sandbox_record& record) {
      return handle_create(self, record, true);
    },
    [self](actors::nd_pause_atom, const std::string& id) { return handle_freeze(self, id, true); },
    [self](actors::nd_resume_atom, const std::string& id) {
      return handle_freeze(self, id, false);
    },
    [self](actors::nd_destroy_atom, const std::string& id) { return handle_destroy(self, id); },
    [self](actors::nd_list_atom) { return handle_list(self); },
    [self](actors::dp_exec_atom, const std::string& id, const actors::exec_spec& spec) {
      return handle_exec(self, noting_activity(self, id), spec);
    },
    [self](actors::dp_output_atom, const std::string& id, const actors::output_request& req) {
      return handle_output(self, noting_activity(self, id), req);
    },
    [self](actors::dp_stdin_atom, const std::string& id, const std::string& process_id,
           const std::string& bytes, bool close) {
      return forward_bool(self, noting_activity(self, id), sbx_stdin_atom::value, process_id, bytes,
                          close);
    },
    [self](actors::dp_signal_atom, const std::string& id, const std::string& process_id,
           int32_t signo) -> caf::result<bool> {
      if (signo <= 0 || signo > 64)
        return make_error(errc::invalid_argument,
                          "signal " + std::to_string(signo) + " is not a signal number (1..64)");
      return forward_bool(self, noting_activity(self, id), sbx_signal_atom::value, process_id,
                          signo);
    },
    [self](actors::dp_resize_atom, const std::string& id, const std::string& process_id,
           uint16_t rows, uint16_t cols) -> caf::result<bool> {
      if (rows == 0 || cols == 0)
        return make_error(errc::invalid_argument, "a terminal needs at least one row and column");
      return forward_bool(self, noting_activity(self, id), sbx_resize_atom::value, process_id, rows,
                          cols);
    },
    [self](actors::dp_proc_atom, const std::string& id, const std::string& process_id,
           uint32_t wait_ms) {
      return handle_proc(self, noting_activity(self, id), process_id, wait_ms);
    },
    // Not activity: the idle policy itself lists the processes.
    [self](actors::dp_procs_atom, const std::string& id) { return handle_procs(self, id); },
    [self](actors::dp_quiet_atom, const std::string& id) { return quiet_ms(self, id); },
    // Not activity either: a dashboard polling usage must not keep a sandbox awake.
    [self](actors::dp_usage_atom, const std::string& id) { return handle_usage(self, id); },
    [self](actors::dp_file_atom, const std::string& id, actors::file_spec& spec) {
      return handle_file(self, noting_activity(self, id), spec);
    },
    [self](actors::dp_watch_atom, const std::string& id, const actors::watch_request& req) {
      return handle_watch(self, noting_activity(self, id), req);
    },
    [self](actors::nd_egress_atom, const schema::sandbox_record& record)
      -> caf::result<node_sandbox> { return handle_egress(self, record); },
    [self](actors::nd_metrics_atom) { return render_worker_metrics(self); },
    [self](actors::nd_load_atom) -> caf::result<schema::worker_heartbeat> {
      auto promise = self->make_response_promise<schema::worker_heartbeat>();
      self->request(self->state.context.worker, std::chrono::seconds(10), wk_load_atom::value)
        .then(
          [promise](schema::worker_heartbeat& load) mutable { promise.deliver(std::move(load)); },
          [promise](caf::error& error) mutable { promise.deliver(std::move(error)); });
      return promise;
    },
    [self](actors::nd_ckpt_atom, const std::string& id, const std::string& checkpoint_id,
           bool include_memory) {
      return forward_to_worker<uint64_t>(self, wk_ckpt_atom::value, id, checkpoint_id,
                                         include_memory);
    },
    [self](actors::nd_ckptdel_atom, const std::string& checkpoint_id) {
      return forward_to_worker<bool>(self, wk_ckptdel_atom::value, checkpoint_id);
    },
    [self](actors::nd_ckpts_atom) {
      return forward_to_worker<std::vector<std::string>>(self, wk_ckpts_atom::value);
    },
    [self](actors::nd_spool_atom, const std::string& spool_id, uint64_t offset,
           const std::string& bytes,
           bool last) { return handle_spool(self, spool_id, offset, bytes, last); },
    [self](actors::nd_tbuild_atom, const actors::template_build& build) {
      return handle_template_build(self, build);
    },
    [self](actors::nd_claim_atom, const schema::sandbox_record& record) {
      return handle_claim(self, record);
    },
    [self](actors::nd_tdel_atom, const std::string& worker_name) {
      return handle_template_delete(self, worker_name);
    },
    [self](actors::nd_twatch_atom, const std::string& worker_name, uint64_t log_offset,
           bool cancel) { return handle_template_watch(self, worker_name, log_offset, cancel); },
    [self](nd_built_atom, const template_outcome& done) { on_built(self, done); },
  };
}

} // namespace

} // namespace airlock::worker::node_detail

namespace airlock::worker {

actors::node_actor spawn_node(caf::actor_system& system, node_context context) {
  // Uploads live in the control plane that sends them: one this worker held
  // when it stopped is never finished (its version is failed or rebuilt
  // from a new upload), so the spool starts empty.
  if (context.rootfs)
    (void)remove_tree(node_detail::spool_dir_of(*context.rootfs));
  node_detail::node_impl_actor node = system.spawn(node_detail::node_body, std::move(context));
  return node;
}

} // namespace airlock::worker
