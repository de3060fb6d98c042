#include "actors/template_procedures.hpp"

#include <caf/typed_event_based_actor.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "actors/build_progress.hpp"
#include "actors/errors.hpp"

namespace airlock::actors {

namespace {

using nlohmann::json;
using schema::template_record;
using schema::template_version;
using schema::template_version_state;
using std::chrono::milliseconds;

struct template_deps {
  sandbox_registry_actor registry;
  scheduler_actor scheduler;
  template_procedure_options options;
};

using runner_pointer = step_runner_actor::pointer;

/// One step in flight.
struct template_step : std::enable_shared_from_this<template_step> {
  runner_pointer self;
  template_deps deps;
  step_request request;
  caf::typed_response_promise<step_outcome> promise;
  json params;

  milliseconds control_timeout() const {
    return milliseconds(deps.options.control_call_timeout_ms);
  }
  void deliver(step_outcome outcome) { promise.deliver(std::move(outcome)); }
  void unknown() { deliver(step_outcome::unknown()); }
  void fail(const status& failure) {
    deliver(step_outcome::fail(std::string(to_string(failure.code)), failure.message));
  }
  uint32_t version() const { return params.value("version", uint32_t{0}); }

  void with_template(std::function<void(template_record)> next) {
    self
      ->request(deps.registry, control_timeout(), rg_tget_atom::value, request.target_id,
                std::string{})
      .then([next](template_record& record) { next(std::move(record)); },
            [me = shared_from_this()](caf::error& error) {
              auto failure = to_status(error);
              if (failure.code == errc::not_found)
                return me->fail(failure);
              me->unknown();
            });
  }

  void save(template_version version, std::function<void(template_record)> next) {
    self
      ->request(deps.registry, control_timeout(), rg_tsave_atom::value, request.target_id,
                std::move(version))
      .then([next](template_record& record) { next(std::move(record)); },
            [me = shared_from_this()](caf::error&) { me->unknown(); });
  }

  void with_node(const std::string& worker_id, std::function<void(node_actor)> next) {
    self->request(deps.scheduler, control_timeout(), sc_node_atom::value, worker_id)
      .then([next](placement& where) { next(where.node); },
            [me = shared_from_this()](caf::error&) { me->unknown(); });
  }
};

json version_json(const template_version& v) {
  json out{{"version", v.version}, {"state", std::string(schema::to_string(v.state))},
           {"digest", v.digest},   {"size_bytes", v.size_bytes},
           {"files", v.files},     {"start_cmd", v.start_cmd},
           {"workdir", v.workdir}, {"user", v.user}};
  json env = json::object();
  for (const auto& [key, value] : v.env)
    env[key] = value;
  out["env"] = std::move(env);
  return out;
}

/// template.build: the worker holding the upload (or chosen for a recipe)
/// makes the version.
void build_on_worker(std::shared_ptr<template_step> step, template_record record) {
  auto* found = record.find(step->version());
  if (found == nullptr)
    return step->fail(make_status(errc::not_found, "template " + record.name + " has no version "
                                                     + std::to_string(step->version())));
  auto version = *found;
  if (version.state == template_version_state::ready)
    return step->deliver(step_outcome::complete(
      json{{"template", record.name}, {"version", version_json(version)}}.dump()));
  if (version.state == template_version_state::failed)
    return step->fail(
      make_status(errc::wrong_state, version.error ? version.error->message : "the build failed"));
  template_build build;
  build.worker_name = version.worker_name;
  build.spool_id = step->params.value("spool_id", "");
  build.format = step->params.value("format", "");
  build.compressed_bytes_max = step->params.value("compressed_bytes_max", uint64_t{0});
  build.uncompressed_bytes_max = step->params.value("uncompressed_bytes_max", uint64_t{0});
  build.entries_max = step->params.value("entries_max", uint64_t{0});
  build.path_bytes_max = step->params.value("path_bytes_max", uint32_t{0});
  build.start_cmd = version.start_cmd; // the request's; empty: the image's
  build.recipe_json = step->params.value("recipe", "");
  build.base_worker_name = step->params.value("base_worker_name", "");
  step->with_node(version.worker_id, [step, record, version, build](node_actor node) {
    const milliseconds wait{step->deps.options.build_wait_ms};
    caf::actor relay;
    if (step->request.operation) {
      progress_relay_options relayed;
      relayed.every = milliseconds(step->deps.options.progress_poll_ms);
      relayed.call_timeout = step->control_timeout();
      relayed.lifetime = wait;
      relay = spawn_progress_relay(step->self->home_system(), node, build.worker_name,
                                   step->request.operation, relayed);
    }
    auto stop_relay = [relay] { stop_progress_relay(relay); };
    step->self->request(node, wait, nd_tbuild_atom::value, build)
      .then(
        [step, record, version, stop_relay](template_built& built) mutable {
          stop_relay();
          version.state = template_version_state::ready;
          version.digest = built.digest;
          version.size_bytes = built.size_bytes;
          version.files = built.files;
          version.env = built.env;
          version.workdir = built.workdir;
          version.user = built.user;
          version.start_cmd = built.start_cmd;
          version.build_log_tail = built.log_tail;
          step->save(version, [step, version](template_record saved) {
            step->deliver(step_outcome::complete(json{
              {"template", saved.name},
              {"version", version_json(version)},
              {"current_version", saved.current_version},
              {"progress", {{"step", "done"}, {"percent", 100}}},
              {"log", "/v1/templates/" + saved.name + "/versions/" + std::to_string(version.version)
                        + "/log"}}.dump()));
          });
        },
        [step, version, stop_relay](caf::error& error) mutable {
          stop_relay();
          auto failure = to_status(error);
          if (failure.code == errc::timeout)
            return step->deliver(step_outcome::not_done()); // still building: wait again
          if (failure.code == errc::unavailable || failure.code == errc::outcome_unknown)
            return step->unknown(); // the worker may be back; the build is idempotent
          version.state = template_version_state::failed;
          version.error = schema::error_info{std::string(to_string(failure.code)), failure.message};
          step->save(version, [step, failure](template_record) { step->fail(failure); });
        });
  });
}

/// template.delete: nothing may use what goes; then its files, then its record.
void delete_versions(std::shared_ptr<template_step> step, template_record record) {
  const uint32_t which = step->version();
  if (which != 0 && record.find(which) == nullptr)
    return step->deliver(step_outcome::complete(
      json{{"template", record.name}, {"deleted_versions", json::array()}}.dump()));
  step->self
    ->request(step->deps.registry, step->control_timeout(), rg_tusers_atom::value, record.name,
              which)
    .then(
      [step, record, which](std::vector<std::string>& users) {
        if (!users.empty()) {
          std::string list;
          for (const auto& id : users)
            list += (list.empty() ? "" : ", ") + id;
          return step->fail(make_status(
            errc::wrong_state,
            "template " + record.name + (which == 0 ? "" : " version " + std::to_string(which))
              + " is in use by " + list + ": delete those sandboxes and checkpoints first"));
        }
        // Each version's files, one at a time, then the record.
        auto pending = std::make_shared<std::vector<template_version>>();
        for (const auto& v : record.versions)
          if ((which == 0 || v.version == which) && !v.worker_id.empty())
            pending->push_back(v);
        auto deleted = std::make_shared<json>(json::array());
        for (const auto& v : record.versions)
          if (which == 0 || v.version == which)
            deleted->push_back(v.version);
        auto next = std::make_shared<std::function<void()>>();
        *next = [step, record, which, pending, deleted, next] {
          if (pending->empty()) {
            step->self
              ->request(step->deps.registry, step->control_timeout(), rg_tforget_atom::value,
                        record.name, which)
              .then(
                [step, record, deleted](bool) {
                  step->deliver(step_outcome::complete(
                    json{{"template", record.name}, {"deleted_versions", *deleted}}.dump()));
                },
                [step](caf::error&) { step->unknown(); });
            return;
          }
          auto version = pending->back();
          pending->pop_back();
          step->with_node(version.worker_id, [step, version, next](node_actor node) {
            step->self
              ->request(node, milliseconds(step->deps.options.delete_timeout_ms),
                        nd_tdel_atom::value, version.worker_name)
              .then([next](bool) { (*next)(); },
                    [step](caf::error& error) {
                      auto failure = to_status(error);
                      if (failure.code == errc::timeout || failure.code == errc::unavailable)
                        return step->unknown();
                      step->fail(failure);
                    });
          });
        };
        (*next)();
      },
      [step](caf::error&) { step->unknown(); });
}

step_runner_actor::behavior_type template_runner(runner_pointer self, template_deps deps) {
  return {
    [self, deps](step_run_atom, step_request& request) -> caf::result<step_outcome> {
      if (request.step != 0)
        return step_outcome::fail("internal", "no step " + std::to_string(request.step)
                                                + " in procedure " + request.kind);
      auto step = std::make_shared<template_step>();
      step->self = self;
      step->deps = deps;
      step->params = json::parse(request.params_json, nullptr, false);
      if (!step->params.is_object())
        step->params = json::object();
      step->request = std::move(request);
      step->promise = self->make_response_promise<step_outcome>();
      auto promise = step->promise;
      const bool build = step->request.kind == kind_template_build;
      step->with_template([step, build](template_record record) {
        if (build)
          build_on_worker(step, std::move(record));
        else
          delete_versions(step, std::move(record));
      });
      return promise;
    },
    // Both steps are idempotent: one whose outcome was lost is run again.
    [](step_check_atom, step_request&) -> caf::result<step_outcome> {
      return step_outcome::not_done();
    },
  };
}

} // namespace

procedure_table spawn_template_procedures(caf::actor_system& system,
                                          sandbox_registry_actor registry,
                                          scheduler_actor scheduler,
                                          template_procedure_options options) {
  auto runner = system.spawn(template_runner,
                             template_deps{std::move(registry), std::move(scheduler), options});
  procedure_table table;
  for (const char* kind : {kind_template_build, kind_template_delete})
    table.emplace(kind, runner);
  return table;
}

} // namespace airlock::actors
