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
  /// Bound on one build on the worker; past it the build fails and says
  /// which limit to raise. Default: 1800000 (30 minutes).
  uint32_t build_timeout_ms = 1'800'000;
  /// Bound on deleting a version's files on the worker. Default: 120000.
  uint32_t delete_timeout_ms = 120'000;
};

procedure_table spawn_template_procedures(caf::actor_system& system,
                                          sandbox_registry_actor registry,
                                          scheduler_actor scheduler,
                                          template_procedure_options options = {});

} // namespace airlock::actors
