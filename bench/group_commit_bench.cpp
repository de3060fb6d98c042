// Durable transitions per second on a real RocksDB store: group_commit_journal
// against one sync per transition (serialised), and against RocksDB's own
// write-group merging when threads write synced batches concurrently.
//
//   group_commit_bench [--dir DIR] [--seconds S] [--warmup S] [--writers 1,8,64]
//                      [--extra-sync-us N] [--help]
//
// DIR must be on the filesystem the data directory would use: the number
// measured is mostly that disk's fsync latency. Default: /var/tmp.
// --extra-sync-us models a slower disk: every synced write is followed by N
// microseconds of sleep before it returns. Numbers taken with it are a model,
// not a measurement, and the RocksDB-concurrent column is then not shown (the
// sleep would happen outside RocksDB's write group and overlap freely).
// Bad flags: a one-line message and status 2 (bench/bench_flags.hpp).

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_flags.hpp"
#include "schema/operation.hpp"
#include "storage/commit_journal.hpp"
#include "storage/kv_store.hpp"
#include "storage/operation_store.hpp"

namespace airlock::bench {
namespace {

using clock_type = std::chrono::steady_clock;

struct bench_options {
  std::string dir = "/var/tmp"; ///< parent of the scratch databases
  double seconds = 3.0;         ///< measured time per cell
  double warmup_seconds = 0.5;  ///< unmeasured time before it
  std::vector<int> writers{1, 8, 64};
  int extra_sync_us = 0; ///< modelled extra latency per synced write
};

enum class mode { group_commit, serialised, rocksdb_concurrent };

struct cell_result {
  double transitions_per_s = 0;
  double syncs_per_s = 0; ///< group commit only: synced writes the journal issued
};

[[noreturn]] void fail(const std::string& what) {
  std::cerr << "group_commit_bench: " << what << "\n";
  std::exit(1);
}

/// Parses the flags into `options`; nullopt to run, else the status to exit with.
std::optional<int> parse_options(int argc, char** argv, bench_options& options) {
  bench_flags flags{"group_commit_bench",
                    "Durable transitions per second on a real RocksDB store: group commit vs one\n"
                    "sync per transition vs RocksDB's own write groups."};
  flags.text("dir", options.dir, "DIR", "parent of the scratch databases (the disk measured)")
    .decimal("seconds", options.seconds, "measured time per cell", 0.001, 3600)
    .decimal("warmup", options.warmup_seconds, "unmeasured time before each cell", 0, 3600)
    .integers("writers", options.writers, "concurrent writers, one row each", 1, 4096)
    .integer("extra-sync-us", options.extra_sync_us,
             "model a slower disk: sleep N us after every synced write (a model)", 0, 1'000'000);
  return flags.parse(argc, argv);
}

/// A running sandbox.create operation as the engine persists it mid-way.
schema::operation_record realistic_record() {
  schema::operation_record r;
  r.id = "op_01HZX3K9Q2M4V7W8Y0A1B2C3D4";
  r.kind = "sandbox.create";
  r.target_id = "sb_01HZX3K9Q2M4V7W8Y0A1B2C3D5";
  r.tenant_id = "tn_acme";
  r.state = schema::operation_state::running;
  r.created_at_ms = 1'717'000'000'000;
  r.updated_at_ms = 1'717'000'000'250;
  r.idempotency_key = "";
  r.params_json = R"({"template":"python-3.12","cpu_millis":1000,"memory_mb":512,)"
                  R"("metadata":{"team":"search"}})";
  r.step = 2;
  r.step_started = true;
  r.step_data = "worker=wk_7;rootfs=btrfs";
  r.deadline_ms = 1'717'000'600'000;
  r.attempts = 1;
  return r;
}

/// A fresh RocksDB store in its own directory under `parent`, deleted after.
class scratch_store {
public:
  explicit scratch_store(const std::string& parent) {
    std::string pattern = parent + "/airlock_bench_XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr)
      fail("cannot create a directory under " + parent);
    path_ = pattern;
    auto opened = storage::open_rocksdb_store(path_);
    if (!opened)
      fail(opened.error().message);
    store_ = std::move(*opened);
  }
  ~scratch_store() {
    store_.reset();
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  scratch_store(const scratch_store&) = delete;
  scratch_store& operator=(const scratch_store&) = delete;
  storage::kv_store& store() { return *store_; }

private:
  std::string path_;
  std::unique_ptr<storage::kv_store> store_;
};

/// Forwards to `inner`; each synced write then sleeps `extra`, as if the
/// disk's flush took that much longer. Only for --extra-sync-us.
class slow_sync_store final : public storage::kv_store {
public:
  slow_sync_store(storage::kv_store& inner, std::chrono::microseconds extra)
      : inner_(inner), extra_(extra) {}

  result<std::optional<std::string>> get(storage::keyspace space,
                                         std::string_view key) const override {
    return inner_.get(space, key);
  }
  status put(storage::keyspace space, std::string_view key, std::string_view value,
             storage::durability how) override {
    return delayed(how, inner_.put(space, key, value, how));
  }
  status write(const storage::write_batch& batch, storage::durability how) override {
    return delayed(how, inner_.write(batch, how));
  }
  status scan(storage::keyspace space, std::string_view prefix, std::string_view start_after,
              const storage::scan_visitor& visit) const override {
    return inner_.scan(space, prefix, start_after, visit);
  }
  std::unique_ptr<storage::kv_snapshot> snapshot() const override { return inner_.snapshot(); }

private:
  status delayed(storage::durability how, status outcome) const {
    if (how == storage::durability::synced)
      std::this_thread::sleep_for(extra_);
    return outcome;
  }

  storage::kv_store& inner_;
  std::chrono::microseconds extra_;
};

/// What one writer thread does to make one transition durable, per mode.
class committer {
public:
  committer(storage::kv_store& store, mode how) : store_(store), how_(how) {
    if (how == mode::group_commit)
      journal_ = std::make_unique<storage::group_commit_journal>(store);
  }

  status commit(const storage::write_batch& batch) {
    switch (how_) {
      case mode::group_commit: return journal_->commit(batch);
      case mode::serialised: {
        // Truly one sync per transition: nobody else writes meanwhile.
        std::lock_guard lock(serial_);
        return store_.write(batch, storage::durability::synced);
      }
      case mode::rocksdb_concurrent: return store_.write(batch, storage::durability::synced);
    }
    return make_status(errc::internal, "unknown mode");
  }

  uint64_t syncs() const { return journal_ ? journal_->stats().syncs : 0; }

private:
  storage::kv_store& store_;
  mode how_;
  std::mutex serial_;
  std::unique_ptr<storage::group_commit_journal> journal_;
};

/// Commits transitions of fresh operation ids until `stop`, counting them.
void writer_loop(committer& target, int writer, const std::atomic<bool>& stop,
                 std::atomic<uint64_t>& done) {
  auto record = realistic_record();
  const std::string id_prefix = "op_" + std::to_string(writer) + "_";
  for (uint64_t n = 0; !stop.load(std::memory_order_relaxed); ++n) {
    record.id = id_prefix + std::to_string(n);
    record.sequence = n;
    storage::write_batch batch;
    storage::operation_store::stage_put(batch, record); // operations + active_ops
    if (auto s = target.commit(batch); !s)
      fail("commit failed: " + s.message);
    done.fetch_add(1, std::memory_order_relaxed);
  }
}

uint64_t total(const std::vector<std::atomic<uint64_t>>& counters) {
  uint64_t sum = 0;
  for (const auto& counter : counters)
    sum += counter.load(std::memory_order_relaxed);
  return sum;
}

cell_result run_cell(const bench_options& options, mode how, int writers) {
  scratch_store scratch(options.dir);
  slow_sync_store slow(scratch.store(), std::chrono::microseconds(options.extra_sync_us));
  storage::kv_store& store =
    options.extra_sync_us > 0 ? static_cast<storage::kv_store&>(slow) : scratch.store();
  committer target(store, how);
  std::atomic<bool> stop{false};
  std::vector<std::atomic<uint64_t>> done(static_cast<size_t>(writers));
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(writers));
  for (int w = 0; w < writers; ++w)
    threads.emplace_back(
      [&target, &stop, &done, w] { writer_loop(target, w, stop, done[size_t(w)]); });

  std::this_thread::sleep_for(std::chrono::duration<double>(options.warmup_seconds));
  const auto start = clock_type::now();
  const uint64_t transitions_before = total(done);
  const uint64_t syncs_before = target.syncs();
  std::this_thread::sleep_for(std::chrono::duration<double>(options.seconds));
  const uint64_t transitions_after = total(done);
  const uint64_t syncs_after = target.syncs();
  const double elapsed = std::chrono::duration<double>(clock_type::now() - start).count();
  stop = true;
  for (auto& thread : threads)
    thread.join();
  return {double(transitions_after - transitions_before) / elapsed,
          double(syncs_after - syncs_before) / elapsed};
}

/// One actor-style writer: like an operation actor, it keeps one transition in
/// flight and submits the next from the acknowledgement, with no thread of its
/// own (acknowledgements run on the journal's writer thread).
struct async_writer {
  storage::commit_journal* journal = nullptr;
  const std::atomic<bool>* stop = nullptr;
  std::atomic<uint64_t>* done = nullptr;
  schema::operation_record record;
  std::string id_prefix;
  uint64_t next = 0;

  void submit_next() {
    record.id = id_prefix + std::to_string(next);
    record.sequence = next++;
    storage::write_batch batch;
    storage::operation_store::stage_put(batch, record);
    journal->submit(std::move(batch), [this](status result) {
      if (!result)
        fail("commit failed: " + result.message);
      done->fetch_add(1, std::memory_order_relaxed);
      if (!stop->load(std::memory_order_relaxed))
        submit_next();
    });
  }
};

cell_result run_async_cell(const bench_options& options, int writers) {
  scratch_store scratch(options.dir);
  slow_sync_store slow(scratch.store(), std::chrono::microseconds(options.extra_sync_us));
  storage::kv_store& store =
    options.extra_sync_us > 0 ? static_cast<storage::kv_store&>(slow) : scratch.store();
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> done{0};
  // Declared before the journal: its destructor drains the queue and runs the
  // last acknowledgements, which still touch the writers.
  std::vector<async_writer> states(static_cast<size_t>(writers));
  auto journal = std::make_unique<storage::group_commit_journal>(store);
  for (int w = 0; w < writers; ++w) {
    auto& state = states[size_t(w)];
    state = async_writer{
      journal.get(), &stop, &done, realistic_record(), "op_" + std::to_string(w) + "_", 0};
  }
  for (auto& state : states)
    state.submit_next();
  std::this_thread::sleep_for(std::chrono::duration<double>(options.warmup_seconds));
  const auto start = clock_type::now();
  const uint64_t before = done.load();
  const uint64_t syncs_before = journal->stats().syncs;
  std::this_thread::sleep_for(std::chrono::duration<double>(options.seconds));
  const uint64_t after = done.load();
  const uint64_t syncs_after = journal->stats().syncs;
  const double elapsed = std::chrono::duration<double>(clock_type::now() - start).count();
  stop = true;
  journal.reset();
  return {double(after - before) / elapsed, double(syncs_after - syncs_before) / elapsed};
}

void print_header(const bench_options& options) {
  std::printf("group_commit_bench: dir %s, %.1f s per cell after %.1f s warm-up, %zu-byte "
              "operation record per transition (operations + active_ops)\n",
              options.dir.c_str(), options.seconds, options.warmup_seconds,
              schema::encode(realistic_record()).size());
  if (options.extra_sync_us > 0)
    std::printf("MODEL, not a measurement: every synced write sleeps %d us more\n",
                options.extra_sync_us);
  std::printf("\n");
  std::printf("%7s | %14s %9s %9s %10s | %15s | %9s | %17s | %14s %9s %9s\n", "writers",
              "group tx/s", "syncs/s", "tx/sync", "latency ms", "serialised tx/s", "group/ser",
              "rocksdb conc tx/s", "actor-style tx/s", "tx/sync", "async/ser");
  std::printf("%s\n", std::string(148, '-').c_str());
}

void print_row(int writers, const cell_result& group, const cell_result& serialised,
               const cell_result* concurrent, const cell_result& async) {
  const double per_sync = group.syncs_per_s > 0 ? group.transitions_per_s / group.syncs_per_s : 0.0;
  // Every writer always has one commit in flight, so by Little's law the mean
  // commit latency is writers / throughput.
  const double latency_ms =
    group.transitions_per_s > 0 ? 1000.0 * writers / group.transitions_per_s : 0.0;
  const double ratio =
    serialised.transitions_per_s > 0 ? group.transitions_per_s / serialised.transitions_per_s : 0.0;
  std::printf("%7d | %14.0f %9.0f %9.1f %10.2f | %15.0f | %8.1fx | ", writers,
              group.transitions_per_s, group.syncs_per_s, per_sync, latency_ms,
              serialised.transitions_per_s, ratio);
  if (concurrent)
    std::printf("%17.0f | ", concurrent->transitions_per_s);
  else
    std::printf("%17s | ", "n/a (model)");
  const double async_per_sync =
    async.syncs_per_s > 0 ? async.transitions_per_s / async.syncs_per_s : 0.0;
  const double async_ratio =
    serialised.transitions_per_s > 0 ? async.transitions_per_s / serialised.transitions_per_s : 0.0;
  std::printf("%16.0f %9.1f %8.1fx\n", async.transitions_per_s, async_per_sync, async_ratio);
  std::fflush(stdout);
}

} // namespace
} // namespace airlock::bench

int main(int argc, char** argv) {
  using namespace airlock::bench;
  bench_options options;
  if (auto status = parse_options(argc, argv, options))
    return *status;
  print_header(options);
  for (int writers : options.writers) {
    const auto group = run_cell(options, mode::group_commit, writers);
    const auto serialised = run_cell(options, mode::serialised, writers);
    // Not run in the model: the sleep would fall outside RocksDB's write group.
    cell_result concurrent{};
    if (options.extra_sync_us == 0)
      concurrent = run_cell(options, mode::rocksdb_concurrent, writers);
    const auto async = run_async_cell(options, writers);
    print_row(writers, group, serialised, options.extra_sync_us == 0 ? &concurrent : nullptr,
              async);
  }
  return 0;
}
