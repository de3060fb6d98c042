// The worker and sandbox actors on a real actor system with real sandboxes:
// create, exec, stdin, output offsets and the bounded buffer, pause/resume,
// destroy leaving nothing behind, and a restart that cleans up.

#include <gtest/gtest.h>

#include <csignal>
#include <fcntl.h>
#include <net/if.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <caf/scoped_actor.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "tests/rootfs/test_support.hpp"
#include "tests/worker/worker_fixture.hpp"

namespace airlock::worker::test {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
constexpr auto timeout = 30s;

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

class worker_lifecycle : public real_worker_test {
protected:
  void SetUp() override {
    if (auto reason = worker_skip_reason(); !reason.empty())
      GTEST_SKIP() << reason;
    ASSERT_NO_FATAL_FAILURE(open_host());
    start_worker();
  }

  void TearDown() override { close_host(); }

  /// Ends the worker and (linked) its sandbox actors, as a stopping airlockd does.
  void stop_worker() { stop(worker_); }

  void start_worker() {
    worker_options options;
    options.sandbox.output_buffer_bytes = 4096;
    worker_ = spawn_worker(*system_, host_.context(options));
    caf::scoped_actor self{*system_};
    auto report = ask<recover_report>(self, worker_, timeout, wk_recover_atom::value);
    ASSERT_TRUE(report) << report.error().message;
  }

  sandbox_actor create(const std::string& id) {
    caf::scoped_actor self{*system_};
    create_sandbox_request request;
    request.id = id;
    auto created = ask<sandbox_actor>(self, worker_, timeout, wk_create_atom::value, request);
    EXPECT_TRUE(created) << created.error().message;
    return created ? *created : sandbox_actor{};
  }

  std::string exec(const sandbox_actor& box, exec_spec request) {
    caf::scoped_actor self{*system_};
    auto id = ask<std::string>(self, box, timeout, sbx_exec_atom::value, std::move(request));
    EXPECT_TRUE(id) << id.error().message;
    return id ? *id : std::string{};
  }

  /// Reads stream `fd` of `process` from `offset` until the process exits.
  std::string collect(const sandbox_actor& box, const std::string& process, uint8_t fd = 1,
                      uint64_t offset = 0) {
    caf::scoped_actor self{*system_};
    std::string out;
    for (int round = 0; round < 10000; ++round) {
      read_request request{process, fd, offset, 0, 5000};
      auto reply = ask<read_reply>(self, box, timeout, sbx_read_atom::value, request);
      EXPECT_TRUE(reply) << reply.error().message;
      if (!reply)
        break;
      out += reply->bytes;
      offset = reply->next_offset;
      if (reply->exited)
        return out;
    }
    ADD_FAILURE() << "process " << process << " did not exit";
    return out;
  }

  process_view status_of(const sandbox_actor& box, const std::string& process) {
    caf::scoped_actor self{*system_};
    auto info = ask<process_view>(self, box, timeout, sbx_status_atom::value, process);
    EXPECT_TRUE(info) << info.error().message;
    return info ? *info : process_view{};
  }
};

exec_spec argv(std::vector<std::string> args) {
  exec_spec request;
  request.argv = std::move(args);
  return request;
}

file_request file(file_op op, std::string path) {
  file_request request;
  request.op = op;
  request.path = std::move(path);
  return request;
}

exec_spec shell(std::string line) {
  exec_spec request;
  request.cmd = std::move(line);
  return request;
}

/// What must be gone after a sandbox is destroyed.
/// No process, mount, cgroup, veth or state file of the sandbox is left
/// (its root filesystem may be).
void expect_nothing_running(const sandbox_handle& handle, const worker_host& host) {
  EXPECT_EQ(::kill(handle.init_pid, 0), -1) << "init " << handle.init_pid << " still alive";
  const auto mounts = slurp("/proc/self/mountinfo");
  EXPECT_EQ(mounts.find(handle.id), std::string::npos) << "a mount names " << handle.id;
  for (const auto& cgroup : handle.cgroup_paths)
    EXPECT_FALSE(fs::exists(cgroup)) << cgroup;
  if (!handle.host_interface.empty()) {
    EXPECT_EQ(::if_nametoindex(handle.host_interface.c_str()), 0u) << handle.host_interface;
  }
  for (const auto& entry : fs::directory_iterator(host.data_dir + "/runtime"))
    EXPECT_EQ(entry.path().filename().string().find(handle.id), std::string::npos) << entry.path();
}

void expect_nothing_left(const sandbox_handle& handle, const worker_host& host) {
  expect_nothing_running(handle, host);
  auto on_disk = host.rootfs->list_sandboxes();
  ASSERT_TRUE(on_disk);
  EXPECT_EQ(std::count(on_disk->begin(), on_disk->end(), handle.id), 0);
  EXPECT_FALSE(host.rootfs->sandbox_path(handle.id));
}

sandbox_handle handle_of(const worker_host& host, const std::string& id) {
  for (auto& handle : host.runtime->list())
    if (handle.id == id)
      return handle;
  ADD_FAILURE() << "the runtime does not know " << id;
  return {};
}

TEST_F(worker_lifecycle, runs_echo_and_reports_output_and_exit_code) {
  auto box = create("wl-echo");
  auto proc = exec(box, argv({"echo", "hi"}));
  EXPECT_EQ(collect(box, proc), "hi\n");
  auto info = status_of(box, proc);
  EXPECT_EQ(info.state, process_state::exited);
  EXPECT_EQ(info.exit_code, 0);
  EXPECT_GT(info.pid, 0);
  auto failing = exec(box, shell("echo oops >&2; exit 3"));
  EXPECT_EQ(collect(box, failing, 2), "oops\n");
  EXPECT_EQ(status_of(box, failing).exit_code, 3);
}

TEST_F(worker_lifecycle, exec_of_a_missing_program_fails_with_the_guests_error) {
  auto box = create("wl-missing");
  caf::scoped_actor self{*system_};
  auto id = ask<std::string>(self, box, timeout, sbx_exec_atom::value, argv({"/nonexistent"}));
  ASSERT_FALSE(id);
  EXPECT_EQ(id.code(), errc::not_found) << id.error().message;
}

TEST_F(worker_lifecycle, stdin_round_trips_through_cat) {
  auto box = create("wl-stdin");
  auto request = argv({"cat"});
  request.stdin_open = true;
  auto proc = exec(box, request);
  caf::scoped_actor self{*system_};
  auto wrote =
    ask<bool>(self, box, timeout, sbx_stdin_atom::value, proc, std::string("hello\n"), false);
  ASSERT_TRUE(wrote) << wrote.error().message;
  wrote = ask<bool>(self, box, timeout, sbx_stdin_atom::value, proc, std::string("world\n"), true);
  ASSERT_TRUE(wrote) << wrote.error().message;
  EXPECT_EQ(collect(box, proc), "hello\nworld\n");
  EXPECT_EQ(status_of(box, proc).exit_code, 0);
}

TEST_F(worker_lifecycle, output_resumes_from_an_offset) {
  auto box = create("wl-offset");
  auto proc = exec(box, argv({"echo", "hello world"}));
  EXPECT_EQ(collect(box, proc), "hello world\n");
  EXPECT_EQ(collect(box, proc, 1, 6), "world\n");
  caf::scoped_actor self{*system_};
  auto past =
    ask<read_reply>(self, box, timeout, sbx_read_atom::value, read_request{proc, 1, 100, 0, 0});
  ASSERT_FALSE(past);
  EXPECT_EQ(past.code(), errc::invalid_argument);
}

TEST_F(worker_lifecycle, bounded_buffer_drops_the_oldest_bytes_and_says_so) {
  auto box = create("wl-bounded");
  auto proc = exec(box, shell("yes abcdefghi | head -c 10000"));
  // Wait for the exit without reading from 0 (which is dropped by then).
  caf::scoped_actor self{*system_};
  for (int round = 0; round < 1000; ++round) {
    auto info = ask<process_view>(self, box, timeout, sbx_status_atom::value, proc);
    ASSERT_TRUE(info);
    if (info->state == process_state::exited)
      break;
    auto waited = ask<read_reply>(self, box, 5000ms, sbx_read_atom::value,
                                  read_request{proc, 1, info->stdout_bytes, 0, 1000});
    (void)waited;
  }
  auto info = status_of(box, proc);
  ASSERT_EQ(info.state, process_state::exited);
  EXPECT_EQ(info.stdout_bytes, 10000u);
  auto old =
    ask<read_reply>(self, box, timeout, sbx_read_atom::value, read_request{proc, 1, 0, 0, 0});
  ASSERT_FALSE(old);
  EXPECT_EQ(old.code(), errc::wrong_state);
  EXPECT_NE(old.error().message.find("resume from offset 5904"), std::string::npos)
    << old.error().message;
  auto tail = collect(box, proc, 1, 10000 - 4096);
  EXPECT_EQ(tail.size(), 4096u);
  EXPECT_EQ(tail.substr(tail.size() - 4), "ghi\n"); // 10000 = 1000 lines of 10 bytes
}

TEST_F(worker_lifecycle, files_pass_through_to_the_guest) {
  auto box = create("wl-files");
  caf::scoped_actor self{*system_};
  auto write = file(file_op::write, "/work/a.txt");
  write.data = "data";
  write.parents = true;
  auto wrote = ask<file_reply>(self, box, timeout, sbx_file_atom::value, write);
  ASSERT_TRUE(wrote) << wrote.error().message;
  EXPECT_EQ(wrote->bytes, 4u);
  auto read = file(file_op::read, "/work/a.txt");
  auto data = ask<file_reply>(self, box, timeout, sbx_file_atom::value, read);
  ASSERT_TRUE(data) << data.error().message;
  EXPECT_EQ(data->data, "data");
  auto list = file(file_op::list, "/work");
  auto listed = ask<file_reply>(self, box, timeout, sbx_file_atom::value, list);
  ASSERT_TRUE(listed) << listed.error().message;
  ASSERT_EQ(listed->entries.size(), 1u);
  EXPECT_EQ(listed->entries[0].name, "a.txt");
  auto missing = file(file_op::stat, "/work/none");
  auto stat = ask<file_reply>(self, box, timeout, sbx_file_atom::value, missing);
  ASSERT_FALSE(stat);
  EXPECT_EQ(stat.code(), errc::not_found);
}

TEST_F(worker_lifecycle, pause_stops_progress_and_resume_restarts_it) {
  auto box = create("wl-pause");
  auto proc = exec(box, shell("i=0; while true; do i=$((i+1)); echo $i > /counter.tmp; "
                              "mv /counter.tmp /counter; done"));
  caf::scoped_actor self{*system_};
  auto read_counter = [&]() -> long {
    for (int attempt = 0; attempt < 1000; ++attempt) {
      auto data =
        ask<file_reply>(self, box, timeout, sbx_file_atom::value, file(file_op::read, "/counter"));
      if (data && !data->data.empty())
        return std::stol(data->data);
    }
    ADD_FAILURE() << "no counter";
    return -1;
  };
  const long before = read_counter();
  ASSERT_GT(before, 0);
  auto paused = ask<bool>(self, worker_, timeout, wk_pause_atom::value, std::string("wl-pause"));
  ASSERT_TRUE(paused) << paused.error().message;
  auto stats = ask<sandbox_stats>(self, box, timeout, sbx_stats_atom::value);
  ASSERT_TRUE(stats) << stats.error().message;
  EXPECT_TRUE(stats->frozen);
  // While frozen the guest answers nothing: the actor refuses guest work.
  auto refused =
    ask<file_reply>(self, box, timeout, sbx_file_atom::value, file(file_op::read, "/counter"));
  EXPECT_EQ(refused.code(), errc::wrong_state);
  // The counter, read from the host side of the rootfs, does not move; the
  // sleep is an observation window, not synchronisation.
  auto root = host_.rootfs->sandbox_path("wl-pause");
  ASSERT_TRUE(root);
  const auto frozen_value = slurp((*root / "counter").string());
  const auto cpu_before = stats->cpu_usage_ns;
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(slurp((*root / "counter").string()), frozen_value);
  auto still = ask<sandbox_stats>(self, box, timeout, sbx_stats_atom::value);
  ASSERT_TRUE(still);
  EXPECT_EQ(still->cpu_usage_ns, cpu_before);
  auto resumed = ask<bool>(self, worker_, timeout, wk_resume_atom::value, std::string("wl-pause"));
  ASSERT_TRUE(resumed) << resumed.error().message;
  auto thawed = ask<sandbox_stats>(self, box, timeout, sbx_stats_atom::value);
  ASSERT_TRUE(thawed);
  EXPECT_FALSE(thawed->frozen);
  long after = before;
  for (int attempt = 0; attempt < 10000 && after <= std::stol("0" + frozen_value); ++attempt)
    after = read_counter();
  EXPECT_GT(after, std::stol("0" + frozen_value));
  auto killed = ask<bool>(self, box, timeout, sbx_signal_atom::value, proc, int32_t{SIGKILL});
  EXPECT_TRUE(killed) << killed.error().message;
  (void)collect(box, proc);
  EXPECT_EQ(status_of(box, proc).signal, SIGKILL);
}

TEST_F(worker_lifecycle, destroy_leaves_no_mount_cgroup_veth_state_file_or_subvolume) {
  auto box = create("wl-destroy");
  auto proc = exec(box, argv({"sleep", "1000"}));
  ASSERT_FALSE(proc.empty());
  auto handle = handle_of(host_, "wl-destroy");
  ASSERT_GT(handle.init_pid, 0);
  caf::scoped_actor self{*system_};
  auto destroyed =
    ask<bool>(self, worker_, timeout, wk_destroy_atom::value, std::string("wl-destroy"));
  ASSERT_TRUE(destroyed) << destroyed.error().message;
  expect_nothing_left(handle, host_);
  auto listed = ask<std::vector<sandbox_entry>>(self, worker_, timeout, wk_list_atom::value);
  ASSERT_TRUE(listed);
  EXPECT_TRUE(listed->empty());
  auto record = host_.store->get(storage::keyspace::sandboxes, "wl-destroy");
  ASSERT_TRUE(record);
  EXPECT_FALSE(record->has_value());
  // Idempotent.
  destroyed = ask<bool>(self, worker_, timeout, wk_destroy_atom::value, std::string("wl-destroy"));
  EXPECT_TRUE(destroyed);
}

TEST_F(worker_lifecycle, a_dead_guest_fails_requests_and_destroy_still_cleans_up) {
  auto box = create("wl-dead");
  auto proc = exec(box, argv({"sleep", "1000"}));
  auto handle = handle_of(host_, "wl-dead");
  // kill(0, ...) would signal the test's whole process group (ctest included).
  ASSERT_GT(handle.init_pid, 0);
  ASSERT_EQ(::kill(handle.init_pid, SIGKILL), 0);
  caf::scoped_actor self{*system_};
  // The sleeping process dies with the guest; its reader learns it.
  auto reply =
    ask<read_reply>(self, box, timeout, sbx_read_atom::value, read_request{proc, 1, 0, 0, 20000});
  if (reply) {
    EXPECT_TRUE(reply->exited);
  } else {
    EXPECT_EQ(reply.code(), errc::unavailable) << reply.error().message;
  }
  auto info = status_of(box, proc);
  EXPECT_EQ(info.state, process_state::failed);
  auto refused = ask<std::string>(self, box, timeout, sbx_exec_atom::value, argv({"true"}));
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.code(), errc::unavailable) << refused.error().message;
  auto destroyed =
    ask<bool>(self, worker_, timeout, wk_destroy_atom::value, std::string("wl-dead"));
  ASSERT_TRUE(destroyed) << destroyed.error().message;
  expect_nothing_left(handle, host_);
}

TEST_F(worker_lifecycle, a_restarted_worker_ends_the_earlier_runs_processes_and_keeps_its_files) {
  auto box = create("wl-restart");
  (void)exec(box, argv({"sleep", "1000"}));
  EXPECT_EQ(collect(box, exec(box, shell("echo kept > /root/file && echo ok"))), "ok\n");
  auto handle = handle_of(host_, "wl-restart");
  auto record = host_.store->get(storage::keyspace::sandboxes, "wl-restart");
  ASSERT_TRUE(record && record->has_value());
  // The earlier run goes away without destroying anything: actors, runtime
  // object and store close (what a crashed airlockd leaves).
  box = sandbox_actor{};
  stop_worker();
  worker_ = worker_actor{};
  system_.reset();
  host_.runtime.reset();
  host_.store.reset();
  auto runtime = namespace_runtime::open(worker_runtime_options(host_.data_dir + "/runtime"));
  ASSERT_TRUE(runtime) << runtime.error().message;
  host_.runtime = std::shared_ptr<namespace_runtime>(std::move(*runtime));
  auto store = storage::open_rocksdb_store(host_.data_dir + "/store");
  ASSERT_TRUE(store) << store.error().message;
  host_.store = std::shared_ptr<storage::kv_store>(std::move(*store));
  system_ = std::make_unique<caf::actor_system>(*config_);
  worker_ = spawn_worker(*system_, host_.context());
  caf::scoped_actor self{*system_};
  auto report = ask<recover_report>(self, worker_, timeout, wk_recover_atom::value);
  ASSERT_TRUE(report) << report.error().message;
  EXPECT_TRUE(report->failures.empty()) << report->failures.front();
  EXPECT_EQ(std::count(report->kept.begin(), report->kept.end(), "wl-restart"), 1);
  expect_nothing_running(handle, host_);
  auto kept = host_.store->get(storage::keyspace::sandboxes, "wl-restart");
  ASSERT_TRUE(kept && kept->has_value());
  auto stopped = schema::decode_sandbox(**kept);
  ASSERT_TRUE(stopped);
  EXPECT_EQ(stopped->state, schema::sandbox_state::suspended) << "recorded as stopped";
  EXPECT_TRUE(host_.rootfs->sandbox_path("wl-restart")) << "the files stay";

  // Brought back: the files are there, the processes are not.
  create_sandbox_request again;
  again.id = "wl-restart";
  again.reuse_root = true;
  auto back = ask<sandbox_actor>(self, worker_, timeout, wk_create_atom::value, again);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(collect(*back, exec(*back, argv({"cat", "/root/file"}))), "kept\n");
  // A stop (as on SIGTERM) keeps the files again; a destroy of the stopped
  // sandbox removes them and its record.
  auto released =
    ask<bool>(self, worker_, timeout, wk_release_atom::value, std::string("wl-restart"));
  ASSERT_TRUE(released) << released.error().message;
  EXPECT_TRUE(host_.rootfs->sandbox_path("wl-restart"));
  auto destroyed =
    ask<bool>(self, worker_, timeout, wk_destroy_atom::value, std::string("wl-restart"));
  ASSERT_TRUE(destroyed) << destroyed.error().message;
  EXPECT_FALSE(host_.rootfs->sandbox_path("wl-restart"));
  auto gone = host_.store->get(storage::keyspace::sandboxes, "wl-restart");
  ASSERT_TRUE(gone);
  EXPECT_FALSE(gone->has_value());
  // Bringing back what is gone is not_found, and creates nothing.
  auto missing = ask<sandbox_actor>(self, worker_, timeout, wk_create_atom::value, again);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.code(), errc::not_found);
  EXPECT_FALSE(host_.rootfs->sandbox_path("wl-restart"));
}

TEST_F(worker_lifecycle, recover_cleans_up_a_create_that_never_finished) {
  auto box = create("wl-half");
  auto handle = handle_of(host_, "wl-half");
  // As if the worker crashed between recording the create and finishing it.
  schema::sandbox_record half;
  half.id = "wl-half";
  half.state = schema::sandbox_state::creating;
  ASSERT_TRUE(host_.store->put(storage::keyspace::sandboxes, "wl-half", schema::encode(half)));
  box = sandbox_actor{};
  stop_worker();
  worker_ = worker_actor{};
  system_.reset();
  host_.runtime.reset();
  auto runtime = namespace_runtime::open(worker_runtime_options(host_.data_dir + "/runtime"));
  ASSERT_TRUE(runtime) << runtime.error().message;
  host_.runtime = std::shared_ptr<namespace_runtime>(std::move(*runtime));
  system_ = std::make_unique<caf::actor_system>(*config_);
  worker_ = spawn_worker(*system_, host_.context());
  caf::scoped_actor self{*system_};
  auto report = ask<recover_report>(self, worker_, timeout, wk_recover_atom::value);
  ASSERT_TRUE(report) << report.error().message;
  EXPECT_EQ(std::count(report->cleaned.begin(), report->cleaned.end(), "wl-half"), 1);
  expect_nothing_left(handle, host_);
}

} // namespace
} // namespace airlock::worker::test

namespace airlock::worker::test {
namespace {

/// Blocks of the appended log in a checkpoint: each must be whole and hold
/// its own index's digit. Returns how many whole blocks there are.
size_t whole_blocks(const std::string& log, size_t block) {
  EXPECT_EQ(log.size() % block, 0u) << "a block was captured half written: " << log.size();
  for (size_t index = 0; index < log.size() / block; ++index) {
    const char digit = static_cast<char>('0' + index % 10);
    const auto first_other = log.find_first_not_of(digit, index * block);
    EXPECT_TRUE(first_other == std::string::npos || first_other >= (index + 1) * block)
      << "block " << index << " holds a byte of another write";
  }
  return log.size() / block;
}

TEST_F(worker_lifecycle, checkpoints_taken_under_a_writer_hold_only_whole_writes) {
  auto box = create("wl-ckpt");
  // Each round writes one 64 KiB block with a single write(2), at the block's
  // own offset, filled with the block's index modulo 10.
  auto writer = exec(box, shell("for d in 0 1 2 3 4 5 6 7 8 9; do head -c 65536 /dev/zero | "
                                "tr '\\0' $d > /r$d; done; i=0; while true; do "
                                "dd if=/r$((i % 10)) of=/log bs=65536 count=1 seek=$i "
                                "conv=notrunc 2>/dev/null; i=$((i+1)); done"));
  caf::scoped_actor self{*system_};
  auto root = host_.rootfs->sandbox_path("wl-ckpt");
  ASSERT_TRUE(root);
  // The writer has started once the log has two blocks (each look is a round
  // trip to the guest).
  for (int attempt = 0; attempt < 20000; ++attempt) {
    auto seen =
      ask<file_reply>(self, box, timeout, sbx_file_atom::value, file(file_op::stat, "/log"));
    if (seen && seen->info.size >= 2 * 65536)
      break;
  }
  size_t previous = 0;
  for (int round = 0; round < 5; ++round) {
    const std::string id = "wl-ckpt-" + std::to_string(round);
    auto taken =
      ask<uint64_t>(self, worker_, timeout, wk_ckpt_atom::value, std::string("wl-ckpt"), id, false);
    ASSERT_TRUE(taken) << taken.error().message;
    auto path = host_.rootfs->checkpoint_path(id);
    ASSERT_TRUE(path) << path.error().message;
    auto blocks = whole_blocks(slurp((*path / "log").string()), 65536);
    EXPECT_GE(blocks, previous) << "a later checkpoint holds less";
    previous = blocks;
  }
  EXPECT_GE(previous, 2u);
  // The writer goes on after each checkpoint: the sandbox was thawed.
  auto stats = ask<sandbox_stats>(self, box, timeout, sbx_stats_atom::value);
  ASSERT_TRUE(stats);
  EXPECT_FALSE(stats->frozen);
  auto files =
    ask<file_reply>(self, box, timeout, sbx_file_atom::value, file(file_op::read, "/r3"));
  EXPECT_TRUE(files) << "guest work is accepted again: " << files.error().message;
  EXPECT_EQ(status_of(box, writer).ended_at_ms, 0)
    << "the writer ended: " << collect(box, writer, 2);
  auto killed = ask<bool>(self, box, timeout, sbx_signal_atom::value, writer, int32_t{SIGKILL});
  EXPECT_TRUE(killed) << killed.error().message;
}

TEST_F(worker_lifecycle, checkpoints_are_listed_refuse_a_taken_id_outlive_their_sandbox_and_go) {
  auto box = create("wl-ckpt2");
  caf::scoped_actor self{*system_};
  auto written = ask<file_reply>(self, box, timeout, sbx_file_atom::value, [] {
    auto request = file(file_op::write, "/kept");
    request.data = "before the checkpoint";
    return request;
  }());
  ASSERT_TRUE(written) << written.error().message;
  // A paused sandbox stays paused through a checkpoint.
  ASSERT_TRUE(ask<bool>(self, worker_, timeout, wk_pause_atom::value, std::string("wl-ckpt2")));
  auto taken = ask<uint64_t>(self, worker_, timeout, wk_ckpt_atom::value, std::string("wl-ckpt2"),
                             std::string("ck-one"), false);
  ASSERT_TRUE(taken) << taken.error().message;
  auto stats = ask<sandbox_stats>(self, box, timeout, sbx_stats_atom::value);
  ASSERT_TRUE(stats);
  EXPECT_TRUE(stats->frozen);
  ASSERT_TRUE(ask<bool>(self, worker_, timeout, wk_resume_atom::value, std::string("wl-ckpt2")));
  auto again = ask<uint64_t>(self, worker_, timeout, wk_ckpt_atom::value, std::string("wl-ckpt2"),
                             std::string("ck-one"), false);
  EXPECT_EQ(again.code(), errc::already_exists);
  auto bad = ask<uint64_t>(self, worker_, timeout, wk_ckpt_atom::value, std::string("wl-ckpt2"),
                           std::string("../escape"), false);
  EXPECT_EQ(bad.code(), errc::invalid_argument);
  auto unknown = ask<uint64_t>(self, worker_, timeout, wk_ckpt_atom::value, std::string("nobody"),
                               std::string("ck-two"), false);
  EXPECT_EQ(unknown.code(), errc::not_found);
  auto held = ask<std::vector<std::string>>(self, worker_, timeout, wk_ckpts_atom::value);
  ASSERT_TRUE(held) << held.error().message;
  EXPECT_EQ(*held, std::vector<std::string>{"ck-one"});
  // The checkpoint keeps the files after the sandbox is gone.
  ASSERT_TRUE(ask<bool>(self, worker_, timeout, wk_destroy_atom::value, std::string("wl-ckpt2")));
  auto path = host_.rootfs->checkpoint_path("ck-one");
  ASSERT_TRUE(path) << path.error().message;
  EXPECT_EQ(slurp((*path / "kept").string()), "before the checkpoint");
  ASSERT_TRUE(ask<bool>(self, worker_, timeout, wk_ckptdel_atom::value, std::string("ck-one")));
  EXPECT_FALSE(host_.rootfs->checkpoint_path("ck-one"));
  // Deleting is idempotent.
  EXPECT_TRUE(ask<bool>(self, worker_, timeout, wk_ckptdel_atom::value, std::string("ck-one")));
  held = ask<std::vector<std::string>>(self, worker_, timeout, wk_ckpts_atom::value);
  ASSERT_TRUE(held);
  EXPECT_TRUE(held->empty());
}

} // namespace
} // namespace airlock::worker::test
