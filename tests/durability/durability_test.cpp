// Durability under SIGKILL: a child process runs the real engine on RocksDB
// with group commit and prints every acknowledged fact; we kill it at random
// points, reopen the store, and check that every fact it printed is there.
// Finally one run without kills must drive every operation to an end.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

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

extern char** environ;

namespace airlock {
namespace {

namespace fs = std::filesystem;
using schema::operation_state;

/// A child process whose stdout we read line by line, with bounded waits.
class child_process {
public:
  explicit child_process(const std::vector<std::string>& argv) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0)
      throw std::runtime_error("pipe2 failed");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    std::vector<char*> args;
    for (const auto& arg : argv)
      args.push_back(const_cast<char*>(arg.c_str()));
    args.push_back(nullptr);
    if (posix_spawn(&pid_, args[0], &actions, nullptr, args.data(), environ) != 0)
      throw std::runtime_error("posix_spawn failed for " + argv[0]);
    posix_spawn_file_actions_destroy(&actions);
    ::close(fds[1]);
    fd_ = fds[0];
  }

  ~child_process() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      wait();
    }
    ::close(fd_);
  }

  /// The next whole line, or nullopt at end of output or after `timeout`.
  std::optional<std::string> read_line(std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      if (auto end = buffer_.find('\n'); end != std::string::npos) {
        auto line = buffer_.substr(0, end);
        buffer_.erase(0, end + 1);
        return line;
      }
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0)
        return std::nullopt;
      pollfd pfd{fd_, POLLIN, 0};
      if (::poll(&pfd, 1, static_cast<int>(left.count())) <= 0)
        continue;
      char chunk[4096];
      auto n = ::read(fd_, chunk, sizeof(chunk));
      if (n <= 0)
        return std::nullopt;
      buffer_.append(chunk, static_cast<size_t>(n));
    }
  }

  void kill_hard() { ::kill(pid_, SIGKILL); }

  /// Reaps the child; its exit status as waitpid reports it.
  int wait() {
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }

private:
  pid_t pid_ = -1;
  int fd_ = -1;
  std::string buffer_;
};

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

void expect_all_acknowledged_facts_stored(const std::string& state_dir,
                                          const acknowledged& facts, int round) {
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

  std::vector<std::string> writer_args(const std::string& batch) const {
    return {AIRLOCK_DURABILITY_WRITER, (root_ / "state").string(), (root_ / "effects").string(),
            batch, std::to_string(ops_per_round), std::to_string(steps)};
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
    child_process writer(writer_args("r" + std::to_string(round)));
    bool done = false;
    for (size_t read = 0; read < kill_after && !done; ++read) {
      auto line = writer.read_line(std::chrono::seconds(60));
      if (!line)
        break;
      done = absorb(*line, facts);
    }
    writer.kill_hard();
    writer.wait();
    killed_mid_flight += done ? 0 : 1;
    expect_all_acknowledged_facts_stored((root_ / "state").string(), facts, round);
    if (HasFatalFailure())
      return;
  }
  EXPECT_GE(killed_mid_flight, rounds / 2) << "too few kills landed mid-workload to mean much";

  child_process final_run(writer_args("-"));
  bool done = false;
  while (!done) {
    auto line = final_run.read_line(std::chrono::seconds(120));
    ASSERT_TRUE(line) << "the recovery run stopped before every operation ended";
    done = absorb(*line, facts);
  }
  auto status = final_run.wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
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
      << id << ": " << ((*record)->error ? (*record)->error->code + " " + (*record)->error->message : "");
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
