#pragma once
// A real worker for integration tests and benchmarks: a namespace runtime on
// test names (cgroup parent airlock-wtest, nft table airlock_wtest, its own
// address pool and uid range), the btrfs driver (loop image) in a scratch
// directory, the minimal template built from the real airlock-guest, a
// RocksDB store, and a worker actor on a real actor system.

#include <gtest/gtest.h>

#include <caf/actor_system.hpp>
#include <caf/scoped_actor.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "actors/errors.hpp"
#include "actors/system_config.hpp"
#include "storage/kv_store.hpp"
#include "tests/rootfs/test_support.hpp"
#include "tests/support/actor_ask.hpp"
#include "worker/runtime/namespace_runtime.hpp"
#include "worker/worker_actor.hpp"

namespace airlock::worker::test {

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
using airlock::test::ask;

/// What every fixture over a real worker shares: the host-wide lock, a
/// scratch data directory, the worker's host and an actor system. The lock
/// lets one worker test process at a time run on this host: they share the
/// test nft table, cgroup parent, address pool and uid range, and
/// close_host() removes the shared table and parents.
class real_worker_test : public ::testing::Test {
protected:
  ~real_worker_test() override { release_lock(); }

  /// Takes the lock, then opens a host on a fresh scratch directory and
  /// starts an actor system (no worker yet). Fails fatally if it cannot.
  void open_host(bool build_minimal = true);

  /// What a restart does: the worker goes, a new one cleans up after it;
  /// then the actor system, the host, the test's nft table and cgroup
  /// parents go, and the lock is released. Stop and drop every other actor
  /// handle first.
  void close_host();

  void release_lock();

  /// Sends an exit to `actor` and waits until it is gone.
  template <class Handle>
  void stop(const Handle& actor) {
    caf::scoped_actor self{*system_};
    self->send_exit(actor, caf::exit_reason::user_shutdown);
    self->wait_for(actor);
  }

  std::unique_ptr<scratch_dir> scratch_;
  worker_host host_;
  std::unique_ptr<actors::system_config> config_;
  std::unique_ptr<caf::actor_system> system_;
  worker_actor worker_;
  int lock_fd_ = -1;
};

} // namespace airlock::worker::test
