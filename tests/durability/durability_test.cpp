// Durability under SIGKILL: a child process runs the real engine on RocksDB
// with group commit and prints every acknowledged fact; we kill it at random
// points, reopen the store, and check that every fact it printed is there.
// Finally one run without kills must drive every operation to an end.

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "storage/kv_store.hpp"
#include "storage/operation_store.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/host.hpp"
#include "tests/support/http_client.hpp"

namespace airlock {
namespace {

namespace fs = std::filesystem;
using schema::operation_state;

struct acknowledged {
  std::map<std::string, std::pair<uint64_t, operation_state>> states; ///< id -> newest
  std::map<std::string, std::string> created;                         ///< key -> id
  size_t lines = 0;
};

bool absorb(const std::string& line, acknowledged& facts) {
  std::istringstream in(line);
  std::string word;
  in >> word;
  if (word == "created") {
    std::string key, id;
    in >> key >> id;
    facts.created[key] = id;
  } else if (word == "state") {
    std::string id, state;
    uint64_t sequence = 0;
    in >> id >> sequence >> state;
    auto& newest = facts.states[id];
    if (sequence >= newest.first)
      newest = {sequence, *schema::parse_operation_state(state)};
  } else {
    return word == "done";
  }
  ++facts.lines;
  return false;
}

void expect_all_acknowledged_facts_stored(const std::string& state_dir, const acknowledged& facts,
                                          int round) {
  auto opened = storage::open_rocksdb_store(state_dir);
  ASSERT_TRUE(opened) << opened.error().message;
  storage::operation_store operations{**opened};
  for (const auto& [id, newest] : facts.states) {
    auto record = operations.get(id);
    ASSERT_TRUE(record && *record) << "round " << round << ": acknowledged " << id << " is gone";
    EXPECT_GE((*record)->sequence, newest.first)
      << "round " << round << ": " << id << " lost an acknowledged transition";
    if (schema::is_terminal(newest.second)) {
      EXPECT_EQ((*record)->state, newest.second) << "round " << round << ": " << id;
    }
  }
  for (const auto& [key, id] : facts.created) {
    auto found = operations.find_by_idempotency_key("tenant", key);
    ASSERT_TRUE(found && *found) << "round " << round << ": idempotency key " << key << " lost";
    EXPECT_EQ(**found, id);
  }
}

class durability : public ::testing::Test {
protected:
  void SetUp() override {
    char pattern[] = "/var/tmp/airlock-durability-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    root_ = pattern;
    fs::create_directories(root_ / "effects");
  }
  void TearDown() override { fs::remove_all(root_); }

  std::unique_ptr<test::child_process> start_writer(const std::string& batch) const {
    std::vector<std::string> argv{AIRLOCK_DURABILITY_WRITER,     (root_ / "state").string(),
                                  (root_ / "effects").string(),  batch,
                                  std::to_string(ops_per_round), std::to_string(steps)};
    auto writer =
      test::child_process::spawn(argv, {"PATH=/usr/bin:/bin"}, (root_ / "writer.stderr").string());
    EXPECT_TRUE(writer) << "cannot start " << AIRLOCK_DURABILITY_WRITER;
    return writer;
  }

  fs::path root_;
  static constexpr int rounds = 40;
  static constexpr int ops_per_round = 20;
  static constexpr int steps = 3;
};

TEST_F(durability, every_acknowledged_transition_survives_kill_9_and_every_operation_ends) {
  auto seed = std::random_device{}();
  if (auto* fixed = std::getenv("AIRLOCK_DURABILITY_SEED"))
    seed = static_cast<unsigned>(std::stoul(fixed));
  std::printf("durability seed: %u (set AIRLOCK_DURABILITY_SEED to replay)\n", seed);
  std::mt19937 random(seed);
  acknowledged facts;
  int killed_mid_flight = 0;
  for (int round = 0; round < rounds; ++round) {
    // Up to most of one round's lines: early kills hit
    // start-up and recovery, late ones the middle of the workload.
    auto kill_after = std::uniform_int_distribution<size_t>(0, ops_per_round * (steps + 1))(random);
    auto writer = start_writer("r" + std::to_string(round));
    ASSERT_TRUE(writer);
    bool done = false;
    for (size_t read = 0; read < kill_after && !done; ++read) {
      auto line = writer->read_line(std::chrono::seconds(60));
      if (!line)
        break;
      done = absorb(*line, facts);
    }
    writer->send_signal(SIGKILL);
    writer->wait_exit();
    killed_mid_flight += done ? 0 : 1;
    expect_all_acknowledged_facts_stored((root_ / "state").string(), facts, round);
    if (HasFatalFailure())
      return;
  }
  EXPECT_GE(killed_mid_flight, rounds / 2) << "too few kills landed mid-workload to mean much";

  auto final_run = start_writer("-");
  ASSERT_TRUE(final_run);
  bool done = false;
  while (!done) {
    auto line = final_run->read_line(std::chrono::seconds(120));
    ASSERT_TRUE(line) << "the recovery run stopped before every operation ended; stderr:\n"
                      << test::read_file(final_run->stderr_path());
    done = absorb(*line, facts);
  }
  EXPECT_EQ(final_run->wait_exit(), 0);
  expect_all_acknowledged_facts_stored((root_ / "state").string(), facts, rounds);

  auto opened = storage::open_rocksdb_store((root_ / "state").string());
  ASSERT_TRUE(opened);
  storage::operation_store operations{**opened};
  EXPECT_TRUE(operations.load_active()->empty()) << "an operation never ended";
  size_t succeeded = 0;
  for (const auto& [key, id] : facts.created) {
    auto record = operations.get(id);
    ASSERT_TRUE(record && *record);
    EXPECT_EQ((*record)->state, operation_state::succeeded)
      << id << ": "
      << ((*record)->error ? (*record)->error->code + " " + (*record)->error->message : "");
    succeeded += (*record)->state == operation_state::succeeded;
    for (int step = 0; step < steps; ++step)
      EXPECT_TRUE(fs::exists(root_ / "effects" / (id + "-" + std::to_string(step))))
        << id << " succeeded without step " << step << " taking effect";
  }
  std::printf("rounds: %d, killed mid-flight: %d, acknowledged lines: %zu, operations: %zu "
              "succeeded\n",
              rounds, killed_mid_flight, facts.lines, succeeded);
}

} // namespace
} // namespace airlock
