// The node actor (the worker's side of the cluster protocol) on a real
// worker with real sandboxes: templates built on demand, idempotent create
// and destroy, exec with users, env and timeouts, the combined output stream
// with filters, offsets and the bounded buffer, stdin, signals, resize, and
// the files pass-through including a 100 MiB round trip and symlink escapes.

#include <gtest/gtest.h>

#include <csignal>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <caf/scoped_actor.hpp>

#include <filesystem>
#include <fstream>

#include "tests/rootfs/test_support.hpp"
#include "tests/worker/worker_fixture.hpp"
#include "worker/node_actor.hpp"

namespace airlock::worker::test {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using actors::exec_spec;
using actors::file_result;
using actors::file_spec;
using actors::file_verb;
using actors::node_sandbox;
using actors::output_batch;
using actors::output_request;
using actors::process_view;
constexpr auto timeout = 60s;
constexpr int64_t wall_start_ms = 1'800'000'000'000;

class node_actor_test : public ::testing::Test {
protected:
  void SetUp() override {
    if (auto reason = worker_skip_reason(); !reason.empty())
      GTEST_SKIP() << reason;
    // One worker test process at a time on this host (see worker_lifecycle_test).
    lock_fd_ = ::open("/run/airlock-worker-tests.lock", O_CREAT | O_RDWR | O_CLOEXEC, 0600);
    ASSERT_GE(lock_fd_, 0);
    ASSERT_EQ(::flock(lock_fd_, LOCK_EX), 0);
    scratch_ = std::make_unique<scratch_dir>();
    // No template yet: the node builds `minimal` on the first create.
    auto opened = worker_host::open(scratch_->path().string(), false);
    ASSERT_TRUE(opened) << opened.error().message;
    host_ = std::move(*opened);
    config_ = std::make_unique<actors::system_config>();
    system_ = std::make_unique<caf::actor_system>(*config_);
    worker_options options;
    options.sandbox.output_buffer_bytes = 4096;
    adjust(options);
    worker_ = spawn_worker(*system_, host_.context(options));
    caf::scoped_actor self{*system_};
    auto report = ask<recover_report>(self, worker_, timeout, wk_recover_atom::value);
    ASSERT_TRUE(report) << report.error().message;
    node_context context;
    context.worker = worker_;
    context.rootfs = host_.rootfs;
    context.templates.guest_binary = AIRLOCK_GUEST_BINARY;
    context.clock = clock_;
    node_ = spawn_node(*system_, context);
  }

  void TearDown() override {
    if (!scratch_) {
      release_lock();
      return;
    }
    stop(node_);
    stop(worker_);
    worker_ = spawn_worker(*system_, host_.context());
    {
      caf::scoped_actor self{*system_};
      auto report = ask<recover_report>(self, worker_, timeout, wk_recover_atom::value);
      EXPECT_TRUE(report && report->failures.empty());
    }
    stop(worker_);
    worker_ = worker_actor{};
    node_ = actors::node_actor{};
    system_.reset();
    config_.reset();
    if (host_.rootfs)
      (void)host_.rootfs->detach();
    host_ = {};
    scratch_.reset();
    (void)std::system("/usr/sbin/nft delete table inet airlock_wtest 2>/dev/null");
    std::error_code ignored;
    for (const auto& hierarchy : fs::directory_iterator("/sys/fs/cgroup", ignored))
      ::rmdir((hierarchy.path() / "airlock-wtest").c_str());
    release_lock();
  }

  ~node_actor_test() override { release_lock(); }

  /// Lets a derived fixture change the worker's options before it starts.
  virtual void adjust(worker_options& options) { (void)options; }

  void release_lock() {
    if (lock_fd_ >= 0)
      ::close(lock_fd_);
    lock_fd_ = -1;
  }

  template <class Handle>
  void stop(const Handle& actor) {
    caf::scoped_actor self{*system_};
    self->send_exit(actor, caf::exit_reason::user_shutdown);
    self->wait_for(actor);
  }

  static schema::sandbox_record record(const std::string& id,
                                       const std::string& template_name = "minimal") {
    schema::sandbox_record rec;
    rec.id = id;
    rec.tenant_id = "tn_test";
    rec.spec.template_name = template_name;
    rec.spec.disk_mb = 0;
    return rec;
  }

  result<node_sandbox> create(const schema::sandbox_record& rec) {
    caf::scoped_actor self{*system_};
    return ask<node_sandbox>(self, node_, timeout, actors::nd_create_atom::value, rec);
  }

  /// Creates and asserts it ran.
  void must_create(const std::string& id) {
    auto created = create(record(id));
    ASSERT_TRUE(created) << created.error().message;
    ASSERT_EQ(created->state, schema::sandbox_state::running);
  }

  result<process_view> exec(const std::string& id, const exec_spec& spec) {
    caf::scoped_actor self{*system_};
    return ask<process_view>(self, node_, timeout, actors::dp_exec_atom::value, id, spec);
  }

  std::string must_exec(const std::string& id, const exec_spec& spec) {
    auto view = exec(id, spec);
    EXPECT_TRUE(view) << view.error().message;
    return view ? view->process_id : std::string{};
  }

  result<output_batch> output(const std::string& id, const output_request& req) {
    caf::scoped_actor self{*system_};
    return ask<output_batch>(self, node_, timeout, actors::dp_output_atom::value, id, req);
  }

  /// Everything from `offset` until the process exits, as "fd:bytes@end " pieces.
  std::string collect(const std::string& id, const std::string& proc, uint64_t offset = 0,
                      bool want_stdout = true, bool want_stderr = true,
                      output_batch* last = nullptr) {
    std::string out;
    for (int round = 0; round < 10000; ++round) {
      output_request req{proc, offset, want_stdout, want_stderr, 0, 5000};
      auto batch = output(id, req);
      EXPECT_TRUE(batch) << batch.error().message;
      if (!batch)
        return out;
      for (const auto& segment : batch->segments)
        out += std::to_string(segment.fd) + ":" + segment.bytes + "@"
               + std::to_string(segment.end_offset) + " ";
      offset = batch->next_offset;
      if (batch->exited) {
        if (last != nullptr)
          *last = *batch;
        return out;
      }
    }
    ADD_FAILURE() << proc << " did not exit";
    return out;
  }

  /// Only the bytes (stdout and stderr) until the exit.
  std::string text(const std::string& id, const std::string& proc) {
    std::string out;
    uint64_t offset = 0;
    for (int round = 0; round < 10000; ++round) {
      auto batch = output(id, output_request{proc, offset, true, true, 0, 5000});
      EXPECT_TRUE(batch) << batch.error().message;
      if (!batch)
        return out;
      for (const auto& segment : batch->segments)
        out += segment.bytes;
      offset = batch->next_offset;
      if (batch->exited)
        return out;
    }
    ADD_FAILURE() << proc << " did not exit";
    return out;
  }

  /// Waits until the combined stream reaches `offset` (bytes arrived).
  void await_offset(const std::string& id, const std::string& proc, uint64_t offset) {
    uint64_t at = 0;
    for (int round = 0; round < 1000 && at < offset; ++round) {
      auto batch = output(id, output_request{proc, at, true, true, 0, 5000});
      ASSERT_TRUE(batch) << batch.error().message;
      at = batch->next_offset;
    }
    ASSERT_GE(at, offset);
  }

  result<process_view> proc(const std::string& id, const std::string& process, uint32_t wait_ms) {
    caf::scoped_actor self{*system_};
    return ask<process_view>(self, node_, timeout, actors::dp_proc_atom::value, id, process,
                             wait_ms);
  }

  /// The process's row, waiting up to `wait_ms` for its exit.
  process_view proc_of(const std::string& id, const std::string& process, uint32_t wait_ms) {
    auto view = proc(id, process, wait_ms);
    EXPECT_TRUE(view) << view.error().message;
    return view ? *view : process_view{};
  }

  /// The process's row once it exited (bounded).
  process_view proc_wait(const std::string& id, const std::string& process) {
    return proc_of(id, process, 20'000);
  }

  result<bool> stdin_bytes(const std::string& id, const std::string& process, std::string bytes,
                           bool close) {
    caf::scoped_actor self{*system_};
    return ask<bool>(self, node_, timeout, actors::dp_stdin_atom::value, id, process,
                     std::move(bytes), close);
  }

  result<file_result> file(const std::string& id, file_spec spec) {
    caf::scoped_actor self{*system_};
    return ask<file_result>(self, node_, timeout, actors::dp_file_atom::value, id, std::move(spec));
  }

  std::unique_ptr<scratch_dir> scratch_;
  worker_host host_;
  std::shared_ptr<manual_wall_clock> clock_ = std::make_shared<manual_wall_clock>(wall_start_ms);
  std::unique_ptr<actors::system_config> config_;
  std::unique_ptr<caf::actor_system> system_;
  worker_actor worker_;
  actors::node_actor node_;
  int lock_fd_ = -1;
};

exec_spec shell(std::string line, bool stdin_open = false) {
  exec_spec spec;
  spec.cmd = std::move(line);
  spec.stdin_open = stdin_open;
  return spec;
}

exec_spec argv(std::vector<std::string> args) {
  exec_spec spec;
  spec.argv = std::move(args);
  return spec;
}

file_spec fspec(file_verb verb, std::string path) {
  file_spec spec;
  spec.verb = verb;
  spec.path = std::move(path);
  return spec;
}

TEST_F(node_actor_test, builds_a_missing_builtin_template_once_for_concurrent_creates) {
  ASSERT_FALSE(host_.rootfs->has_template("minimal"));
  caf::scoped_actor self{*system_};
  // Both creates are in flight before either is answered: they share one build.
  auto first = self->request(node_, timeout, actors::nd_create_atom::value, record("nd-tpl-a"));
  auto second = self->request(node_, timeout, actors::nd_create_atom::value, record("nd-tpl-b"));
  std::vector<result<node_sandbox>> replies;
  for (auto* handle : {&first, &second})
    handle->receive([&replies](node_sandbox& box) { replies.emplace_back(box); },
                    [&replies](caf::error& err) { replies.emplace_back(to_status(err)); });
  for (const auto& reply : replies) {
    ASSERT_TRUE(reply) << reply.error().message;
    EXPECT_EQ(reply->state, schema::sandbox_state::running);
  }
  EXPECT_TRUE(host_.rootfs->has_template("minimal"));
  EXPECT_EQ(text("nd-tpl-b", must_exec("nd-tpl-b", argv({"echo", "built"}))), "built\n");
}

TEST_F(node_actor_test, an_unknown_template_fails_not_found_naming_the_templates_that_exist) {
  auto created = create(record("nd-unknown", "no-such-template"));
  ASSERT_FALSE(created);
  EXPECT_EQ(created.code(), errc::not_found);
  EXPECT_NE(created.error().message.find("no-such-template"), std::string::npos);
  EXPECT_NE(created.error().message.find("minimal"), std::string::npos);
  EXPECT_NE(created.error().message.find("base"), std::string::npos);
  caf::scoped_actor self{*system_};
  auto listed = ask<std::vector<node_sandbox>>(self, node_, timeout, actors::nd_list_atom::value);
  ASSERT_TRUE(listed);
  EXPECT_TRUE(listed->empty());
}

TEST_F(node_actor_test, create_destroy_pause_and_resume_are_idempotent) {
  must_create("nd-idem");
  auto again = create(record("nd-idem"));
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(again->state, schema::sandbox_state::running);
  auto other_tenant = record("nd-idem");
  other_tenant.tenant_id = "tn_other";
  EXPECT_EQ(create(other_tenant).code(), errc::already_exists);
  caf::scoped_actor self{*system_};
  auto listed = ask<std::vector<node_sandbox>>(self, node_, timeout, actors::nd_list_atom::value);
  ASSERT_TRUE(listed);
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ(listed->front().sandbox_id, "nd-idem");
  for (int round = 0; round < 2; ++round) {
    auto paused =
      ask<node_sandbox>(self, node_, timeout, actors::nd_pause_atom::value, std::string("nd-idem"));
    ASSERT_TRUE(paused) << paused.error().message;
    EXPECT_EQ(paused->state, schema::sandbox_state::paused);
  }
  EXPECT_EQ(exec("nd-idem", argv({"true"})).code(), errc::wrong_state);
  auto resumed =
    ask<node_sandbox>(self, node_, timeout, actors::nd_resume_atom::value, std::string("nd-idem"));
  ASSERT_TRUE(resumed) << resumed.error().message;
  EXPECT_EQ(resumed->state, schema::sandbox_state::running);
  for (int round = 0; round < 2; ++round) {
    auto destroyed = ask<node_sandbox>(self, node_, timeout, actors::nd_destroy_atom::value,
                                       std::string("nd-idem"));
    ASSERT_TRUE(destroyed) << destroyed.error().message;
    EXPECT_EQ(destroyed->state, schema::sandbox_state::destroyed);
  }
  listed = ask<std::vector<node_sandbox>>(self, node_, timeout, actors::nd_list_atom::value);
  ASSERT_TRUE(listed);
  EXPECT_TRUE(listed->empty());
  auto pause_gone =
    ask<node_sandbox>(self, node_, timeout, actors::nd_pause_atom::value, std::string("nd-idem"));
  EXPECT_EQ(pause_gone.code(), errc::not_found);
  EXPECT_EQ(exec("nd-idem", argv({"true"})).code(), errc::not_found);
}

TEST_F(node_actor_test, combined_output_interleaves_streams_in_arrival_order_with_filters) {
  must_create("nd-out");
  // Each line is written only after the previous one arrived, so the
  // arrival order is known.
  auto proc =
    must_exec("nd-out", shell("read l; echo out1; read l; echo err1 >&2; read l; echo out2", true));
  ASSERT_TRUE(stdin_bytes("nd-out", proc, "\n", false));
  await_offset("nd-out", proc, 5);
  ASSERT_TRUE(stdin_bytes("nd-out", proc, "\n", false));
  await_offset("nd-out", proc, 10);
  ASSERT_TRUE(stdin_bytes("nd-out", proc, "\n", true));
  output_batch last;
  EXPECT_EQ(collect("nd-out", proc, 0, true, true, &last), "1:out1\n@5 2:err1\n@10 1:out2\n@15 ");
  EXPECT_TRUE(last.exited);
  EXPECT_EQ(last.exit_code, 0);
  EXPECT_EQ(last.next_offset, 15u);
  EXPECT_EQ(collect("nd-out", proc, 0, true, false, &last), "1:out1\n@5 1:out2\n@15 ");
  EXPECT_EQ(last.next_offset, 15u);
  EXPECT_EQ(collect("nd-out", proc, 0, false, true, &last), "2:err1\n@10 ");
  EXPECT_EQ(last.next_offset, 15u);
  // Resume from any earlier offset, also inside a segment.
  EXPECT_EQ(collect("nd-out", proc, 7), "2:r1\n@10 1:out2\n@15 ");
  auto small = output("nd-out", output_request{proc, 0, true, true, 3, 0});
  ASSERT_TRUE(small) << small.error().message;
  ASSERT_EQ(small->segments.size(), 1u);
  EXPECT_EQ(small->segments[0].bytes, "out");
  EXPECT_EQ(small->next_offset, 3u);
  EXPECT_FALSE(small->exited);
  EXPECT_EQ(output("nd-out", output_request{proc, 16, true, true, 0, 0}).code(),
            errc::invalid_argument);
  EXPECT_EQ(output("nd-out", output_request{"proc_none", 0, true, true, 0, 0}).code(),
            errc::not_found);
}

TEST_F(node_actor_test, a_reader_behind_the_buffer_gets_gone_with_the_offset_to_resume_from) {
  must_create("nd-gone");
  auto proc = must_exec("nd-gone", shell("yes abcdefghi | head -c 10000"));
  auto ended = proc_wait("nd-gone", proc);
  ASSERT_EQ(ended.state, schema::process_state::exited);
  auto old = output("nd-gone", output_request{proc, 0, true, true, 0, 0});
  ASSERT_FALSE(old);
  EXPECT_EQ(old.code(), errc::gone);
  EXPECT_NE(old.error().message.find("resume from offset 5904"), std::string::npos)
    << old.error().message;
  auto tail = output("nd-gone", output_request{proc, 5904, true, true, 0, 0});
  ASSERT_TRUE(tail) << tail.error().message;
  EXPECT_EQ(tail->start_offset, 5904u);
  ASSERT_EQ(tail->segments.size(), 1u);
  EXPECT_EQ(tail->segments[0].bytes.size(), 4096u);
  EXPECT_EQ(tail->segments[0].bytes.substr(4092), "ghi\n");
  EXPECT_EQ(tail->segments[0].end_offset, 10000u);
  EXPECT_TRUE(tail->exited);
}

TEST_F(node_actor_test, stdin_reaches_the_process_and_closing_it_ends_cat) {
  must_create("nd-stdin");
  auto request = argv({"cat"});
  request.stdin_open = true;
  auto proc = must_exec("nd-stdin", request);
  auto wrote = stdin_bytes("nd-stdin", proc, "hello\n", false);
  ASSERT_TRUE(wrote) << wrote.error().message;
  wrote = stdin_bytes("nd-stdin", proc, "world\n", true);
  ASSERT_TRUE(wrote) << wrote.error().message;
  EXPECT_EQ(text("nd-stdin", proc), "hello\nworld\n");
  auto no_stdin = must_exec("nd-stdin", argv({"sleep", "1000"}));
  EXPECT_EQ(stdin_bytes("nd-stdin", no_stdin, "x", false).code(), errc::wrong_state);
}

TEST_F(node_actor_test, a_signal_reaches_the_process_and_ends_it) {
  must_create("nd-signal");
  auto proc = must_exec("nd-signal", argv({"sleep", "1000"}));
  caf::scoped_actor self{*system_};
  auto sent = ask<bool>(self, node_, timeout, actors::dp_signal_atom::value,
                        std::string("nd-signal"), proc, int32_t{SIGTERM});
  ASSERT_TRUE(sent) << sent.error().message;
  auto view = proc_wait("nd-signal", proc);
  EXPECT_EQ(view.state, schema::process_state::exited);
  EXPECT_EQ(view.signal, SIGTERM);
  auto bad = ask<bool>(self, node_, timeout, actors::dp_signal_atom::value,
                       std::string("nd-signal"), proc, int32_t{0});
  EXPECT_EQ(bad.code(), errc::invalid_argument);
}

TEST_F(node_actor_test, resize_changes_the_terminal_size_of_a_pty_process) {
  must_create("nd-pty");
  auto spec = shell("read l; stty size", true);
  spec.pty = true;
  auto proc = must_exec("nd-pty", spec);
  caf::scoped_actor self{*system_};
  auto resized = ask<bool>(self, node_, timeout, actors::dp_resize_atom::value,
                           std::string("nd-pty"), proc, uint16_t{40}, uint16_t{100});
  ASSERT_TRUE(resized) << resized.error().message;
  ASSERT_TRUE(stdin_bytes("nd-pty", proc, "\n", false));
  EXPECT_NE(text("nd-pty", proc).find("40 100"), std::string::npos);
  auto plain = must_exec("nd-pty", argv({"sleep", "1000"}));
  auto refused = ask<bool>(self, node_, timeout, actors::dp_resize_atom::value,
                           std::string("nd-pty"), plain, uint16_t{40}, uint16_t{100});
  EXPECT_EQ(refused.code(), errc::wrong_state);
}

TEST_F(node_actor_test, timeout_s_kills_the_process_group) {
  must_create("nd-timeout");
  auto spec = shell("sleep 1000; echo never");
  spec.timeout_s = 1;
  auto proc = must_exec("nd-timeout", spec);
  auto view = proc_wait("nd-timeout", proc);
  EXPECT_EQ(view.state, schema::process_state::exited);
  EXPECT_EQ(view.signal, SIGKILL);
  EXPECT_GE(view.ended_at_ms - view.started_at_ms, 1000);
  EXPECT_EQ(text("nd-timeout", proc), "");
}

TEST_F(node_actor_test, runs_as_a_user_given_by_name_or_uid_with_the_merged_env) {
  auto rec = record("nd-user");
  rec.spec.env = {{"A", "sandbox"}, {"B", "sandbox"}};
  auto created = create(rec);
  ASSERT_TRUE(created) << created.error().message;
  auto by_name = shell("id -u; id -g");
  by_name.user = "nobody";
  EXPECT_EQ(text("nd-user", must_exec("nd-user", by_name)), "65534\n65534\n");
  auto by_uid = shell("id -u; id -g");
  by_uid.user = "1234";
  EXPECT_EQ(text("nd-user", must_exec("nd-user", by_uid)), "1234\n1234\n");
  auto as_root = shell("id -u");
  as_root.user = "root";
  EXPECT_EQ(text("nd-user", must_exec("nd-user", as_root)), "0\n");
  auto unknown = shell("id -u");
  unknown.user = "nosuchuser";
  auto refused = exec("nd-user", unknown);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.code(), errc::invalid_argument);
  EXPECT_NE(refused.error().message.find("nosuchuser"), std::string::npos);
  auto env = shell("echo $A $B $PATH");
  env.env = {{"B", "process"}};
  EXPECT_EQ(text("nd-user", must_exec("nd-user", env)),
            "sandbox process /usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n");
}

TEST_F(node_actor_test, dp_proc_waits_for_the_exit_and_reports_unix_times) {
  must_create("nd-proc");
  auto proc = must_exec("nd-proc", shell("read l; exit 7", true));
  auto running = proc_of("nd-proc", proc, 0);
  EXPECT_EQ(running.state, schema::process_state::running);
  EXPECT_LE(running.started_at_ms, wall_start_ms);
  EXPECT_GT(running.started_at_ms, wall_start_ms - 60'000);
  EXPECT_EQ(running.ended_at_ms, 0);
  auto still = proc_of("nd-proc", proc, 200); // the wait ends first
  EXPECT_EQ(still.state, schema::process_state::running);
  caf::scoped_actor self{*system_};
  auto listed = ask<std::vector<process_view>>(self, node_, timeout, actors::dp_procs_atom::value,
                                               std::string("nd-proc"));
  ASSERT_TRUE(listed) << listed.error().message;
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ(listed->front().process_id, proc);
  ASSERT_TRUE(stdin_bytes("nd-proc", proc, "\n", true));
  auto ended = proc_wait("nd-proc", proc);
  EXPECT_EQ(ended.state, schema::process_state::exited);
  EXPECT_EQ(ended.exit_code, 7);
  EXPECT_GE(ended.ended_at_ms, ended.started_at_ms);
  // A program that cannot run is a process that exited with 127 and says why.
  auto missing = exec("nd-proc", argv({"/no/such/program"}));
  ASSERT_TRUE(missing) << missing.error().message;
  EXPECT_FALSE(missing->process_id.empty());
  EXPECT_EQ(missing->state, schema::process_state::failed);
  EXPECT_EQ(missing->exit_code, 127);
  EXPECT_FALSE(missing->error.empty());
  output_batch last;
  EXPECT_EQ(collect("nd-proc", missing->process_id, 0, true, true, &last), "");
  EXPECT_EQ(last.exit_code, 127);
}

TEST_F(node_actor_test, files_round_trip_including_100_mib) {
  must_create("nd-files");
  auto write = fspec(file_verb::write, "/data/sub/a.txt");
  write.data = "hello";
  write.mode = 0600;
  auto wrote = file("nd-files", write);
  ASSERT_TRUE(wrote) << wrote.error().message;
  EXPECT_EQ(wrote->written, 5u);
  auto read = file("nd-files", fspec(file_verb::read, "/data/sub/a.txt"));
  ASSERT_TRUE(read) << read.error().message;
  EXPECT_EQ(read->data, "hello");
  auto stat = file("nd-files", fspec(file_verb::stat, "/data/sub/a.txt"));
  ASSERT_TRUE(stat) << stat.error().message;
  EXPECT_EQ(stat->info.name, "a.txt");
  EXPECT_EQ(stat->info.type, "file");
  EXPECT_EQ(stat->info.size_bytes, 5u);
  EXPECT_EQ(stat->info.mode, 0600u);
  EXPECT_GT(stat->info.modified_at_ms, int64_t{1'600'000'000'000});
  ASSERT_TRUE(file("nd-files", fspec(file_verb::mkdir, "/data/d1/d2")));
  ASSERT_TRUE(
    text("nd-files", must_exec("nd-files", argv({"ln", "-s", "sub/a.txt", "/data/link"}))).empty());
  auto listed = file("nd-files", fspec(file_verb::list, "/data"));
  ASSERT_TRUE(listed) << listed.error().message;
  std::string kinds;
  for (const auto& entry : listed->entries)
    kinds += entry.name + "=" + entry.type + " ";
  EXPECT_EQ(kinds, "d1=dir link=symlink sub=dir ");
  auto rename = fspec(file_verb::rename, "/data/sub/a.txt");
  rename.to = "/data/sub/b.txt";
  ASSERT_TRUE(file("nd-files", rename));
  EXPECT_EQ(file("nd-files", fspec(file_verb::read, "/data/sub/a.txt")).code(), errc::not_found);
  auto directory = file("nd-files", fspec(file_verb::read, "/data/sub"));
  ASSERT_FALSE(directory);
  EXPECT_EQ(directory.code(), errc::invalid_argument);
  EXPECT_NE(directory.error().message.find("is a directory"), std::string::npos);
  auto remove = fspec(file_verb::remove, "/data");
  remove.recursive = true;
  ASSERT_TRUE(file("nd-files", remove));
  EXPECT_EQ(file("nd-files", fspec(file_verb::stat, "/data")).code(), errc::not_found);

  // 100 MiB, not a repeating pattern, there and back.
  std::string big(size_t{100} << 20, '\0');
  uint64_t x = 0x9e3779b97f4a7c15ULL;
  for (auto& c : big) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    c = static_cast<char>(x);
  }
  auto write_big = fspec(file_verb::write, "/big.bin");
  write_big.data = big;
  auto wrote_big = file("nd-files", std::move(write_big));
  ASSERT_TRUE(wrote_big) << wrote_big.error().message;
  EXPECT_EQ(wrote_big->written, big.size());
  auto read_big = file("nd-files", fspec(file_verb::read, "/big.bin"));
  ASSERT_TRUE(read_big) << read_big.error().message;
  EXPECT_EQ(read_big->data.size(), big.size());
  EXPECT_TRUE(read_big->data == big);

  // Beyond the limit (256 MiB by default): refused before any byte moves.
  ASSERT_EQ(text("nd-files", must_exec("nd-files", shell("dd if=/dev/zero of=/huge bs=1048576 "
                                                         "count=0 seek=300 2>/dev/null"))),
            "");
  EXPECT_EQ(file("nd-files", fspec(file_verb::read, "/huge")).code(), errc::too_large);
}

TEST_F(node_actor_test, symlinks_and_dotdot_never_reach_the_host) {
  must_create("nd-escape");
  const auto secret = scratch_->path() / "host-secret.txt";
  std::ofstream(secret) << "host-secret";
  const std::string host_path = secret.string();
  const std::string host_dir = scratch_->path().string();
  ASSERT_TRUE(
    text("nd-escape",
         must_exec("nd-escape", shell("ln -s " + host_path + " /esc1; ln -s ../../../../../.."
                                      + host_path + " /esc2; ln -s " + host_dir + " /escdir")))
      .empty());
  for (const auto& path :
       std::vector<std::string>{"/esc1", "/esc2", "/../../../../.." + host_path}) {
    auto read = file("nd-escape", fspec(file_verb::read, path));
    EXPECT_FALSE(read) << path << " read the host's file";
    if (read) {
      EXPECT_EQ(read->data.find("host-secret"), std::string::npos) << path;
    }
  }
  auto write = fspec(file_verb::write, "/escdir/planted.txt");
  write.data = "planted";
  (void)file("nd-escape", write);
  EXPECT_FALSE(fs::exists(scratch_->path() / "planted.txt"));
}

/// The default 1 MiB buffer (well above the guest's 256 KiB credit window),
/// with short reader timeouts so that the unattended cases end quickly.
class output_pacing_test : public node_actor_test {
protected:
  void adjust(worker_options& options) override {
    options.sandbox.output_buffer_bytes = size_t{1} << 20;
    options.sandbox.reader_idle_ms = 1000;
    options.sandbox.first_reader_wait_ms = 1000;
  }
};

constexpr uint64_t pacing_bytes = uint64_t{64} << 20;

TEST_F(output_pacing_test, a_reader_taking_small_reads_gets_every_byte_of_a_fast_writer_in_order) {
  must_create("nd-pace");
  // Random bytes (no pattern could hide a skipped or repeated stretch), kept in
  // a file to compare with, then written out as fast as cat can.
  auto proc = must_exec("nd-pace", shell("mkdir -p /data && head -c " + std::to_string(pacing_bytes)
                                         + " /dev/urandom > /data/pace.bin && cat /data/pace.bin"));
  std::string got;
  got.reserve(pacing_bytes);
  uint64_t offset = 0;
  output_batch last;
  for (int round = 0; round < 100'000 && !last.exited; ++round) {
    auto batch = output("nd-pace", output_request{proc, offset, true, true, 16 * 1024, 5000});
    ASSERT_TRUE(batch) << "at offset " << offset << ": " << batch.error().message;
    for (const auto& segment : batch->segments) {
      ASSERT_EQ(segment.fd, 1);
      got += segment.bytes;
      ASSERT_EQ(segment.end_offset, got.size());
    }
    offset = batch->next_offset;
    last = *batch;
  }
  ASSERT_TRUE(last.exited);
  EXPECT_EQ(last.exit_code, 0);
  EXPECT_EQ(last.signal, 0);
  ASSERT_EQ(got.size(), pacing_bytes);
  auto written = file("nd-pace", fspec(file_verb::read, "/data/pace.bin"));
  ASSERT_TRUE(written) << written.error().message;
  ASSERT_EQ(written->data.size(), pacing_bytes);
  EXPECT_TRUE(got == written->data) << "the bytes read differ from the bytes written";
}

TEST_F(output_pacing_test, without_a_reader_a_fast_writer_completes_and_old_output_is_gone) {
  must_create("nd-unread");
  const uint64_t size = uint64_t{16} << 20;
  auto proc = must_exec("nd-unread", shell("head -c " + std::to_string(size) + " /dev/zero"));
  auto ended = proc_wait("nd-unread", proc);
  ASSERT_EQ(ended.state, schema::process_state::exited);
  EXPECT_EQ(ended.exit_code, 0);
  auto old = output("nd-unread", output_request{proc, 0, true, true, 0, 0});
  ASSERT_FALSE(old);
  EXPECT_EQ(old.code(), errc::gone);
  auto tail = output("nd-unread", output_request{proc, size - (1 << 20), true, true, 0, 0});
  ASSERT_TRUE(tail) << tail.error().message;
  EXPECT_EQ(tail->start_offset, size - (1 << 20));
}

TEST_F(output_pacing_test, a_reader_that_goes_away_stops_holding_the_writer_back) {
  must_create("nd-away");
  const uint64_t size = uint64_t{16} << 20;
  auto proc = must_exec("nd-away", shell("head -c " + std::to_string(size) + " /dev/zero"));
  auto first = output("nd-away", output_request{proc, 0, true, true, 4096, 5000});
  ASSERT_TRUE(first) << first.error().message;
  // While the reader is active, what it has not read is still there.
  auto again = output("nd-away", output_request{proc, first->next_offset, true, true, 4096, 0});
  ASSERT_TRUE(again) << again.error().message;
  // Then it stops reading: the writer is released and ends.
  auto ended = proc_wait("nd-away", proc);
  ASSERT_EQ(ended.state, schema::process_state::exited);
  EXPECT_EQ(ended.exit_code, 0);
  EXPECT_EQ(output("nd-away", output_request{proc, again->next_offset, true, true, 0, 0}).code(),
            errc::gone);
}

} // namespace
} // namespace airlock::worker::test
