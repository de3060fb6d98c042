#pragma once
// The airlockd subcommands. main() parses options, then calls one of these.

#include <functional>
#include <ostream>

#include "actors/log.hpp"
#include "airlockd/daemon.hpp"
#include "airlockd/options.hpp"
#include "schema/errc.hpp"
#include "storage/kv_store.hpp"

namespace airlock::airlockd {

/// Where serve's caller plugs in the parts that run on the store. Empty
/// functions are skipped.
struct serve_hooks {
  /// Runs once the store is open, before the listener starts: recover every
  /// operation that had not ended and start the operation engine. A failure
  /// stops the start (exit status 1). The store outlives the engine.
  std::function<status(storage::kv_store&)> start_engine;
  /// Runs after the listener has stopped, before the store closes.
  std::function<void()> stop_engine;
};

/// `airlockd serve`: store, engine, admin key on first start, listener;
/// prints "admin key: ..." (first start only) and "listening on HOST:PORT" to
/// `out`. Returns the exit status.
int run_serve(const serve_options& options, const serve_hooks& hooks, stop_signals& signals,
              std::ostream& out, const actors::logger& log);

/// `airlockd control`: store, engine (through `hooks`, as in serve) and
/// listener; cluster transport arrives later.
int run_control(const control_options& options, const serve_hooks& hooks, stop_signals& signals,
                std::ostream& out, const actors::logger& log);

/// `airlockd worker`: local store and data-plane listener; joining arrives later.
int run_worker(const worker_options& options, stop_signals& signals, std::ostream& out,
               const actors::logger& log);

} // namespace airlock::airlockd
