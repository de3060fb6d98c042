#pragma once
// A real worker for integration tests and benchmarks: a namespace runtime on
// test names (cgroup parent airlock-wtest, nft table airlock_wtest, its own
// address pool and uid range), the btrfs driver (loop image) in a scratch
// directory, the minimal template built from the real airlock-guest, a
// RocksDB store, and a worker actor on a real actor system.

#include <caf/actor_system.hpp>
#include <caf/scoped_actor.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "actors/errors.hpp"
#include "actors/system_config.hpp"
#include "storage/kv_store.hpp"
#include "worker/runtime/namespace_runtime.hpp"
#include "worker/worker_actor.hpp"

namespace airlock::worker::test {

class scratch_dir;

/// Why a real worker cannot run here ("" when it can).
std::string worker_skip_reason();

/// Runtime options confined to the worker tests' names and ranges.
namespace_runtime_options worker_runtime_options(const std::string& state_dir);

/// The pieces of one worker, opened on `data_dir` (reused across restarts).
struct worker_host {
  std::string data_dir;
  std::shared_ptr<namespace_runtime> runtime;
  std::shared_ptr<rootfs_driver> rootfs;
  std::shared_ptr<storage::kv_store> store;

  /// Opens runtime, store and rootfs on `data_dir` and builds the minimal
  /// template unless `build_minimal` is false; the reason on failure.
  static result<worker_host> open(const std::string& data_dir, bool build_minimal = true);
  worker_context context(worker_options options = {}) const;
};

/// Sends a request and waits for the reply (bounded by `timeout`).
template <class R, class Handle, class... Ts>
result<R> ask(caf::scoped_actor& self, const Handle& dest, std::chrono::milliseconds timeout,
              Ts&&... xs) {
  std::optional<result<R>> out;
  self->request(dest, timeout, std::forward<Ts>(xs)...)
    .receive([&out](R& reply) { out.emplace(std::move(reply)); },
             [&out](caf::error& err) { out.emplace(to_status(err)); });
  return std::move(*out);
}

} // namespace airlock::worker::test
