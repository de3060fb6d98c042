// Memory snapshots of one real microVM under TCG (booted once for the suite
// through microvm_runtime, as boot_test.cpp's): suspend and restore keep a
// counting process in the same pid, clones of one base draw their own random
// bytes and take the host's clock, a pooled clone gets its channel, a VM a
// crashed run left is ended and removed by the next adopt, and a record from
// another host is refused.

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "guest/client.hpp"
#include "schema/unique_fd.hpp"
#include "tests/microvm/microvm_test_support.hpp"
#include "tests/support/environment.hpp"
#include "tests/support/host.hpp"
#include "worker/command/command.hpp"
#include "worker/microvm/accel_probe.hpp"
#include "worker/microvm/disk_image.hpp"
#include "worker/microvm/microvm_runtime.hpp"
#include "worker/microvm/vm.hpp"
#include "worker/microvm/vm_network.hpp"
#include "worker/rootfs/rootfs_driver.hpp"
#include "worker/rootfs/templates.hpp"

namespace airlock::worker::microvm {
namespace {

namespace fs = std::filesystem;

class microvm_snapshot : public ::testing::Test {
protected:
  struct shared {
    test::temp_dir dir{"airlock-microvm-snap"};
    std::string image;
    std::string run_dir;
    std::unique_ptr<microvm_runtime> runtime;
    std::unique_ptr<guest::guest_client> client;
    std::string failure;
    microvm_runtime_options options; ///< the runtime's, for another one
    std::string counter_pid;         ///< the guest's counting loop (in the base and its clones)
  };
  static inline shared* vm_ = nullptr;
  static inline std::string skip_;
  static constexpr const char* base_id = "snap-base";

  static void SetUpTestSuite() {
    skip_ = skip_reason();
    if (!skip_.empty())
      return;
    vm_ = new shared();
    vm_->failure = boot();
  }

  static std::string boot() {
    const fs::path base = vm_->dir.path();
    auto setup = prepare_test_vm(base);
    if (!setup)
      return setup.error().message;
    vm_->image = setup->image;
    vm_->run_dir = setup->options.run_dir;
    microvm_runtime_options options = setup->options;
    options.machine_dir = (base / "machines").string();
    fs::create_directories(options.machine_dir);
    vm_->options = options;
    vm_->runtime = std::make_unique<microvm_runtime>(options);
    sandbox_launch_spec spec = launch_spec(base_id);
    spec.rootfs_path = vm_->image;
    auto [ours, theirs] = channel_pair();
    spec.channel_fd = theirs.get();
    auto handle = vm_->runtime->create(spec);
    if (!handle)
      return handle.error().message;
    vm_->client = std::make_unique<guest::guest_client>(std::move(ours));
    auto hello = vm_->client->handshake(agent_ready_timeout_ms);
    if (!hello)
      return "the agent did not answer: " + hello.error().message;
    return "";
  }

  static void TearDownTestSuite() {
    if (vm_ != nullptr)
      vm_->runtime.reset();
    delete vm_;
    vm_ = nullptr;
  }

  static sandbox_launch_spec launch_spec(const std::string& id) {
    sandbox_launch_spec spec;
    spec.id = id;
    spec.network.enabled = false;
    spec.limits.memory_mb = 256;
    return spec;
  }

  void SetUp() override {
    if (!skip_.empty())
      GTEST_SKIP() << skip_;
    ASSERT_TRUE(vm_->failure.empty()) << vm_->failure;
  }

  static int64_t host_realtime_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
  }

  /// Restores `id` from `dir` on a new channel and refreshes its guest;
  /// the client, or a failed assertion.
  static std::unique_ptr<guest::guest_client> restore(const std::string& id, const std::string& dir,
                                                      restore_mode mode,
                                                      int64_t* ready_ms = nullptr,
                                                      guest::refreshed* refreshed_out = nullptr) {
    auto [ours, theirs] = channel_pair();
    auto spec = launch_spec(id);
    spec.channel_fd = theirs.get();
    const auto start = std::chrono::steady_clock::now();
    auto handle = vm_->runtime->restore(spec, dir, mode);
    EXPECT_TRUE(handle) << handle.error().message;
    if (!handle)
      return nullptr;
    auto client = std::make_unique<guest::guest_client>(std::move(ours));
    std::string entropy(64, '\0');
    std::ifstream("/dev/urandom", std::ios::binary).read(entropy.data(), 64);
    auto refreshed = client->refresh(entropy, host_realtime_ns(), id, "", command_timeout_ms);
    EXPECT_TRUE(refreshed) << refreshed.error().message << "; console: "
                           << test::read_file(vm_->run_dir + "/" + id + ".console.log");
    if (!refreshed)
      return nullptr;
    if (ready_ms != nullptr)
      *ready_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::steady_clock::now() - start)
                    .count();
    if (refreshed_out != nullptr)
      *refreshed_out = *refreshed;
    return client;
  }

  static guest::run_result run(guest::guest_client& client, const std::string& line) {
    guest::start_request request;
    request.process.cmd = line;
    request.process.env = {{"PATH", "/bin"}};
    auto ran = client.run(request, "", command_timeout_ms);
    EXPECT_TRUE(ran) << ran.error().message;
    return ran ? *ran : guest::run_result{};
  }

  /// Takes every event from the guest, as the worker's link does, until
  /// `path` exists (bounded).
  static bool runs_to_its_end(guest::guest_client& client, const std::string& path) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline) {
      while (client.next_event(20)) {
      }
      if (client.stat(path, command_timeout_ms))
        return true;
    }
    return false;
  }

  /// The counter file's value (-1 when unreadable).
  static long counter(guest::guest_client& client) {
    auto text = client.read_file("/tmp/c", command_timeout_ms);
    return text && !text->empty() ? std::strtol(text->c_str(), nullptr, 10) : -1;
  }
};

TEST_F(microvm_snapshot, a_suspended_vm_restored_goes_on_counting_in_the_same_process) {
  for (const char* applet : {"sleep", "head", "od", "date", "hostname", "kill", "mv"})
    run(*vm_->client, std::string("ln -sf busybox /bin/") + applet);
  // Each value is renamed into place: a reader never sees the file empty.
  auto started = run(*vm_->client, "sh -c 'i=0; while :; do i=$((i+1)); echo $i > /tmp/c.new; "
                                   "mv /tmp/c.new /tmp/c; sleep 0.1; done' </dev/null >/dev/null "
                                   "2>&1 & echo $!");
  ASSERT_EQ(started.exit_code, 0) << started.err;
  const std::string pid = trimmed(started.out);
  ASSERT_FALSE(pid.empty());
  vm_->counter_pid = pid;
  // Let it count a while, so that "from where it was" cannot be a restart.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  long before = -1;
  while ((before = counter(*vm_->client)) < 15 && std::chrono::steady_clock::now() < deadline) {
  }
  ASSERT_GE(before, 15);
  const pid_t qemu_pid = vm_->runtime->list().at(0).init_pid;
  const std::string dir = vm_->dir.path() + "/suspended";
  auto info = vm_->runtime->snapshot(base_id, dir, snapshot_mode::suspend);
  ASSERT_TRUE(info) << info.error().message;
  EXPECT_TRUE(vm_->runtime->list().empty());
  EXPECT_EQ(::kill(qemu_pid, 0), -1); // QEMU is gone
  EXPECT_FALSE(fs::exists(vm_->run_dir + "/" + base_id + ".ram"));
  for (const char* name : {"snapshot.json", "state", "memory", "disk.ext4"})
    EXPECT_TRUE(fs::exists(dir + "/" + name)) << name;
  EXPECT_EQ(info->record.memory_mb, 256u);
  EXPECT_GT(info->state_bytes, 0u);
  EXPECT_LT(info->state_bytes, 1u << 20); // device state only, no RAM
  EXPECT_GT(info->memory_bytes, 0u);
  EXPECT_LE(info->memory_bytes, 256u << 20);
  std::printf("microvm snapshot (256 MiB VM, suspend): save %lld ms, total %lld ms; on disk: "
              "state %llu KiB, memory %llu MiB, disk %llu MiB\n",
              static_cast<long long>(info->save_ms), static_cast<long long>(info->total_ms),
              static_cast<unsigned long long>(info->state_bytes >> 10),
              static_cast<unsigned long long>(info->memory_bytes >> 20),
              static_cast<unsigned long long>(info->disk_bytes >> 20));
  RecordProperty("suspend_ms", std::to_string(info->total_ms));
  RecordProperty("snapshot_memory_bytes", std::to_string(info->memory_bytes));

  int64_t ready_ms = 0;
  auto client = restore(base_id, dir, restore_mode::owned, &ready_ms);
  ASSERT_TRUE(client);
  std::printf("microvm restore (owned copy of the RAM file): ready %lld ms\n",
              static_cast<long long>(ready_ms));
  RecordProperty("restore_ms", std::to_string(ready_ms));
  const long after = counter(*client);
  // The same count, not a new loop from 1 (a few ticks pass while it saves
  // and restores in guest time: the guest's clock did not run meanwhile).
  EXPECT_GE(after, before);
  EXPECT_LE(after, before + 10);
  long later = after;
  const auto count_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while ((later = counter(*client)) < after + 3
         && std::chrono::steady_clock::now() < count_deadline) {
  }
  EXPECT_GE(later, after + 3) << "the loop does not go on counting";
  auto alive = run(*client, "kill -0 " + pid + " && cat /proc/" + pid + "/cmdline");
  EXPECT_EQ(alive.exit_code, 0) << "pid " << pid << " is gone: " << alive.err;
  EXPECT_NE(alive.out.find("while"), std::string::npos) << alive.out;
  vm_->client = std::move(client);
}

TEST_F(microvm_snapshot, clones_of_one_base_draw_different_random_bytes_and_take_the_hosts_clock) {
  ASSERT_EQ(vm_->runtime->list().size(), 1u) << "the base VM was not restored";
  // A process whose output nobody reads fills its window and blocks: each
  // clone's new session must let it run to its end (the refresh gives an
  // earlier session's streams a whole window again, and the client grants
  // back output of streams it did not start).
  guest::start_request unread;
  unread.process.cmd = "head -c 2000000 /dev/zero; echo done > /tmp/flushed";
  unread.process.env = {{"PATH", "/bin"}};
  ASSERT_TRUE(vm_->client->start(unread, command_timeout_ms));
  const std::string dir = vm_->dir.path() + "/base";
  auto info = vm_->runtime->snapshot(base_id, dir, snapshot_mode::checkpoint);
  ASSERT_TRUE(info) << info.error().message;
  // A checkpoint leaves the VM running.
  EXPECT_EQ(trimmed(run(*vm_->client, "echo on").out), "on");
  std::string bytes[2];
  for (int i = 0; i < 2; ++i) {
    const std::string id = "clone-" + std::to_string(i);
    int64_t ready_ms = 0;
    guest::refreshed refreshed;
    auto client = restore(id, dir, restore_mode::clone, &ready_ms, &refreshed);
    ASSERT_TRUE(client);
    std::printf("microvm clone %d: ready %lld ms after restore began, clock stepped %lld ms\n", i,
                static_cast<long long>(ready_ms),
                static_cast<long long>(refreshed.clock_step_ns / 1'000'000));
    bytes[i] = run(*client, "head -c 32 /dev/urandom | od -An -tx1").out;
    EXPECT_GE(bytes[i].size(), 64u) << bytes[i];
    auto date = run(*client, "date +%s");
    const int64_t host_s = host_realtime_ns() / 1'000'000'000;
    const int64_t guest_s = std::strtoll(date.out.c_str(), nullptr, 10);
    EXPECT_LE(std::llabs(guest_s - host_s), 2) << "guest " << guest_s << " host " << host_s;
    EXPECT_EQ(trimmed(run(*client, "hostname").out), id);
    // The base's processes run on in each clone (the counter's loop too).
    EXPECT_GE(counter(*client), 1);
    EXPECT_TRUE(runs_to_its_end(*client, "/tmp/flushed")) << "the unread process stays blocked";
    // Kept running while the next clone starts: both map the base's file.
    if (i == 1) {
      ASSERT_TRUE(vm_->runtime->destroy("clone-0").is_ok());
      ASSERT_TRUE(vm_->runtime->destroy("clone-1").is_ok());
    }
  }
  EXPECT_NE(bytes[0], bytes[1]);
  // The clones read the base's files; they are left as they were.
  EXPECT_TRUE(fs::exists(dir + "/memory"));
  EXPECT_EQ(fs::file_size(dir + "/memory"), 256u << 20);
}

TEST_F(microvm_snapshot, a_clones_snapshot_carries_its_ram_in_the_state_and_restores_counting_on) {
  const std::string base = vm_->dir.path() + "/base";
  ASSERT_TRUE(fs::exists(base + "/snapshot.json"));
  auto clone = restore("clone-saved", base, restore_mode::clone);
  ASSERT_TRUE(clone);
  const std::string pid = vm_->counter_pid;
  const long before = counter(*clone);
  ASSERT_GE(before, 1);
  // Its RAM is the base's file mapped private: the checkpoint streams it.
  const std::string dir = vm_->dir.path() + "/of-clone";
  auto info = vm_->runtime->snapshot("clone-saved", dir, snapshot_mode::checkpoint);
  ASSERT_TRUE(info) << info.error().message;
  EXPECT_EQ(info->record.memory_file, "");
  EXPECT_FALSE(fs::exists(dir + "/memory"));
  EXPECT_EQ(info->memory_bytes, 0u);
  EXPECT_GT(info->state_bytes, 1u << 20) << "the RAM is in the state";
  EXPECT_LT(info->state_bytes, 256u << 20) << "pages never written are not";
  std::printf("microvm checkpoint of a clone (RAM in the state): save %lld ms, state %llu MiB\n",
              static_cast<long long>(info->save_ms),
              static_cast<unsigned long long>(info->state_bytes >> 20));
  EXPECT_GE(counter(*clone), before) << "the clone runs on after its checkpoint";
  ASSERT_TRUE(vm_->runtime->destroy("clone-saved").is_ok());
  EXPECT_EQ(fs::file_size(base + "/memory"), 256u << 20) << "the base's file is left as it was";

  // Restored into a RAM file of its own, so its next snapshot is a file again (quick, and
  // clones can share it); then suspended and restored as a clone of that.
  int64_t from_state_ms = 0;
  auto restored = restore("from-clone", dir, restore_mode::owned, &from_state_ms);
  ASSERT_TRUE(restored);
  std::printf("microvm restore of a clone's checkpoint (RAM from the state into a file): ready "
              "%lld ms\n",
              static_cast<long long>(from_state_ms));
  const long after = counter(*restored);
  EXPECT_GE(after, before);
  EXPECT_TRUE(fs::exists(vm_->run_dir + "/from-clone.ram")) << "a RAM file of its own";
  const std::string again = vm_->dir.path() + "/of-restored";
  auto suspended = vm_->runtime->snapshot("from-clone", again, snapshot_mode::suspend);
  ASSERT_TRUE(suspended) << suspended.error().message;
  EXPECT_EQ(suspended->record.memory_file, "memory");
  EXPECT_LT(suspended->state_bytes, 1u << 20) << "device state only";
  EXPECT_TRUE(vm_->runtime->list().size() == 1u) << "only the base runs";
  auto back = restore("from-clone", again, restore_mode::clone);
  ASSERT_TRUE(back);
  long later = counter(*back);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while ((later = counter(*back)) < after + 3 && std::chrono::steady_clock::now() < deadline) {
  }
  EXPECT_GE(later, after + 3) << "the loop does not go on counting";
  ASSERT_FALSE(pid.empty());
  EXPECT_EQ(run(*back, "kill -0 " + pid).exit_code, 0) << "pid " << pid << " is gone";
  ASSERT_TRUE(vm_->runtime->destroy("from-clone").is_ok());
}

TEST_F(microvm_snapshot, a_pooled_clone_is_handed_its_channel_when_it_is_claimed) {
  const std::string dir = vm_->dir.path() + "/base";
  ASSERT_TRUE(fs::exists(dir + "/snapshot.json"));
  auto pooled = vm_->runtime->prepare_clones(dir, 1);
  ASSERT_TRUE(pooled) << pooled.error().message;
  EXPECT_EQ(*pooled, 1u);
  int64_t ready_ms = 0;
  auto client = restore("clone-pooled", dir, restore_mode::clone, &ready_ms);
  ASSERT_TRUE(client);
  EXPECT_EQ(vm_->runtime->pooled_clones(dir), 0u);
  std::printf("microvm clone from the pool: ready %lld ms after restore began\n",
              static_cast<long long>(ready_ms));
  EXPECT_EQ(trimmed(run(*client, "hostname").out), "clone-pooled");
  EXPECT_GE(run(*client, "head -c 32 /dev/urandom | od -An -tx1").out.size(), 64u);
  auto stats = vm_->runtime->stats("clone-pooled");
  ASSERT_TRUE(stats) << stats.error().message;
  EXPECT_GT(stats->memory_bytes, 0u);
  ASSERT_TRUE(vm_->runtime->destroy("clone-pooled").is_ok());
  EXPECT_FALSE(fs::exists(vm_->run_dir + "/pool.1.ext4"));
}

TEST_F(microvm_snapshot, a_vm_left_by_a_crashed_run_is_ended_and_removed_by_the_next_adopt) {
  auto options = vm_->options;
  options.run_dir = vm_->dir.path() + "/crashed-run";
  fs::create_directories(options.run_dir);
  // The run that crashes: its runtime is never destroyed (as after kill -9).
  auto* crashed = new microvm_runtime(options);
  auto [ours, theirs] = channel_pair();
  auto spec = launch_spec("left-behind");
  spec.rootfs_path = vm_->image;
  spec.channel_fd = theirs.get();
  auto handle = crashed->create(spec);
  ASSERT_TRUE(handle) << handle.error().message;
  const pid_t qemu = handle->init_pid;
  ASSERT_TRUE(fs::exists(options.run_dir + "/left-behind.vm.json"));
  // The next run.
  microvm_runtime next(options);
  auto report = next.adopt();
  ASSERT_TRUE(report) << report.error().message;
  EXPECT_EQ(report->cleaned, std::vector<std::string>{"left-behind"});
  EXPECT_TRUE(report->adopted.empty()) << "a VM whose channel is gone is not taken over";
  EXPECT_TRUE(report->failures.empty());
  EXPECT_EQ(::waitpid(qemu, nullptr, WNOHANG), qemu) << "its QEMU still runs";
  size_t left = 0;
  for (const auto& entry : fs::directory_iterator(options.run_dir)) {
    ADD_FAILURE() << entry.path() << " is left";
    ++left;
  }
  EXPECT_EQ(left, 0u);
  for (const auto& path : handle->cgroup_paths)
    EXPECT_FALSE(fs::exists(path)) << path;
  auto again = next.adopt();
  ASSERT_TRUE(again);
  EXPECT_TRUE(again->cleaned.empty()) << "nothing twice";
}

TEST_F(microvm_snapshot, a_snapshot_from_another_host_is_refused_with_the_reason) {
  const std::string dir = vm_->dir.path() + "/base";
  ASSERT_TRUE(fs::exists(dir + "/snapshot.json"));
  const std::string moved = vm_->dir.path() + "/foreign";
  fs::create_directories(moved);
  auto record = read_vm_snapshot_record(dir);
  ASSERT_TRUE(record) << record.error().message;
  for (const char* name : {"state", "memory", "disk.ext4"})
    fs::create_symlink(dir + "/" + name, moved + "/" + name);
  auto foreign = *record;
  foreign.qemu_version = "9.9.9";
  ASSERT_TRUE(write_vm_snapshot_record(moved, foreign).is_ok());
  auto [ours, theirs] = channel_pair();
  auto spec = launch_spec("foreign");
  spec.channel_fd = theirs.get();
  auto refused = vm_->runtime->restore(spec, moved, restore_mode::clone);
  EXPECT_EQ(refused.code(), errc::wrong_state);
  EXPECT_NE(refused.error().message.find("QEMU '9.9.9'"), std::string::npos)
    << refused.error().message;
  foreign = *record;
  foreign.kernel_sha256 = std::string(64, '0');
  ASSERT_TRUE(write_vm_snapshot_record(moved, foreign).is_ok());
  refused = vm_->runtime->restore(spec, moved, restore_mode::clone);
  EXPECT_EQ(refused.code(), errc::wrong_state);
  EXPECT_NE(refused.error().message.find("kernel"), std::string::npos) << refused.error().message;
  EXPECT_FALSE(fs::exists(vm_->run_dir + "/foreign.ext4"));
}

TEST_F(microvm_snapshot, machines_are_saved_by_name_and_a_save_cut_short_is_made_again) {
  const fs::path partial = fs::path(vm_->options.machine_dir) / "ckpt_partial";
  fs::create_directories(partial);
  std::ofstream(partial / "state") << "the start of a save that a crash cut short";
  EXPECT_FALSE(vm_->runtime->has_machine("ckpt_partial"));
  auto saved = vm_->runtime->save_machine(base_id, "ckpt_partial");
  ASSERT_TRUE(saved) << saved.error().message;
  EXPECT_GT(*saved, 0u);
  EXPECT_TRUE(vm_->runtime->has_machine("ckpt_partial"));
  EXPECT_EQ(vm_->runtime->save_machine(base_id, "ckpt_partial").code(), errc::already_exists);
  EXPECT_EQ(vm_->runtime->save_machine(base_id, "../escape").code(), errc::invalid_argument);
  // The VM had no NIC: a restore that asks for a network is refused, naming it.
  auto [ours, theirs] = channel_pair();
  auto spec = launch_spec("with-network");
  spec.channel_fd = theirs.get();
  spec.network.enabled = true;
  auto refused = vm_->runtime->restore_machine(spec, "ckpt_partial");
  EXPECT_EQ(refused.code(), errc::wrong_state);
  if (!refused) {
    EXPECT_NE(refused.error().message.find("network"), std::string::npos)
      << refused.error().message;
  }
  EXPECT_TRUE(vm_->runtime->delete_machine("ckpt_partial").is_ok());
  EXPECT_FALSE(fs::exists(partial));
  EXPECT_TRUE(vm_->runtime->delete_machine("ckpt_partial").is_ok()) << "idempotent";
}

} // namespace
} // namespace airlock::worker::microvm
