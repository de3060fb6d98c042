// Limits: a fork bomb and a memory hog stay inside their sandbox's cgroup
// while the host and another sandbox keep working.

#include <linux/capability.h>
#include <poll.h>
#include <unistd.h>

#include <fstream>

#include "sandbox_fixture.hpp"
#include "worker/runtime/cgroup_driver.hpp"
#include "worker/runtime/sys.hpp"

namespace airlock::worker::testing {
namespace {

using limits = runtime_test;

/// The sandbox's cgroup directory of `controller` (v1), or the v2 directory.
std::string cgroup_dir(const sandbox_handle& h, const std::string& controller) {
  for (const auto& path : h.cgroup_paths)
    if (path.find("/" + controller + "/") != std::string::npos)
      return path;
  return h.cgroup_paths.empty() ? std::string() : h.cgroup_paths.front();
}

std::string first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

/// Whether this process has `capability` in its effective set.
bool has_capability(int capability) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("CapEff:", 0) == 0)
      return (std::stoull(line.substr(7), nullptr, 16) >> capability) & 1U;
  return false;
}

/// "max 12" in pids.events: forks refused at the limit (v1 and v2).
uint64_t pids_limit_hits(const sandbox_handle& h) {
  std::ifstream in(cgroup_dir(h, "pids") + "/pids.events");
  std::string key;
  uint64_t value = 0;
  while (in >> key >> value)
    if (key == "max")
      return value;
  return 0;
}

TEST_F(limits, are_written_into_the_cgroups) {
  auto box = start_sandbox(unique_id("lim-files"), {64, 250, 32, 100});
  ASSERT_NE(box.runtime, nullptr);
  // Lowering a score needs CAP_SYS_RESOURCE; without it the init stays at 0
  // (its programs raise theirs instead).
  const bool may_lower = has_capability(CAP_SYS_RESOURCE);
  EXPECT_EQ(first_line("/proc/" + std::to_string(box.handle.init_pid) + "/oom_score_adj"),
            may_lower ? "-900" : "0")
    << "the init (the guest agent in production), CAP_SYS_RESOURCE " << may_lower;
  if (runtime_->cgroup_driver_name() != "v1")
    GTEST_SKIP() << "checks the v1 file names";
  EXPECT_EQ(first_line(cgroup_dir(box.handle, "memory") + "/memory.limit_in_bytes"),
            std::to_string(64 << 20));
  EXPECT_EQ(first_line(cgroup_dir(box.handle, "cpu") + "/cpu.cfs_quota_us"), "25000")
    << "the quota follows the limit";
  EXPECT_EQ(first_line(cgroup_dir(box.handle, "cpu") + "/cpu.shares"), "102")
    << "the share follows the request: 100 mCPU of 1024 per core";
  EXPECT_EQ(first_line(cgroup_dir(box.handle, "pids") + "/pids.max"), "32");
}

TEST_F(limits, set_in_place_on_a_running_sandbox_leave_the_rest_alone) {
  auto box = start_sandbox(unique_id("lim-set"), {64, 250, 32, 100});
  ASSERT_NE(box.runtime, nullptr);
  ASSERT_TRUE(runtime_->set_limits(box.handle.id, 500, 256).is_ok());
  EXPECT_EQ(runtime_->set_limits(box.handle.id, 0, 256).code, errc::invalid_argument);
  EXPECT_EQ(runtime_->set_limits("no-such-sandbox", 500, 256).code, errc::not_found);
  if (runtime_->cgroup_driver_name() != "v1")
    GTEST_SKIP() << "checks the v1 file names";
  EXPECT_EQ(first_line(cgroup_dir(box.handle, "memory") + "/memory.limit_in_bytes"),
            std::to_string(256 << 20));
  EXPECT_EQ(first_line(cgroup_dir(box.handle, "cpu") + "/cpu.cfs_quota_us"), "50000");
  EXPECT_EQ(first_line(cgroup_dir(box.handle, "cpu") + "/cpu.shares"), "102")
    << "the request's share stays";
  EXPECT_EQ(first_line(cgroup_dir(box.handle, "pids") + "/pids.max"), "32") << "pids stay";
  // Down again, below the first limit.
  ASSERT_TRUE(runtime_->set_limits(box.handle.id, 250, 32).is_ok());
  EXPECT_EQ(first_line(cgroup_dir(box.handle, "memory") + "/memory.limit_in_bytes"),
            std::to_string(32 << 20));
}

TEST_F(limits, the_smallest_cpu_limit_gets_the_kernels_smallest_quota) {
  auto box = start_sandbox(unique_id("lim-tiny"), {64, 1, 32, 1});
  ASSERT_NE(box.runtime, nullptr) << "1 mCPU is below the kernel's 1 ms quota; it is raised";
  if (runtime_->cgroup_driver_name() != "v1")
    GTEST_SKIP() << "checks the v1 file names";
  EXPECT_EQ(first_line(cgroup_dir(box.handle, "cpu") + "/cpu.cfs_quota_us"), "1000");
  EXPECT_EQ(first_line(cgroup_dir(box.handle, "cpu") + "/cpu.shares"), "2");
}

TEST_F(limits, a_hog_at_the_cap_on_all_sandboxes_dies_while_its_neighbour_and_the_host_live) {
  // A runtime whose sandboxes may use 160 MiB together, under a parent of
  // its own so that other tests' sandboxes never share the cap.
  auto options = test_options(state_->path() + "/capped");
  options.cgroups.parent = "airlock-test-capped";
  options.sandboxes_memory_max_mb = 160;
  runtime_.reset();
  auto capped = namespace_runtime::open(options);
  ASSERT_TRUE(capped) << capped.error().message;
  runtime_ = std::move(*capped);
  {
    // Each limit alone would allow what the two together may not.
    auto neighbour = start_sandbox(unique_id("cap-calm"), {128, 500, 64});
    auto hog = start_sandbox(unique_id("cap-hog"), {512, 500, 64});
    ASSERT_NE(neighbour.runtime, nullptr);
    ASSERT_NE(hog.runtime, nullptr);
    auto held = neighbour.shell.run(
      "(x=$(head -c 40000000 /dev/zero | tr '\\0' a); sleep 600) >/dev/null 2>&1 & echo $!");
    ASSERT_EQ(held.exit_code, 0) << held.output;
    auto holder = held.output.substr(0, held.output.find('\n'));
    auto ate =
      hog.shell.run("x=$(head -c 300000000 /dev/zero | tr '\\0' a); echo survived ${#x}", 60000);
    EXPECT_EQ(ate.output.find("survived"), std::string::npos) << ate.output;
    EXPECT_EQ(ate.exit_code, 128 + 9) << "the hog dies by SIGKILL";
    auto all = runtime_->stats_all();
    ASSERT_TRUE(all) << all.error().message;
    EXPECT_LE(all->memory_bytes, uint64_t{160} << 20);
    // The hog never came near its own 512 MiB: the cap on all sandboxes killed it.
    const auto hog_memory = cgroup_dir(hog.handle, "memory");
    auto peak = first_line(hog_memory + "/memory.max_usage_in_bytes");
    if (peak.empty())
      peak = first_line(hog_memory + "/memory.peak");
    ASSERT_FALSE(peak.empty()) << "neither v1 max_usage_in_bytes nor v2 memory.peak in "
                               << hog_memory;
    EXPECT_LE(std::stoull(peak), uint64_t{160} << 20);
    EXPECT_EQ(neighbour.shell.run("kill -0 " + holder + " && echo alive").output, "alive\n")
      << "the neighbour's process holding 40 MB lives on";
    EXPECT_EQ(hog.shell.run("echo alive").output, "alive\n") << "the hog's init survives";
    EXPECT_EQ(host_run({"/bin/true"}), 0);
  }
  runtime_.reset();
  if (auto mounts = read_file("/proc/self/mountinfo", 16 << 20))
    for (const auto& [controller, root] : parse_cgroup_mounts(*mounts).v1_paths)
      ::rmdir((root + "/airlock-test-capped").c_str());
  ::rmdir("/sys/fs/cgroup/airlock-test-capped");
}

TEST_F(limits, a_fork_bomb_hits_pids_max_while_the_host_and_other_sandboxes_work) {
  constexpr uint32_t pids_max = 64;
  auto bomb = start_sandbox(unique_id("lim-bomb"), {128, 500, pids_max});
  auto other = start_sandbox(unique_id("lim-other"), {128, 500, pids_max});
  ASSERT_NE(bomb.runtime, nullptr);
  ASSERT_NE(other.runtime, nullptr);
  auto lit = bomb.shell.run("(f() { sleep 1000 & f | f & }; f) >/dev/null 2>&1 &");
  ASSERT_EQ(lit.exit_code, 0) << lit.output;

  // Bounded wait for the kernel's own evidence: forks refused at the limit.
  uint64_t deadline = monotonic_ms() + 20000;
  while (pids_limit_hits(bomb.handle) == 0 && monotonic_ms() < deadline)
    ::poll(nullptr, 0, 10);
  EXPECT_GT(pids_limit_hits(bomb.handle), 0U) << "the bomb never reached pids.max";
  for (int i = 0; i < 5; ++i) {
    auto stats = runtime_->stats(bomb.handle.id);
    ASSERT_TRUE(stats);
    EXPECT_LE(stats->pids_current, pids_max);
  }
  EXPECT_EQ(host_run({"/bin/true"}), 0) << "the host can still fork";
  EXPECT_EQ(other.shell.run("echo fine; ls / >/dev/null").output, "fine\n");
  auto destroyed = runtime_->destroy(bomb.handle.id);
  EXPECT_TRUE(destroyed) << destroyed.message;
  bomb.runtime = nullptr;
}

TEST_F(limits, a_memory_hog_is_oom_killed_inside_its_limit) {
  constexpr uint32_t memory_mb = 64;
  auto hog = start_sandbox(unique_id("lim-hog"), {memory_mb, 500, 64});
  ASSERT_NE(hog.runtime, nullptr);
  // The shell keeps 200 MB of command substitution in its own memory.
  auto ate =
    hog.shell.run("x=$(head -c 200000000 /dev/zero | tr '\\0' a); echo survived ${#x}", 60000);
  EXPECT_EQ(ate.output.find("survived"), std::string::npos) << ate.output;
  EXPECT_EQ(ate.exit_code, 128 + 9) << "the hog should die by SIGKILL";
  auto stats = runtime_->stats(hog.handle.id);
  ASSERT_TRUE(stats);
  EXPECT_GE(stats->oom_kills, 1U);
  EXPECT_LE(stats->memory_bytes, uint64_t{memory_mb} << 20);
  EXPECT_EQ(hog.shell.run("echo alive").output, "alive\n") << "the init survives its child's OOM";
  EXPECT_EQ(host_run({"/bin/true"}), 0);
}

} // namespace
} // namespace airlock::worker::testing
