#pragma once
// Hosts the operation engine inside airlockd: the actor system, the
// group-commit journal over the open store, the engine actor, and the
// recovery run at start-up. Start and stop order matters (the journal must
// outlive every actor that submits to it), so it lives in one place.

#include <caf/actor_system.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "actors/clock.hpp"
#include "actors/cluster_tls.hpp"
#include "actors/log.hpp"
#include "actors/operation_engine.hpp"
#include "actors/system_config.hpp"
#include "storage/commit_journal.hpp"
#include "storage/kv_store.hpp"

namespace airlock::airlockd {

struct engine_host_options {
  /// CAF scheduler threads; 0: CAF's default (one per core, at least 4). Default: 0.
  size_t scheduler_threads = 0;
  /// How long start-up recovery may take before airlockd gives up.
  /// Default: 60000.
  uint64_t recovery_timeout_ms = 60'000;
  /// Load CAF's middleman (the cluster transport). Default: false.
  bool cluster = false;
  actors::operation_engine_options engine;
  storage::group_commit_options journal;
};

/// Options with the cluster transport loaded.
inline engine_host_options cluster_engine_options() {
  engine_host_options options;
  options.cluster = true;
  return options;
}

using actors::cluster_tls_files;

class engine_host {
public:
  engine_host(engine_host_options options, const actors::logger& log);

  /// Loads CAF's TLS module with `files` (re-read for every connection, so
  /// replacing them atomically rotates them). Call before start_system,
  /// with the cluster transport loaded.
  void use_cluster_tls(const cluster_tls_files& files);
  ~engine_host(); ///< stops if still running
  engine_host(const engine_host&) = delete;
  engine_host& operator=(const engine_host&) = delete;

  /// Starts the actor system alone (idempotent), so that the actors the
  /// procedures need can be spawned before the engine.
  caf::actor_system& start_system();

  /// Spawns the engine over `store` (which must outlive stop()) and recovers
  /// every unfinished operation. `procedures` maps operation kinds to their
  /// step runners; `on_terminal` sees every operation that ends (metrics).
  status start(storage::kv_store& store, actors::procedure_table procedures = {},
               std::function<void(const schema::operation_record&)> on_terminal = {});

  /// Runs before the actor system stops (after the engine's exit), to stop
  /// what was spawned next to it. Set before start.
  void on_stop(std::function<void()> hook) { on_stop_ = std::move(hook); }

  /// Stops the engine and its operations (their state is durable; the next
  /// start recovers them), then drains the journal. Idempotent.
  void stop();

  /// True between a successful start() and stop().
  bool ready() const noexcept { return ready_.load(); }

  /// The engine; valid only while ready().
  const actors::operation_engine_actor& engine() const noexcept { return engine_; }
  caf::actor_system& system() { return *system_; }

private:
  engine_host_options options_;
  actors::logger log_;
  actors::system_config config_;
  std::unique_ptr<storage::group_commit_journal> journal_;
  system_wall_clock clock_;
  system_entropy entropy_;
  std::unique_ptr<caf::actor_system> system_;
  actors::operation_engine_actor engine_;
  std::atomic<bool> ready_{false};
  std::function<void()> on_stop_;
};

} // namespace airlock::airlockd
