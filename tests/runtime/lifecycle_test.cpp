// Lifecycle of a namespace sandbox: create, exec, pause, resume, destroy
// without leftovers, and a restarted runtime adopting or cleaning what an
// earlier one left.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <thread>
#include <vector>

#include "sandbox_fixture.hpp"
#include "worker/runtime/net.hpp"
#include "worker/runtime/sys.hpp"

namespace airlock::worker::testing {
namespace {

namespace fs = std::filesystem;

using lifecycle = runtime_test;

uint64_t read_counter(const std::string& rootfs) {
  std::ifstream in(rootfs + "/tmp/counter");
  uint64_t value = 0;
  in >> value;
  return value;
}

/// Waits (bounded) until the counter written inside the sandbox exceeds
/// `above`; returns the value seen.
uint64_t counter_passes(const std::string& rootfs, uint64_t above, uint64_t timeout_ms) {
  uint64_t deadline = monotonic_ms() + timeout_ms;
  uint64_t value = read_counter(rootfs);
  while (value <= above && monotonic_ms() < deadline) {
    ::poll(nullptr, 0, 5);
    value = read_counter(rootfs);
  }
  return value;
}

void expect_no_leftovers(const sandbox_handle& h, const std::string& state_dir) {
  EXPECT_FALSE(mountinfo_mentions(h.id));
  for (const auto& path : h.cgroup_paths)
    EXPECT_FALSE(fs::exists(path)) << path;
  EXPECT_FALSE(fs::exists("/proc/" + std::to_string(h.init_pid) + "/ns"))
    << "init pid still exists";
  EXPECT_FALSE(interface_exists(h.host_interface)) << h.host_interface;
  net_options net;
  net.nft_table = "airlock_test";
  auto listed = firewall_has(net, h.host_interface);
  ASSERT_TRUE(listed) << listed.error().message;
  EXPECT_FALSE(*listed) << "nft element for " << h.host_interface;
  EXPECT_FALSE(fs::exists(state_dir + "/" + h.id + ".state"));
  EXPECT_FALSE(fs::exists(state_dir + "/" + h.id + ".boot_id"));
  EXPECT_FALSE(fs::exists("/run/netns/" + h.id));
}

TEST_F(lifecycle, creates_a_sandbox_that_runs_commands_as_its_root) {
  auto box = start_sandbox(unique_id("life-run"));
  ASSERT_NE(box.runtime, nullptr);
  auto id = box.shell.run("id -u; id -g; hostname; cat /proc/self/uid_map");
  EXPECT_EQ(id.exit_code, 0);
  EXPECT_EQ(id.output.substr(0, 4), "0\n0\n");
  EXPECT_NE(id.output.find(box.handle.id + "\n"), std::string::npos) << id.output;
  EXPECT_NE(id.output.find(std::to_string(box.handle.uid_base)), std::string::npos) << id.output;
  auto groups = box.shell.run("grep Groups /proc/self/status");
  EXPECT_EQ(groups.output.find_first_of("0123456789"), std::string::npos)
    << "the worker's supplementary groups leaked: " << groups.output;
  // The child starts with every signal blocked; what it execs must not.
  auto blocked = box.shell.run("grep SigBlk /proc/self/status");
  EXPECT_NE(blocked.output.find("0000000000000000"), std::string::npos) << blocked.output;
  auto state = fs::path(state_->path()) / (box.handle.id + ".state");
  EXPECT_TRUE(fs::exists(state));
  EXPECT_EQ(runtime_->list().size(), 1U);
}

TEST_F(lifecycle, pause_stops_progress_and_resume_restarts_it) {
  auto box = start_sandbox(unique_id("life-pause"));
  ASSERT_NE(box.runtime, nullptr);
  auto started =
    box.shell.run("(i=0; while :; do i=$((i+1)); echo $i > /tmp/counter; usleep 2000; done) "
                  ">/dev/null 2>&1 &");
  ASSERT_EQ(started.exit_code, 0) << started.output;
  const std::string rootfs = box.rootfs->path();
  ASSERT_GT(counter_passes(rootfs, 3, 5000), 3U) << "counter never ran";

  auto paused = runtime_->pause(box.handle.id);
  ASSERT_TRUE(paused) << paused.message;
  auto stats = runtime_->stats(box.handle.id);
  ASSERT_TRUE(stats);
  EXPECT_TRUE(stats->frozen);
  EXPECT_GT(stats->cpu_usage_ns, 0U) << "the counter used CPU";
  EXPECT_GT(stats->memory_bytes, 0U);
  EXPECT_GE(stats->pids_current, 2U) << "init and the counter";
  // The freezer reported FROZEN: no process of the sandbox runs, so every
  // read must see the same value. The reads span real time on purpose.
  uint64_t frozen_value = read_counter(rootfs);
  for (int i = 0; i < 20; ++i) {
    ::poll(nullptr, 0, 10);
    EXPECT_EQ(read_counter(rootfs), frozen_value);
  }
  EXPECT_TRUE(runtime_->pause(box.handle.id)) << "pause is idempotent";

  auto resumed = runtime_->resume(box.handle.id);
  ASSERT_TRUE(resumed) << resumed.message;
  EXPECT_GT(counter_passes(rootfs, frozen_value, 5000), frozen_value);
  EXPECT_EQ(box.shell.run("echo alive").output, "alive\n");
}

TEST_F(lifecycle, destroy_leaves_no_process_cgroup_mount_veth_or_firewall_entry) {
  auto box = start_sandbox(unique_id("life-gone"));
  ASSERT_NE(box.runtime, nullptr);
  sandbox_handle h = box.handle;
  ASSERT_FALSE(h.cgroup_paths.empty());
  for (const auto& path : h.cgroup_paths)
    EXPECT_TRUE(fs::exists(path)) << path;
  EXPECT_TRUE(interface_exists(h.host_interface));
  ASSERT_EQ(box.shell.run("sleep 1000 >/dev/null 2>&1 &").exit_code, 0);
  ASSERT_TRUE(runtime_->pause(h.id)); // destroy must also work on a frozen sandbox
  auto destroyed = runtime_->destroy(h.id);
  ASSERT_TRUE(destroyed) << destroyed.message;
  box.runtime = nullptr;
  expect_no_leftovers(h, state_->path());
  EXPECT_TRUE(runtime_->destroy(h.id)) << "destroy is idempotent";
  EXPECT_TRUE(runtime_->list().empty());
}

TEST_F(lifecycle, rejects_bad_specs_and_leaves_nothing_when_start_fails) {
  busybox_rootfs rootfs;
  sandbox_launch_spec spec;
  spec.id = unique_id("life-bad");
  spec.rootfs_path = rootfs.path();
  spec.init_argv = {"/bin/does-not-exist"};
  auto failed = runtime_->create(spec);
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.code(), errc::invalid_argument) << failed.error().message;
  EXPECT_NE(failed.error().message.find("execute the init"), std::string::npos)
    << failed.error().message;
  EXPECT_TRUE(runtime_->list().empty());
  EXPECT_FALSE(interface_exists(host_interface_name("at", spec.id)));
  EXPECT_FALSE(fs::exists(state_->path() + "/" + spec.id + ".state"));

  spec.init_argv = {"/bin/sh"};
  spec.id = "Bad/Id";
  EXPECT_EQ(runtime_->create(spec).code(), errc::invalid_argument);
  spec.id = unique_id("life-nolimit");
  spec.limits.memory_mb = 0;
  EXPECT_EQ(runtime_->create(spec).code(), errc::invalid_argument);
}

TEST_F(lifecycle, a_restarted_runtime_adopts_live_sandboxes_and_cleans_dead_ones) {
  auto live = start_sandbox(unique_id("life-live"));
  auto dead = start_sandbox(unique_id("life-dead"));
  ASSERT_NE(live.runtime, nullptr);
  ASSERT_NE(dead.runtime, nullptr);
  sandbox_handle dead_handle = dead.handle;
  sandbox_handle live_handle = live.handle;
  const std::string live_boot_id = live.shell.run("cat /proc/sys/kernel/random/boot_id").output;
  // The worker "crashes": its runtime object goes away without destroying
  // anything, and one sandbox's init dies meanwhile.
  ASSERT_EQ(::syscall(SYS_pidfd_send_signal, dead.handle.pidfd, SIGKILL, nullptr, 0), 0);
  // The kill is delivered asynchronously: the init has died once its pidfd
  // reads (adopt asks the same), bounded.
  pollfd died{dead.handle.pidfd, POLLIN, 0};
  ASSERT_EQ(::poll(&died, 1, 10'000), 1) << "the killed init did not exit";
  live.runtime = nullptr;
  dead.runtime = nullptr;
  runtime_.reset();

  auto reopened = namespace_runtime::open(test_options(state_->path()));
  ASSERT_TRUE(reopened) << reopened.error().message;
  runtime_ = std::move(*reopened);
  auto report = runtime_->adopt();
  ASSERT_TRUE(report) << report.error().message;
  EXPECT_EQ(report->adopted, std::vector<std::string>{live_handle.id});
  EXPECT_EQ(report->cleaned, std::vector<std::string>{dead_handle.id});
  EXPECT_TRUE(report->failures.empty());
  expect_no_leftovers(dead_handle, state_->path());

  auto handles = runtime_->list();
  ASSERT_EQ(handles.size(), 1U);
  EXPECT_TRUE(handles[0].adopted);
  EXPECT_EQ(handles[0].init_pid, live_handle.init_pid);
  EXPECT_EQ(live.shell.run("echo still here").output, "still here\n");
  EXPECT_EQ(live.shell.run("cat /proc/sys/kernel/random/boot_id").output, live_boot_id)
    << "an adopted sandbox keeps its boot id";
  EXPECT_TRUE(runtime_->stats(live_handle.id));

  auto destroyed = runtime_->destroy(live_handle.id);
  ASSERT_TRUE(destroyed) << destroyed.message;
  expect_no_leftovers(live_handle, state_->path());
}

// One sandbox's start or teardown runs outside the runtime's lock: creates and
// destroys on several threads at once must still get distinct slots and
// addresses, refuse a second create of an id that is starting, and leave
// nothing behind.
TEST_F(lifecycle, concurrent_creates_and_destroys_get_distinct_slots_and_leave_nothing) {
  constexpr size_t count = 6;
  std::vector<sandbox_under_test> boxes(count);
  {
    std::vector<std::thread> threads;
    for (size_t i = 0; i < count; ++i)
      threads.emplace_back(
        [this, &boxes, i] { boxes[i] = start_sandbox(unique_id("par-" + std::to_string(i))); });
    for (auto& thread : threads)
      thread.join();
  }
  std::set<uint32_t> slots;
  std::set<std::string> addresses;
  for (auto& box : boxes) {
    ASSERT_NE(box.runtime, nullptr) << "a create failed";
    slots.insert(box.handle.slot);
    addresses.insert(box.handle.sandbox_address);
    EXPECT_EQ(box.shell.run("echo ok").output, "ok\n");
  }
  EXPECT_EQ(slots.size(), count);
  EXPECT_EQ(addresses.size(), count);
  EXPECT_EQ(runtime_->list().size(), count);

  // The same id twice at once: one create wins, the other is told it exists.
  busybox_rootfs rootfs;
  const std::string twin = unique_id("par-twin");
  std::vector<status> outcomes(2);
  std::vector<sandbox_handle> made(2);
  std::vector<unique_fd> ours(2);
  {
    std::vector<std::thread> threads;
    for (size_t i = 0; i < 2; ++i) {
      int pair[2];
      ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
      ours[i].reset(pair[0]);
      threads.emplace_back([&, i, theirs = pair[1]] {
        sandbox_launch_spec spec;
        spec.id = twin;
        spec.rootfs_path = rootfs.path();
        spec.init_argv = command_loop_argv();
        spec.channel_fd = theirs;
        spec.stderr_fd = 2;
        auto created = runtime_->create(spec);
        ::close(theirs);
        if (created)
          made[i] = *created;
        else
          outcomes[i] = created.error();
      });
    }
    for (auto& thread : threads)
      thread.join();
  }
  const size_t won = outcomes[0].is_ok() ? 0 : 1;
  ASSERT_TRUE(outcomes[won].is_ok()) << outcomes[won].message;
  EXPECT_EQ(outcomes[1 - won].code, errc::already_exists) << outcomes[1 - won].message;
  EXPECT_EQ(runtime_->list().size(), count + 1);
  auto twin_destroyed = runtime_->destroy(twin);
  ASSERT_TRUE(twin_destroyed) << twin_destroyed.message;
  expect_no_leftovers(made[won], state_->path());

  {
    std::vector<std::thread> threads;
    for (auto& box : boxes)
      threads.emplace_back([this, &box] {
        auto destroyed = runtime_->destroy(box.handle.id);
        EXPECT_TRUE(destroyed) << destroyed.message;
        box.runtime = nullptr;
      });
    for (auto& thread : threads)
      thread.join();
  }
  for (const auto& box : boxes)
    expect_no_leftovers(box.handle, state_->path());
  EXPECT_TRUE(runtime_->list().empty());
}

} // namespace
} // namespace airlock::worker::testing
