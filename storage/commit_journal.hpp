#pragma once
// Durable state transitions. A transition is one write_batch; it is
// acknowledged (its callback runs with ok) only after it is synced to the WAL.
// group_commit_journal merges concurrent transitions into one synced write.

#include <cstdint>
#include <functional>
#include <memory>

#include "schema/errc.hpp"
#include "storage/kv_store.hpp"
#include "storage/write_batch.hpp"

namespace airlock::storage {

/// Runs once per submitted transition: ok once durable, else why not (in which
/// case nothing of that transition was written).
using commit_callback = std::function<void(status)>;

class commit_journal {
public:
  virtual ~commit_journal() = default;
  /// Queues `batch`. `done` runs exactly once, possibly on another thread and
  /// possibly before submit returns. Never blocks on I/O: when the queue is
  /// full, `done` gets resource_exhausted at once.
  virtual void submit(write_batch batch, commit_callback done) = 0;
  /// Blocking convenience for threads that may block (not actor handlers).
  status commit(write_batch batch);
};

struct group_commit_options {
  /// Most transitions merged into one synced write. Default: 4096.
  size_t batch_transitions_max = 4096;
  /// Most bytes merged into one synced write. Default: 16 MiB.
  size_t batch_bytes_max = 16u << 20;
  /// Most transitions waiting to be written; past it submit fails with
  /// resource_exhausted. Default: 65536.
  size_t queue_transitions_max = 65536;
};

struct journal_stats {
  uint64_t transitions = 0; ///< acknowledged transitions
  uint64_t syncs = 0;       ///< synced writes issued
  uint64_t failures = 0;    ///< transitions that failed
  uint64_t rejected = 0;    ///< transitions refused because the queue was full
};

/// One writer thread drains the queue: everything queued while the previous
/// sync ran becomes the next single synced write. If a merged write fails,
/// each of its transitions is retried alone so one bad transition cannot fail
/// the others. Callbacks run on the writer thread (a rejected submit's on the
/// caller's), one at a time and without the queue lock: they must be quick and
/// must not throw, since the next sync waits for them.
class group_commit_journal final : public commit_journal {
public:
  /// `store` must outlive the journal.
  explicit group_commit_journal(kv_store& store, group_commit_options options = {});
  ~group_commit_journal() override; ///< drains the queue, then joins the writer
  group_commit_journal(const group_commit_journal&) = delete;
  group_commit_journal& operator=(const group_commit_journal&) = delete;

  void submit(write_batch batch, commit_callback done) override;
  journal_stats stats() const;

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

/// One synced write per transition, in the caller's thread: the baseline the
/// group-commit benchmark compares with, and a simple journal for tests.
class direct_journal final : public commit_journal {
public:
  explicit direct_journal(kv_store& store) : store_(store) {}
  void submit(write_batch batch, commit_callback done) override;

private:
  kv_store& store_;
};

} // namespace airlock::storage
