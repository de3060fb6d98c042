// Durable transitions: direct_journal (one sync each) and group_commit_journal
// (one writer thread merging whatever queued up during the previous sync).

#include "storage/commit_journal.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

namespace airlock::storage {

status commit_journal::commit(write_batch batch) {
  // The promise is shared with the callback so that it stays alive however
  // late the callback returns relative to this thread waking up.
  auto done = std::make_shared<std::promise<status>>();
  auto outcome = done->get_future();
  submit(std::move(batch), [done](status s) { done->set_value(std::move(s)); });
  return outcome.get();
}

void direct_journal::submit(write_batch batch, commit_callback done) {
  done(store_.write(batch, durability::synced));
}

namespace {

struct pending_transition {
  write_batch batch;
  commit_callback done;
};

/// A group holds at least one transition whatever the options say, so the
/// writer always makes progress.
group_commit_options normalized(group_commit_options options) {
  options.batch_transitions_max = std::max<size_t>(options.batch_transitions_max, 1);
  return options;
}

} // namespace

struct group_commit_journal::impl {
  impl(kv_store& store, group_commit_options options)
      : store_(store), options_(normalized(options)), writer_([this] { run(); }) {}

  ~impl() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_one();
    writer_.join();
  }

  impl(const impl&) = delete;
  impl& operator=(const impl&) = delete;

  void submit(write_batch batch, commit_callback done) {
    {
      std::lock_guard lock(mutex_);
      if (queue_.size() < options_.queue_transitions_max) {
        queue_.push_back({std::move(batch), std::move(done)});
        wake_.notify_one();
        return;
      }
    }
    // Refused outside the lock: the callback may submit again.
    rejected_.fetch_add(1, std::memory_order_relaxed);
    done(make_status(errc::resource_exhausted,
                     "commit queue is full (" + std::to_string(options_.queue_transitions_max)
                       + " transitions waiting); the disk is not keeping up"));
  }

  journal_stats stats() const {
    return {transitions_.load(std::memory_order_relaxed), syncs_.load(std::memory_order_relaxed),
            failures_.load(std::memory_order_relaxed), rejected_.load(std::memory_order_relaxed)};
  }

private:
  /// Exits only once stopping and the queue is empty: the destructor drains.
  void run() {
    for (;;) {
      auto group = take_group();
      if (group.empty())
        return;
      commit_group(group);
    }
  }

  /// Waits for work, then takes the longest queue prefix within the group
  /// bounds (at least one transition, however large). Empty means stop.
  std::vector<pending_transition> take_group() {
    std::unique_lock lock(mutex_);
    wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    std::vector<pending_transition> group;
    size_t bytes = 0;
    while (!queue_.empty() && group.size() < options_.batch_transitions_max) {
      const size_t next_bytes = queue_.front().batch.bytes();
      if (!group.empty() && bytes + next_bytes > options_.batch_bytes_max)
        break;
      bytes += next_bytes;
      group.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
    return group;
  }

  void commit_group(std::vector<pending_transition>& group) {
    if (group.size() == 1) {
      finish(group.front(), write_synced(group.front().batch));
      return;
    }
    std::vector<const write_batch*> batches;
    batches.reserve(group.size());
    for (const auto& transition : group)
      batches.push_back(&transition.batch);
    syncs_.fetch_add(1, std::memory_order_relaxed);
    if (auto s = store_.write_all(batches, durability::synced); s.is_ok()) {
      for (auto& transition : group)
        finish(transition, status::ok());
      return;
    }
    // The merged write applied nothing (kv_store::write is all-or-nothing), so
    // retrying each transition alone tells the good from the bad ones.
    for (auto& transition : group)
      finish(transition, write_synced(transition.batch));
  }

  status write_synced(const write_batch& batch) {
    syncs_.fetch_add(1, std::memory_order_relaxed);
    return store_.write(batch, durability::synced);
  }

  void finish(pending_transition& transition, status outcome) {
    auto& counter = outcome.is_ok() ? transitions_ : failures_;
    counter.fetch_add(1, std::memory_order_relaxed);
    transition.done(std::move(outcome));
  }

  kv_store& store_;
  const group_commit_options options_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<pending_transition> queue_; // bounded by queue_transitions_max
  bool stopping_ = false;
  std::atomic<uint64_t> transitions_{0};
  std::atomic<uint64_t> syncs_{0};
  std::atomic<uint64_t> failures_{0};
  std::atomic<uint64_t> rejected_{0};
  std::thread writer_; // last: starts after every member above exists
};

group_commit_journal::group_commit_journal(kv_store& store, group_commit_options options)
    : impl_(std::make_unique<impl>(store, options)) {}

group_commit_journal::~group_commit_journal() = default;

void group_commit_journal::submit(write_batch batch, commit_callback done) {
  impl_->submit(std::move(batch), std::move(done));
}

journal_stats group_commit_journal::stats() const { return impl_->stats(); }

} // namespace airlock::storage
