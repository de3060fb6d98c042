#pragma once
// The operation engine: creates operations (deduplicated by idempotency key),
// answers queries about them, and after a restart recovers every operation
// that had not ended and drives it to an end. One operation actor per
// operation does the driving (operation_actor.hpp).

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <functional>
#include <map>
#include <string>

#include "actors/clock.hpp"
#include "actors/messages.hpp"
#include "actors/operation_actor.hpp"
#include "storage/commit_journal.hpp"
#include "storage/kv_store.hpp"

namespace airlock::actors {

/// Operation kind -> the actor that runs its steps.
using procedure_table = std::map<std::string, step_runner_actor>;

struct operation_engine_options {
  /// Deadline of an operation whose request names none. Default: 900000 (15 min).
  uint64_t default_timeout_ms = 900'000;
  /// Longest deadline a request may ask for. Default: 86400000 (1 day).
  uint64_t timeout_max_ms = 86'400'000;
  /// Operations driven at once; past it op_create fails with
  /// resource_exhausted. Default: 100000.
  size_t live_operations_max = 100'000;
  /// Longest accepted idempotency key, kind, target id. Default: 256.
  size_t key_bytes_max = 256;
  /// Largest params_json. Default: 65536.
  size_t params_bytes_max = 65'536;
  /// Options handed to every operation actor.
  operation_options operation;
};

/// What the engine works with; every pointee outlives the engine and the
/// operation actors it spawns.
struct operation_engine_deps {
  storage::kv_store* store = nullptr;
  storage::commit_journal* journal = nullptr;
  const wall_clock* clock = nullptr;
  entropy_source* entropy = nullptr;
  procedure_table procedures;
  /// Called on the engine's thread when an operation ends (metrics). Must be
  /// cheap and thread-safe; may be empty.
  std::function<void(const schema::operation_record&)> on_terminal;
};

using operation_engine_actor = caf::typed_actor<
  /// Persists a new pending operation and starts driving it; replies once it
  /// is durable. With an idempotency key already used by the same tenant,
  /// replies with the first operation (existing = true) if the request is the
  /// same, else fails with conflict. Errors: invalid_argument (unknown kind,
  /// oversized fields), resource_exhausted, io_error.
  caf::replies_to<op_create_atom, operation_request>::with<create_reply>,
  /// The operation's last persisted state. Errors: not_found (also for
  /// another tenant's operation; tenant "" sees all). Idempotent.
  caf::replies_to<op_get_atom, std::string /*id*/,
                  std::string /*tenant*/>::with<schema::operation_record>,
  /// See operation_actor's op_cancel. Errors: not_found, wrong_state.
  caf::replies_to<op_cancel_atom, std::string /*id*/,
                  std::string /*tenant*/>::with<schema::operation_record>,
  /// See operation_actor's op_wait. Errors: not_found.
  caf::replies_to<op_wait_atom, std::string /*id*/, std::string /*tenant*/,
                  uint64_t /*wait_ms*/>::with<schema::operation_record>,
  /// See operation_actor's op_watch; for an ended operation, just the record.
  caf::replies_to<op_watch_atom, std::string /*id*/, std::string /*tenant*/,
                  caf::actor /*watcher*/>::with<schema::operation_record>,
  /// Loads every non-terminal operation from the store and drives each to an
  /// end; already-live ones are left alone. Idempotent.
  caf::replies_to<op_recover_atom>::with<engine_stats>,
  caf::replies_to<op_stats_atom>::with<engine_stats>,
  /// Internal: creation of operation `id` was acknowledged (or refused).
  caf::reacts_to<op_saved_atom, std::string /*id*/, caf::error>,
  /// Internal: an operation actor reports its terminal record.
  caf::reacts_to<op_event_atom, schema::operation_record>>;

operation_engine_actor spawn_operation_engine(caf::actor_system& system,
                                              operation_engine_options options,
                                              operation_engine_deps deps);

} // namespace airlock::actors
