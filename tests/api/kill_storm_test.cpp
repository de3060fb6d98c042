// The kill storm: `airlockd serve` under a load of creates and deletes,
// killed with SIGKILL at a random moment and restarted on the same data
// directory, round after round. Every restart must come up (no process of the
// killed run may keep the data directory's lock or its port), every operation
// the API acknowledged must end, and once everything is deleted nothing may be
// left on the host.
//
// AIRLOCK_KILL_STORM_ROUNDS sets the rounds (default 12; docs/benchmarks.md
// records a run of 50); AIRLOCK_KILL_STORM_SEED the random kill moments
// (default: from the clock, printed so that a failure can be replayed).

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/api/api_support.hpp"
#include "tests/support/wait.hpp"

namespace airlock::test {
namespace {

using nlohmann::json;

constexpr const char* airlockd_path = AIRLOCK_AIRLOCKD_PATH;
/// Sandboxes the load keeps at once: enough that a kill usually lands in the
/// middle of some start, few enough for a two-core host.
constexpr size_t live_max = 3;

uint64_t env_number(const char* name, uint64_t fallback) {
  const char* text = std::getenv(name);
  return text != nullptr && *text != '\0' ? std::strtoull(text, nullptr, 10) : fallback;
}

/// Creates and deletes sandboxes until told to stop; keeps the ids of the
/// operations the API acknowledged (202).
class churn {
public:
  explicit churn(api_client api) : api_(std::move(api)) {}

  void run(const std::atomic<bool>& stop) {
    while (!stop) {
      if (live_.size() < live_max) {
        auto created =
          api_.call("POST", "/v1/sandboxes", small_spec().dump(), {}, milliseconds(10'000));
        if (created.status == 202) {
          acknowledge(created.json.value("operation_id", ""));
          live_.emplace_back(created.json.value("sandbox_id", ""),
                             created.json.value("operation_id", ""));
        }
        continue;
      }
      // The oldest goes once its create has ended (a delete would win over
      // a create still running, which is not what this load is about).
      auto create = api_.call("GET", "/v1/operations/" + live_.front().second + "?wait=1", {}, {},
                              milliseconds(10'000));
      const std::string state = create.json.is_object() ? create.json.value("state", "") : "";
      if (create.status == 200 && (state == "pending" || state == "running"))
        continue;
      auto deleted =
        api_.call("DELETE", "/v1/sandboxes/" + live_.front().first, {}, {}, milliseconds(10'000));
      if (deleted.status == 202)
        acknowledge(deleted.json.value("operation_id", ""));
      live_.erase(live_.begin());
    }
  }

  std::vector<std::string> take_acknowledged() {
    std::lock_guard lock(mutex_);
    return std::exchange(acknowledged_, {});
  }

private:
  void acknowledge(const std::string& operation_id) {
    std::lock_guard lock(mutex_);
    acknowledged_.push_back(operation_id);
  }

  api_client api_;
  std::vector<std::pair<std::string, std::string>> live_; ///< sandbox id, create operation id
  std::mutex mutex_;
  std::vector<std::string> acknowledged_;
};

/// Every sandbox the API lists, page after page.
std::vector<json> all_sandboxes(const api_client& api) {
  std::vector<json> out;
  std::string cursor;
  do {
    auto page = api.get("/v1/sandboxes?limit=100" + (cursor.empty() ? "" : "&cursor=" + cursor));
    if (page.status != 200) {
      ADD_FAILURE() << "list answered " << page.status << ": " << page.body;
      break;
    }
    for (const auto& item : page.json.value("items", json::array()))
      out.push_back(item);
    cursor = page.json.value("next_cursor", json(nullptr)).is_string()
               ? page.json["next_cursor"].get<std::string>()
               : "";
  } while (!cursor.empty());
  return out;
}

/// The airlockd processes (by image) among those holding files under `dir`.
std::vector<pid_t> airlockds_using(const std::string& dir) {
  auto holders = processes_holding_files_under(dir);
  auto daemons = processes_running(airlockd_path);
  std::vector<pid_t> both;
  std::set_intersection(holders.begin(), holders.end(), daemons.begin(), daemons.end(),
                        std::back_inserter(both));
  return both;
}

/// "pid (state comm, waiting in wchan)" of each, for a failure message.
std::string describe_processes(const std::vector<pid_t>& pids) {
  std::string out;
  for (pid_t pid : pids) {
    const std::string proc = "/proc/" + std::to_string(pid);
    std::string stat = read_file(proc + "/stat");
    // After "pid (comm) " comes the one-letter state.
    const size_t comm_end = stat.rfind(')');
    const std::string state = comm_end == std::string::npos || comm_end + 2 >= stat.size()
                                ? "?"
                                : stat.substr(comm_end + 2, 1);
    out += std::to_string(pid) + " (" + state + " " + read_file(proc + "/comm") + ", waiting in "
           + read_file(proc + "/wchan") + ") ";
  }
  return out;
}

std::vector<std::string> interfaces_named(const std::string& prefix) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/sys/class/net", ec))
    if (entry.path().filename().string().rfind(prefix, 0) == 0)
      out.push_back(entry.path().filename().string());
  return out;
}

/// Sandbox cgroups left under the instance's parent in any hierarchy.
std::vector<std::string> sandbox_cgroups(const std::string& instance) {
  namespace fs = std::filesystem;
  std::vector<fs::path> parents{fs::path("/sys/fs/cgroup") / instance};
  std::error_code ec;
  for (const auto& hierarchy : fs::directory_iterator("/sys/fs/cgroup", ec))
    parents.push_back(hierarchy.path() / instance);
  std::vector<std::string> out;
  for (const auto& parent : parents)
    for (const auto& child : fs::directory_iterator(parent, ec))
      if (child.is_directory(ec))
        out.push_back(child.path().string());
  return out;
}

TEST(kill_storm, every_restart_comes_up_every_acknowledged_operation_ends_nothing_is_left) {
  AIRLOCK_REQUIRE_ROOT("airlockd serve runs sandboxes (namespaces, cgroups, veths, btrfs)");
  const uint64_t rounds = env_number("AIRLOCK_KILL_STORM_ROUNDS", 12);
  const uint64_t seed =
    env_number("AIRLOCK_KILL_STORM_SEED",
               static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count()));
  std::printf("kill storm: %llu rounds, AIRLOCK_KILL_STORM_SEED=%llu\n",
              static_cast<unsigned long long>(rounds), static_cast<unsigned long long>(seed));
  std::mt19937_64 random(seed);
  // Kills land from right after the load starts to well into a start.
  std::uniform_int_distribution<int> kill_after_ms(20, 1500);

  serve_process::options options;
  options.instance = "killstorm";
  options.veth_prefix = "kx";
  options.address_pool = "10.214.0.0/16";
  options.uid_base = 1'300'000'000;
  std::string error;
  auto serve = serve_process::start(options, error);
  ASSERT_NE(serve, nullptr) << error;
  const std::string key = serve->admin_key();
  // The first create builds the template: done once, before the storm.
  api_client(serve->host(), serve->port(), key).create_running();

  uint64_t operations = 0;
  uint64_t failed_operations = 0;
  std::map<std::string, uint64_t> failure_codes;
  for (uint64_t round = 1; round <= rounds; ++round) {
    SCOPED_TRACE("round " + std::to_string(round) + ", seed " + std::to_string(seed));
    churn load(api_client(serve->host(), serve->port(), key));
    std::atomic<bool> stop{false};
    std::thread driver([&] { load.run(stop); });
    const uint16_t killed_port = serve->port();
    const auto delay = std::chrono::milliseconds(kill_after_ms(random));
    // The kill moment is the point of the test: a wait on purpose, not a
    // synchronisation.
    std::this_thread::sleep_for(delay);
    ASSERT_TRUE(serve->restart(serve_process::stop_kind::sigkill, error))
      << "restart after a kill " << delay.count() << " ms into the load failed: " << error;
    stop = true;
    driver.join();

    // Nothing of the killed run answers on its port (the new one listens on
    // a port of its own; should the kernel hand it the same, nothing is said).
    if (serve->port() != killed_port) {
      EXPECT_FALSE(loopback_port_accepts(killed_port))
        << "the killed airlockd's port " << killed_port << " still accepts connections";
    }
    // A child of the killed run that had not yet exec'd dies of its death
    // signal or of its worker's closed socket, but exit is asynchronous: it
    // is given a bound to be gone, and named when it is not.
    const bool only_the_new_one =
      wait_for([&] { return airlockds_using(serve->data_dir()).size() == 1U; }, wait_max,
               std::chrono::milliseconds(20));
    EXPECT_TRUE(only_the_new_one)
      << "more than the new airlockd holds files of the data directory: "
      << describe_processes(airlockds_using(serve->data_dir()));
    api_client api(serve->host(), serve->port(), key);
    for (const auto& operation_id : load.take_acknowledged()) {
      auto ended = api.wait_operation(operation_id);
      const std::string state = ended.value("state", "");
      EXPECT_TRUE(state == "succeeded" || state == "failed" || state == "cancelled")
        << "acknowledged operation " << operation_id << " did not end: " << ended.dump();
      ++operations;
      if (state == "failed") {
        ++failed_operations;
        ++failure_codes[ended.value("kind", "?") + ": "
                        + ended.value("error", json::object()).value("code", "?")];
      }
    }
    if (HasFatalFailure() || HasFailure())
      break;
  }
  std::printf("kill storm: %llu acknowledged operations ended, %llu of them failed\n",
              static_cast<unsigned long long>(operations),
              static_cast<unsigned long long>(failed_operations));
  for (const auto& [what, count] : failure_codes)
    std::printf("kill storm:   failed %s x%llu\n", what.c_str(),
                static_cast<unsigned long long>(count));

  // Everything goes; then nothing of it may be left.
  api_client api(serve->host(), serve->port(), key);
  for (const auto& sandbox : all_sandboxes(api)) {
    if (sandbox.value("state", "") == "destroyed")
      continue;
    auto deleted = api.call("DELETE", "/v1/sandboxes/" + sandbox.value("id", std::string()));
    ASSERT_EQ(deleted.status, 202) << sandbox.dump() << ": " << deleted.body;
    auto ended = api.wait_operation(deleted.json.value("operation_id", ""));
    EXPECT_EQ(ended.value("state", ""), "succeeded") << ended.dump();
  }
  for (const auto& sandbox : all_sandboxes(api))
    EXPECT_EQ(sandbox.value("state", ""), "destroyed") << sandbox.dump();
  EXPECT_TRUE(interfaces_named(options.veth_prefix).empty());
  // No sandbox's root filesystem (a btrfs subvolume) is left either.
  const std::string roots = serve->data_dir() + "/rootfs/sandboxes";
  ASSERT_TRUE(std::filesystem::is_directory(roots)) << roots;
  EXPECT_TRUE(std::filesystem::is_empty(roots)) << "a sandbox's root is left in " << roots;
  EXPECT_TRUE(sandbox_cgroups(options.instance).empty());
  const std::string data_dir = serve->data_dir();
  ASSERT_TRUE(serve->stop()) << "airlockd did not stop";
  EXPECT_TRUE(processes_holding_files_under(data_dir).empty())
    << "a process still holds files under the data directory after the last stop";
}

} // namespace
} // namespace airlock::test
