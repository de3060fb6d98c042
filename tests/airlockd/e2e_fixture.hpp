#pragma once
// The airlockd end-to-end fixture: the real binary as a child process, in a
// temporary data directory, listening on port 0 and reporting the port it
// got (e2e_test.cpp: serve; e2e_cluster_test.cpp: control, worker, TLS).

#include <gtest/gtest.h>

#include <csignal>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/child_process.hpp"
#include "tests/support/environment.hpp"
#include "tests/support/host.hpp"
#include "tests/support/http_client.hpp"

namespace airlock::test {

inline constexpr const char* airlockd_path = AIRLOCK_AIRLOCKD_PATH;
inline constexpr int exit_usage = 2;

/// The sandbox host options of every serve and worker this test starts.
inline const std::vector<std::string> sandbox_host_flags{
  "--instance", "airlockde2e", "--veth-prefix",   "ad",  "--address-pool", "10.206.0.0/16",
  "--uid-base", "900000000",   "--image-size-mb", "1024"};

struct address {
  std::string host;
  uint16_t port = 0;
};

/// A started airlockd and what it printed before "listening on".
struct running {
  std::unique_ptr<child_process> process;
  std::vector<std::string> lines; ///< stdout lines before "listening on"
  address bound;
};

class airlockd_e2e : public ::testing::Test {
protected:
  void TearDown() override {
    // Every child has been stopped (or killed) by now; their btrfs images
    // stay mounted by design until the test unmounts them.
    auto left = unmount_below(dir_.path());
    EXPECT_TRUE(left.empty()) << "still mounted: " << left.front();
    if (test::running_as_root()) {
      auto leftovers = remove_instance_leftovers("airlockde2e");
      EXPECT_TRUE(leftovers.empty()) << "cannot remove " << leftovers.front();
    }
  }

  std::string data_dir() const { return dir_.path() + "/data"; }
  std::string cli_config() const { return dir_.path() + "/cli/config.json"; }

  /// A minimal, explicit environment: nothing from the test runner's own
  /// AIRLOCK_* variables leaks in.
  std::vector<std::string> environment(const std::vector<std::string>& extra = {}) const {
    std::vector<std::string> env{"PATH=/usr/bin:/bin", "HOME=" + dir_.path() + "/home",
                                 "AIRLOCK_CLI_CONFIG=" + cli_config()};
    env.insert(env.end(), extra.begin(), extra.end());
    return env;
  }

  std::unique_ptr<child_process> spawn(const std::vector<std::string>& args,
                                       const std::vector<std::string>& env) {
    std::vector<std::string> argv{airlockd_path};
    argv.insert(argv.end(), args.begin(), args.end());
    std::string stderr_path = dir_.path() + "/stderr." + std::to_string(++spawned_);
    auto process = child_process::spawn(argv, env, stderr_path);
    EXPECT_TRUE(process) << "cannot start " << airlockd_path;
    return process;
  }

  /// Starts `airlockd serve` (with the sandbox host flags) and reads stdout
  /// up to "listening on HOST:PORT".
  running serve(const std::vector<std::string>& args,
                const std::vector<std::string>& extra_env = {}) {
    running out;
    std::vector<std::string> all = args;
    all.insert(all.end(), sandbox_host_flags.begin(), sandbox_host_flags.end());
    out.process = spawn(all, environment(extra_env));
    if (!out.process)
      return out;
    while (auto line = out.process->read_line()) {
      if (auto bound = parse_listening(*line)) {
        out.bound = {bound->first, bound->second};
        return out;
      }
      out.lines.push_back(*line);
    }
    ADD_FAILURE() << "airlockd did not report listening; stderr:\n"
                  << read_file(out.process->stderr_path());
    return out;
  }

  /// The usual first start: fresh data dir, port 0.
  running serve_default() {
    return serve({"serve", "--data-dir", data_dir(), "--listen", "127.0.0.1:0"});
  }

  static int stop(running& daemon) {
    daemon.process->send_signal(SIGTERM);
    auto status = daemon.process->wait_exit();
    EXPECT_TRUE(status.has_value()) << "airlockd did not exit after SIGTERM";
    return status.value_or(-1);
  }

  static size_t count_admin_key_lines(const std::vector<std::string>& lines) {
    size_t n = 0;
    for (const auto& line : lines)
      n += line.rfind("admin key: ", 0) == 0 ? 1 : 0;
    return n;
  }

  temp_dir dir_;
  int spawned_ = 0;
};

/// Tests that run serve or worker, which run sandboxes: root only.
class airlockd_host_e2e : public airlockd_e2e {
protected:
  void SetUp() override {
    AIRLOCK_REQUIRE_ROOT("serve and worker run sandboxes");
    // One at a time on this host: they share the airlockde2e instance.
    lock_ = std::make_unique<test::host_lock>("/run/airlock-airlockd-e2e.lock");
    ASSERT_TRUE(lock_->held());
  }

private:
  std::unique_ptr<test::host_lock> lock_;
};

/// The address of a "PREFIX HOST:PORT" line such as "cluster listening on ...".
inline std::optional<address> parse_address_line(std::string_view line, std::string_view prefix) {
  if (!line.starts_with(prefix))
    return std::nullopt;
  auto bound = parse_listening("listening on " + std::string(line.substr(prefix.size())));
  if (!bound)
    return std::nullopt;
  return address{bound->first, bound->second};
}

/// Reads stdout lines up to "listening on HOST:PORT" (kept in `lines`
/// before it); nullopt when the process ends or the wait times out first.
inline std::optional<address> read_until_listening(child_process& process,
                                                   std::vector<std::string>* lines = nullptr) {
  while (auto line = process.read_line()) {
    if (auto bound = parse_listening(*line))
      return address{bound->first, bound->second};
    if (lines != nullptr)
      lines->push_back(*line);
  }
  return std::nullopt;
}

} // namespace airlock::test
