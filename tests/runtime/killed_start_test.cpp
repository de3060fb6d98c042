// A worker killed (SIGKILL) at each step of a sandbox's start, then a new
// runtime on the same state directory: nothing of the killed run may be left
// running or holding its files, and the restart cleans (or adopts and then
// destroys) what the start had made.

#include <sys/file.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "sandbox_fixture.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/host.hpp"
#include "worker/runtime/net.hpp"

namespace airlock::worker::testing {
namespace {

namespace fs = std::filesystem;
using airlock::test::child_process;

constexpr const char* parker_path = AIRLOCK_START_PARKER;

/// "listening PORT" or "parked STEP": the value after the word, or "" when the
/// parker said something else (its failure) or nothing in time.
std::string read_said(child_process& parker, const std::string& word, std::string& transcript) {
  while (auto line = parker.read_line()) {
    transcript += *line + "\n";
    if (line->rfind(word + " ", 0) == 0)
      return line->substr(word.size() + 1);
  }
  return "";
}

std::vector<std::string> all_steps() {
  std::vector<std::string> steps(std::begin(start_steps), std::end(start_steps));
  steps.emplace_back("started");
  return steps;
}

class killed_start : public runtime_test, public ::testing::WithParamInterface<std::string> {};

TEST_P(killed_start, a_restart_finds_nothing_of_the_killed_run_but_what_it_cleans) {
  const std::string step = GetParam();
  busybox_rootfs rootfs;
  temp_dir data("airlock-killed-start");
  // The parker's stderr, which it hands to the sandbox init as its stderr:
  // outside the data directory, where a started init may keep it open.
  temp_dir logs("airlock-killed-start-log");
  const std::string parker_log = logs.path() + "/parker.log";
  const std::string state_dir = data.path() + "/runtime";
  const std::string lock_file = data.path() + "/state.lock";
  const std::string id = unique_id("ks-" + step);

  auto parker = child_process::spawn({parker_path, state_dir, lock_file, rootfs.path(), id, step},
                                     {"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}, parker_log);
  ASSERT_NE(parker, nullptr);
  std::string transcript;
  const std::string port_text = read_said(*parker, "listening", transcript);
  ASSERT_FALSE(port_text.empty()) << transcript << airlock::test::read_file(parker_log);
  const auto port = static_cast<uint16_t>(std::stoi(port_text));
  ASSERT_EQ(read_said(*parker, "parked", transcript), step)
    << transcript << airlock::test::read_file(parker_log);

  // While parked the start's child (if any) lets go of everything of the
  // worker's by itself, as its first step (which it may not have reached
  // yet when the worker parks: a bounded wait): then only the worker has
  // the lock file open.
  EXPECT_TRUE(airlock::test::wait_for(
    [&] { return airlock::test::processes_holding_files_under(lock_file).size() == 1U; }))
    << "a process other than the worker holds its lock file while parked at " << step;

  parker->send_signal(SIGKILL);
  ASSERT_TRUE(parker->wait_exit()) << "the parker survived SIGKILL";

  // The kernel ends what died with the worker asynchronously: bounded waits.
  EXPECT_TRUE(
    airlock::test::wait_for([&] { return airlock::test::processes_running(parker_path).empty(); }))
    << "a process of the killed worker's image is still running";
  EXPECT_TRUE(airlock::test::wait_for(
    [&] { return airlock::test::processes_holding_files_under(data.path()).empty(); }))
    << "a process still holds files under the killed worker's data directory";
  EXPECT_TRUE(airlock::test::wait_for([&] { return !airlock::test::loopback_port_accepts(port); }))
    << "port " << port << " of the killed worker still accepts connections";
  {
    unique_fd lock(::open(lock_file.c_str(), O_RDWR | O_CLOEXEC));
    ASSERT_TRUE(lock);
    EXPECT_EQ(::flock(lock.get(), LOCK_EX | LOCK_NB), 0) << "the lock file is still locked";
  }

  auto reopened = namespace_runtime::open(test_options(state_dir));
  ASSERT_TRUE(reopened) << reopened.error().message;
  auto report = (*reopened)->adopt();
  ASSERT_TRUE(report) << report.error().message;
  EXPECT_TRUE(report->failures.empty()) << report->failures.front().message;
  // Before the go nothing can run; from the go on the init may have run
  // (adopted, then destroyed here) or died with the worker (cleaned).
  const bool may_run = step == "released" || step == "started";
  if (!may_run) {
    EXPECT_EQ(report->cleaned, std::vector<std::string>{id});
    EXPECT_TRUE(report->adopted.empty());
  } else {
    EXPECT_EQ(report->cleaned.size() + report->adopted.size(), 1U);
  }
  if (step == "started") {
    EXPECT_EQ(report->adopted, std::vector<std::string>{id}) << "a started sandbox is adopted";
  }
  auto destroyed = (*reopened)->destroy(id);
  ASSERT_TRUE(destroyed) << destroyed.message;

  auto cgroups = detect_cgroup_driver(test_options(state_dir).cgroups);
  ASSERT_TRUE(cgroups) << cgroups.error().message;
  for (const auto& path : (*cgroups)->paths(id))
    EXPECT_FALSE(fs::exists(path)) << path;
  EXPECT_FALSE(
    interface_exists(host_interface_name(test_options(state_dir).net.interface_prefix, id)));
  EXPECT_FALSE(fs::exists(state_dir + "/" + id + ".state"));
  EXPECT_FALSE(mountinfo_mentions(id));
  EXPECT_TRUE(airlock::test::processes_holding_files_under(data.path()).empty());
}

INSTANTIATE_TEST_SUITE_P(each_step, killed_start, ::testing::ValuesIn(all_steps()),
                         [](const ::testing::TestParamInfo<std::string>& step) {
                           return step.param;
                         });

} // namespace
} // namespace airlock::worker::testing
