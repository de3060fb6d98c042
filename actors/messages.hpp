#pragma once
// Atoms and value messages of the actors layer. Stored and cross-host types
// (schema::*) travel as their Cap'n Proto bytes: inspect() below encodes them,
// so a mixed-version cluster still reads them.

#include <caf/actor.hpp>
#include <caf/atom.hpp>
#include <caf/detail/stringification_inspector.hpp>
#include <caf/meta/load_callback.hpp>
#include <caf/meta/type_name.hpp>

#include <cstdint>
#include <string>
#include <type_traits>

#include "actors/errors.hpp"
#include "schema/operation.hpp"

namespace airlock::actors {

// Atoms: at most 10 characters, none reusing a CAF atom's name.
using op_create_atom = caf::atom_constant<caf::atom("opcreate")>;
using op_get_atom = caf::atom_constant<caf::atom("opget")>;
using op_cancel_atom = caf::atom_constant<caf::atom("opcancel")>;
using op_wait_atom = caf::atom_constant<caf::atom("opwait")>;
using op_watch_atom = caf::atom_constant<caf::atom("opwatch")>;
using op_event_atom = caf::atom_constant<caf::atom("opevent")>;
using op_recover_atom = caf::atom_constant<caf::atom("oprecover")>;
using op_stats_atom = caf::atom_constant<caf::atom("opstats")>;
using op_progress_atom = caf::atom_constant<caf::atom("opprogress")>;
using step_run_atom = caf::atom_constant<caf::atom("steprun")>;
using step_check_atom = caf::atom_constant<caf::atom("stepcheck")>;
// Internal to the operation actor.
using op_saved_atom = caf::atom_constant<caf::atom("opsaved")>;
using op_timer_atom = caf::atom_constant<caf::atom("optimer")>;
using op_waited_atom = caf::atom_constant<caf::atom("opwaited")>;
using op_retry_atom = caf::atom_constant<caf::atom("opretry")>;

/// What a client asks for when it starts an operation.
struct operation_request {
  std::string kind; ///< must name a registered procedure
  std::string target_id;
  std::string tenant_id;
  std::string params_json;     ///< the procedure's input
  std::string idempotency_key; ///< empty: no deduplication
  uint64_t timeout_ms = 0;     ///< 0: the engine's default
};

/// The answer to op_create: the record as persisted, and whether it already
/// existed under the same idempotency key.
struct create_reply {
  schema::operation_record record;
  bool existing = false;
};

/// One step of a procedure, as the operation actor hands it to a step runner.
struct step_request {
  std::string operation_id;
  std::string kind;
  std::string target_id;
  std::string tenant_id;
  std::string params_json;
  uint32_t step = 0;
  std::string step_data; ///< what the previous step left
  uint32_t attempt = 1;  ///< 1 on the first run of this step
  /// The operation's actor: a long step reports progress to it with
  /// (op_progress_atom, progress_json), answered with whether cancellation
  /// was requested. Invalid in tests that run steps directly.
  caf::actor operation;
};

/// What a step runner reports.
enum class step_verdict : uint8_t {
  advance,  ///< step done; run step+1 with step_data
  complete, ///< the operation succeeded with result_json
  fail,     ///< the operation failed with error_code/error_message
  not_done, ///< (reconcile only) the step had no effect: run it again
  unknown,  ///< the effect could not be determined: reconcile again later
};

struct step_outcome {
  step_verdict verdict = step_verdict::unknown;
  std::string step_data;
  std::string result_json;
  std::string error_code;
  std::string error_message;

  static step_outcome advance(std::string data = {}) {
    return {step_verdict::advance, std::move(data), {}, {}, {}};
  }
  static step_outcome complete(std::string result_json = "{}") {
    return {step_verdict::complete, {}, std::move(result_json), {}, {}};
  }
  static step_outcome fail(std::string code, std::string message) {
    return {step_verdict::fail, {}, {}, std::move(code), std::move(message)};
  }
  static step_outcome not_done() { return {step_verdict::not_done, {}, {}, {}, {}}; }
  static step_outcome unknown() { return {step_verdict::unknown, {}, {}, {}, {}}; }
};

/// Counters of the operation engine (for /metrics and tests).
struct engine_stats {
  uint64_t created = 0;
  uint64_t deduplicated = 0;
  uint64_t recovered = 0;
  uint64_t unreadable = 0; ///< stored records that did not decode at recovery
  uint64_t live = 0;       ///< operation actors currently running
  uint64_t succeeded = 0;
  uint64_t failed = 0;
  uint64_t cancelled = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, operation_request& x) {
  return f(caf::meta::type_name("operation_request"), x.kind, x.target_id, x.tenant_id,
           x.params_json, x.idempotency_key, x.timeout_ms);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, create_reply& x) {
  return f(caf::meta::type_name("create_reply"), x.record, x.existing);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, step_request& x) {
  return f(caf::meta::type_name("step_request"), x.operation_id, x.kind, x.target_id, x.tenant_id,
           x.params_json, x.step, x.step_data, x.attempt, x.operation);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, step_outcome& x) {
  return f(caf::meta::type_name("step_outcome"), x.verdict, x.step_data, x.result_json,
           x.error_code, x.error_message);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, engine_stats& x) {
  return f(caf::meta::type_name("engine_stats"), x.created, x.deduplicated, x.recovered,
           x.unreadable, x.live, x.succeeded, x.failed, x.cancelled);
}

} // namespace airlock::actors

namespace airlock::schema {

/// Operation records cross actors and hosts as their Cap'n Proto bytes.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, operation_record& x) {
  auto name = caf::meta::type_name("operation_record");
  if constexpr (std::is_same_v<Inspector, caf::detail::stringification_inspector>) {
    return f(name, x.id, x.kind, x.target_id, std::string(to_string(x.state)), x.step);
  } else if constexpr (Inspector::reads_state) {
    auto bytes = encode(x);
    return f(name, bytes);
  } else {
    std::string bytes;
    auto decode = caf::meta::load_callback([&x, &bytes]() -> caf::error {
      auto decoded = decode_operation(bytes);
      if (!decoded)
        return make_error(decoded.error());
      x = std::move(*decoded);
      return caf::none;
    });
    return f(name, bytes, decode);
  }
}

} // namespace airlock::schema
