#pragma once
// Template versions as operation procedures (docs/templates.md). Their
// target is the template's name; their params name the version, which the
// API added (state building) before starting the operation, so a step run
// again after a crash builds the same version.
//
// template.build: the version's archive was uploaded to one worker (its
//   spool); that worker makes the version, and the record takes what it
//   holds (digest, size, the image's env, workdir, user, start_cmd) and
//   becomes current. A refusal marks the version failed with the reason.
// template.delete: refuses a version a sandbox or checkpoint uses, deletes
//   the version's files on its worker, then its record (version 0: all).

#include <caf/actor_system.hpp>

#include <cstdint>

#include "actors/cluster_protocol.hpp"
#include "actors/operation_engine.hpp"
#include "actors/sandbox_registry.hpp"

namespace airlock::actors {

inline constexpr const char* kind_template_build = "template.build";
inline constexpr const char* kind_template_delete = "template.delete";

struct template_procedure_options {
  /// Bound on one call to the registry or the scheduler. Default: 10000.
  uint32_t control_call_timeout_ms = 10'000;
  /// How long one run of the build step waits for the worker's build. A
  /// longer build is waited for again: the step runs again (the worker joins
  /// a repeat to the build under way), up to the engine's step_attempts_max
  /// runs (twelve: ten minutes) within the operation's deadline. Below the
  /// engine's step_timeout_ms, so that a wait ends as "not done", never as
  /// an unknown outcome. Default: 50000.
  uint32_t build_wait_ms = 50'000;
  /// How often a waiting build step asks the worker how far the build got
  /// (the operation's progress events). Default: 1000.
  uint32_t progress_poll_ms = 1000;
  /// Bound on deleting a version's files on the worker. Default: 120000.
  uint32_t delete_timeout_ms = 120'000;
};

procedure_table spawn_template_procedures(caf::actor_system& system,
                                          sandbox_registry_actor registry,
                                          scheduler_actor scheduler,
                                          template_procedure_options options = {});

} // namespace airlock::actors
