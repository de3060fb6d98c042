#pragma once
// The airlockd subcommands. main() parses options, then calls one of these.

#include <functional>
#include <ostream>
#include <span>
#include <string>

#include "actors/log.hpp"
#include "airlockd/daemon.hpp"
#include "airlockd/options.hpp"
#include "schema/errc.hpp"
#include "storage/kv_store.hpp"

namespace airlock::airlockd {

/// `airlockd serve`: store, engine, admin key on first start, listener;
/// prints "admin key: ..." (first start only) and "listening on HOST:PORT" to
/// `out`. Returns the exit status.
int run_serve(const serve_options& options, stop_signals& signals, std::ostream& out,
              const actors::logger& log);

/// `airlockd control`: store, engine, scheduler published on the cluster
/// address, and the API listener (data-plane routes forwarded to workers).
int run_control(const control_options& options, stop_signals& signals, std::ostream& out,
                const actors::logger& log);

/// `airlockd worker`: local store, sandboxes, the data-plane listener, and
/// the join to the control plane (reconnecting when it is lost).
int run_worker(const worker_options& options, stop_signals& signals, std::ostream& out,
               const actors::logger& log);

/// `airlockd token create`: a join token from the control plane's API,
/// printed alone on `out`. Returns the exit status (2: bad usage).
int run_token(std::span<const std::string> args, const process_env& env, std::ostream& out,
              std::ostream& err);

/// Usage of `airlockd token`.
std::string token_usage();

/// `airlockd worker remove ID`: DELETE /v1/workers/{id} at the control plane.
int run_worker_remove(std::span<const std::string> args, const process_env& env, std::ostream& out,
                      std::ostream& err);

} // namespace airlock::airlockd
