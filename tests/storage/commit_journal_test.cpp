// The journals' promises: acknowledged means written; concurrent transitions
// share syncs; a full queue refuses at once; one bad transition fails alone;
// destruction drains. Timing is controlled with gated_store, never sleeps.

#include <gtest/gtest.h>

#include <latch>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "storage/commit_journal.hpp"
#include "tests/storage/test_support.hpp"

namespace airlock::storage {
namespace {

/// One state transition as the operation store would stage it.
write_batch transition(const std::string& id) {
  write_batch batch;
  batch.put(keyspace::operations, id, "record:" + id);
  batch.put(keyspace::active_ops, id, "");
  return batch;
}

/// Collects the outcome of each named transition; wait() returns once
/// `expected` callbacks have run.
class outcomes {
public:
  explicit outcomes(std::ptrdiff_t expected) : remaining_(expected) {}

  commit_callback record(const std::string& name) {
    return [this, name](const status& s) {
      {
        std::lock_guard lock(mutex_);
        codes_[name] = s.code;
      }
      remaining_.count_down();
    };
  }
  void wait() { remaining_.wait(); }
  std::map<std::string, errc> codes() const {
    std::lock_guard lock(mutex_);
    return codes_;
  }

private:
  mutable std::mutex mutex_;
  std::map<std::string, errc> codes_;
  std::latch remaining_;
};

bool stored(const kv_store& store, const std::string& id) {
  auto found = store.get(keyspace::operations, id);
  return found && found->has_value() && store.get(keyspace::active_ops, id)->has_value();
}

TEST(direct_journal, acknowledges_each_transition_after_writing_it) {
  auto kv = make_memory_store();
  direct_journal journal(*kv);
  ASSERT_TRUE(journal.commit(transition("op_1")));
  EXPECT_TRUE(stored(*kv, "op_1"));
}

TEST(group_commit_journal, commit_returns_once_the_transition_is_written) {
  auto kv = make_memory_store();
  group_commit_journal journal(*kv);
  ASSERT_TRUE(journal.commit(transition("op_1")));
  EXPECT_TRUE(stored(*kv, "op_1"));
  EXPECT_EQ(journal.stats().transitions, 1u);
  EXPECT_EQ(journal.stats().syncs, 1u);
}

TEST(group_commit_journal, many_threads_committing_at_once_all_succeed_and_all_data_is_there) {
  constexpr size_t threads = 8;
  constexpr size_t per_thread = 200;
  auto kv = make_memory_store();
  group_commit_journal journal(*kv);
  std::vector<std::thread> writers;
  writers.reserve(threads);
  for (size_t t = 0; t < threads; ++t) {
    writers.emplace_back([&journal, t] {
      for (size_t i = 0; i < per_thread; ++i) {
        auto s = journal.commit(transition("op_" + std::to_string(t) + "_" + std::to_string(i)));
        EXPECT_TRUE(s) << s.message;
      }
    });
  }
  for (auto& writer : writers)
    writer.join();
  for (size_t t = 0; t < threads; ++t)
    for (size_t i = 0; i < per_thread; ++i)
      ASSERT_TRUE(stored(*kv, "op_" + std::to_string(t) + "_" + std::to_string(i)));
  const auto stats = journal.stats();
  EXPECT_EQ(stats.transitions, uint64_t{threads * per_thread});
  EXPECT_LE(stats.syncs, stats.transitions);
  EXPECT_EQ(stats.failures, 0u);
}

TEST(group_commit_journal, transitions_queued_during_a_sync_share_the_next_sync) {
  // 8 threads x 200 submit while the first sync is held at the gate: every
  // one of them must go out in the single sync that follows.
  constexpr size_t threads = 8;
  constexpr size_t per_thread = 200;
  auto memory = make_memory_store();
  test::gated_store kv(*memory, /*open=*/false);
  group_commit_journal journal(kv);
  outcomes done(static_cast<std::ptrdiff_t>(threads * per_thread + 1));
  journal.submit(transition("op_first"), done.record("op_first"));
  kv.wait_until_blocked(1);

  std::vector<std::thread> submitters;
  submitters.reserve(threads);
  for (size_t t = 0; t < threads; ++t) {
    submitters.emplace_back([&journal, &done, t] {
      for (size_t i = 0; i < per_thread; ++i) {
        const std::string id = "op_" + std::to_string(t) + "_" + std::to_string(i);
        journal.submit(transition(id), done.record(id));
      }
    });
  }
  for (auto& submitter : submitters)
    submitter.join();
  kv.open_gate();
  done.wait();

  for (const auto& [id, code] : done.codes()) {
    EXPECT_EQ(code, errc::none) << id;
    EXPECT_TRUE(stored(*memory, id)) << id;
  }
  const auto stats = journal.stats();
  EXPECT_EQ(stats.transitions, uint64_t{threads * per_thread + 1});
  EXPECT_EQ(stats.syncs, 2u);
  EXPECT_LT(stats.syncs, stats.transitions);
  EXPECT_EQ(kv.write_sizes(), (std::vector<size_t>{2, 2 * threads * per_thread}));
}

TEST(group_commit_journal, a_group_never_exceeds_batch_transitions_max) {
  auto memory = make_memory_store();
  test::gated_store kv(*memory, /*open=*/false);
  group_commit_options options;
  options.batch_transitions_max = 3;
  group_commit_journal journal(kv, options);
  outcomes done(11);
  journal.submit(transition("op_first"), done.record("op_first"));
  kv.wait_until_blocked(1);
  for (int i = 0; i < 10; ++i)
    journal.submit(transition("op_" + std::to_string(i)), done.record(std::to_string(i)));
  kv.open_gate();
  done.wait();
  // Two ops per transition: groups of 1, then 3, 3, 3 and the last 1.
  EXPECT_EQ(kv.write_sizes(), (std::vector<size_t>{2, 6, 6, 6, 2}));
  EXPECT_EQ(journal.stats().transitions, 11u);
}

TEST(group_commit_journal, a_group_never_exceeds_batch_bytes_max_but_takes_one_oversized) {
  auto memory = make_memory_store();
  test::gated_store kv(*memory, /*open=*/false);
  group_commit_options options;
  options.batch_bytes_max = 10;
  group_commit_journal journal(kv, options);
  outcomes done(3);
  journal.submit(transition("op_first"), done.record("op_first"));
  kv.wait_until_blocked(1);
  // Each transition is about 30 bytes: over the bound alone, so one per group.
  journal.submit(transition("op_1"), done.record("op_1"));
  journal.submit(transition("op_2"), done.record("op_2"));
  kv.open_gate();
  done.wait();
  EXPECT_EQ(kv.write_sizes(), (std::vector<size_t>{2, 2, 2}));
  EXPECT_EQ(journal.stats().transitions, 3u);
}

TEST(group_commit_journal, a_full_queue_rejects_with_resource_exhausted_before_submit_returns) {
  auto memory = make_memory_store();
  test::gated_store kv(*memory, /*open=*/false);
  group_commit_options options;
  options.queue_transitions_max = 2;
  group_commit_journal journal(kv, options);
  outcomes done(4);
  journal.submit(transition("op_a"), done.record("op_a")); // taken by the writer
  kv.wait_until_blocked(1);
  journal.submit(transition("op_b"), done.record("op_b")); // queued
  journal.submit(transition("op_c"), done.record("op_c")); // queued: queue full

  std::optional<status> refused;
  journal.submit(transition("op_d"), [&refused, &done](status s) {
    refused = s;
    done.record("op_d")(std::move(s));
  });
  ASSERT_TRUE(refused.has_value()) << "the callback must run before submit returns";
  EXPECT_EQ(refused->code, errc::resource_exhausted);
  EXPECT_EQ(journal.stats().rejected, 1u);

  kv.open_gate();
  done.wait();
  EXPECT_EQ(done.codes(), (std::map<std::string, errc>{{"op_a", errc::none},
                                                       {"op_b", errc::none},
                                                       {"op_c", errc::none},
                                                       {"op_d", errc::resource_exhausted}}));
  EXPECT_FALSE(stored(*memory, "op_d"));
}

TEST(group_commit_journal, a_failing_transition_in_a_merged_batch_fails_alone) {
  auto memory = make_memory_store();
  test::gated_store kv(*memory, /*open=*/false);
  kv.poison("op_poison");
  group_commit_journal journal(kv);
  outcomes done(4);
  journal.submit(transition("op_a"), done.record("op_a"));
  kv.wait_until_blocked(1);
  for (const std::string id : {"op_b", "op_poison", "op_d"})
    journal.submit(transition(id), done.record(id));
  kv.open_gate();
  done.wait();

  EXPECT_EQ(done.codes(), (std::map<std::string, errc>{{"op_a", errc::none},
                                                       {"op_b", errc::none},
                                                       {"op_d", errc::none},
                                                       {"op_poison", errc::io_error}}));
  EXPECT_TRUE(stored(*memory, "op_b"));
  EXPECT_TRUE(stored(*memory, "op_d"));
  EXPECT_FALSE(memory->get(keyspace::operations, "op_poison")->has_value());
  const auto stats = journal.stats();
  EXPECT_EQ(stats.transitions, 3u);
  EXPECT_EQ(stats.failures, 1u);
  // op_a alone, the merged three (failed), then each of the three alone.
  EXPECT_EQ(stats.syncs, 5u);
  EXPECT_EQ(kv.write_sizes(), (std::vector<size_t>{2, 6, 2, 2, 2}));
}

TEST(group_commit_journal, destruction_writes_every_queued_transition_first) {
  auto memory = make_memory_store();
  test::gated_store kv(*memory, /*open=*/false);
  auto journal = std::make_unique<group_commit_journal>(kv);
  outcomes done(11);
  journal->submit(transition("op_first"), done.record("op_first"));
  kv.wait_until_blocked(1);
  for (int i = 0; i < 10; ++i)
    journal->submit(transition("op_" + std::to_string(i)), done.record("op_" + std::to_string(i)));

  // The destructor starts while ten transitions wait behind the held sync.
  // (If the gate opened before the destructor began, the assertions below
  // would still hold: the test can weaken, never flake.)
  std::latch destroying(1);
  std::thread destroyer([&journal, &destroying] {
    destroying.count_down();
    journal.reset();
  });
  destroying.wait();
  kv.open_gate();
  destroyer.join();

  // Every callback ran before the destructor returned.
  const auto codes = done.codes();
  ASSERT_EQ(codes.size(), 11u);
  for (const auto& [id, code] : codes) {
    EXPECT_EQ(code, errc::none) << id;
    EXPECT_TRUE(stored(*memory, id)) << id;
  }
}

TEST(group_commit_journal, committed_transitions_survive_reopening_a_rocksdb_store) {
  test::temp_dir dir;
  {
    auto opened = open_rocksdb_store(dir.path());
    ASSERT_TRUE(opened) << opened.error().message;
    group_commit_journal journal(**opened);
    std::vector<std::thread> writers;
    writers.reserve(4);
    for (int t = 0; t < 4; ++t) {
      writers.emplace_back([&journal, t] {
        for (int i = 0; i < 25; ++i)
          EXPECT_TRUE(journal.commit(transition("op_" + std::to_string(t * 100 + i))));
      });
    }
    for (auto& writer : writers)
      writer.join();
  }
  auto reopened = open_rocksdb_store(dir.path());
  ASSERT_TRUE(reopened) << reopened.error().message;
  for (int t = 0; t < 4; ++t)
    for (int i = 0; i < 25; ++i)
      EXPECT_TRUE(stored(**reopened, "op_" + std::to_string(t * 100 + i)));
}

} // namespace
} // namespace airlock::storage
