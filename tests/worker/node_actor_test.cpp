// The node actor (the worker's side of the cluster protocol) on a real
// worker with real sandboxes: templates built on demand, idempotent create
// and destroy, exec with users, env and timeouts, the combined output stream
// with filters, offsets and the bounded buffer, stdin, signals, resize, and
// the files pass-through including a 100 MiB round trip and symlink escapes,
// a template's start_cmd, and how long ago the data plane was used.

#include "tests/worker/node_actor_fixture.hpp"
#include "worker/command/command.hpp"
#include "worker/rootfs/fs_util.hpp"

namespace airlock::worker::test {
namespace {

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

TEST_F(node_actor_test, a_template_s_start_cmd_runs_at_each_start_including_one_from_a_checkpoint) {
  must_create("nd-first"); // builds minimal
  // A template like minimal whose manifest names a start_cmd.
  auto& rootfs = *host_.rootfs;
  auto staging = rootfs.create_template("with-start");
  ASSERT_TRUE(staging) << staging.error().message;
  auto copied = run_checked("copying minimal", {"cp", "-a", "--reflink=auto", "--",
                                                (*rootfs.template_path("minimal")).string() + "/.",
                                                staging->string()});
  ASSERT_TRUE(copied) << copied.message;
  ASSERT_TRUE(rootfs.seal_template("with-start"));
  template_manifest manifest;
  manifest.name = "with-start";
  manifest.source = "test";
  manifest.start_cmd = "echo started >> /root/start-log; exec sleep 600";
  ASSERT_TRUE(
    write_file(manifest_path(rootfs.templates_dir(), "with-start"), manifest_to_json(manifest)));

  auto created = create(record("nd-start", "with-start"));
  ASSERT_TRUE(created) << created.error().message;
  caf::scoped_actor self{*system_};
  auto listed = ask<std::vector<process_view>>(self, node_, timeout, actors::dp_procs_atom::value,
                                               std::string("nd-start"));
  ASSERT_TRUE(listed) << listed.error().message;
  ASSERT_EQ(listed->size(), 1u) << "the start_cmd runs once the create answers";
  EXPECT_EQ(listed->front().state, schema::process_state::running);
  auto log_once = must_exec("nd-start", shell("while ! test -s /root/start-log; do sleep 0.05; "
                                              "done; cat /root/start-log"));
  EXPECT_EQ(text("nd-start", log_once), "started\n");

  // From a checkpoint (a restore or a fork): the files come back and the
  // start_cmd runs again.
  ASSERT_TRUE(ask<uint64_t>(self, node_, timeout, actors::nd_ckpt_atom::value,
                            std::string("nd-start"), std::string("nd-start-ck"), false));
  auto from = record("nd-start-2", "with-start");
  from.spec.from_checkpoint = "nd-start-ck";
  auto restored = create(from);
  ASSERT_TRUE(restored) << restored.error().message;
  auto log_twice = must_exec("nd-start-2", shell("while [ $(wc -l < /root/start-log) -lt 2 ]; do "
                                                 "sleep 0.05; done; cat /root/start-log"));
  EXPECT_EQ(text("nd-start-2", log_twice), "started\nstarted\n");
  // A template without one starts nothing.
  auto plain = ask<std::vector<process_view>>(self, node_, timeout, actors::dp_procs_atom::value,
                                              std::string("nd-first"));
  ASSERT_TRUE(plain);
  EXPECT_TRUE(plain->empty());
}

TEST_F(node_actor_test, an_upload_is_spooled_in_order_and_a_new_node_starts_with_an_empty_spool) {
  caf::scoped_actor self{*system_};
  auto spool = [&](uint64_t offset, const std::string& bytes, bool last) {
    return ask<uint64_t>(self, node_, timeout, actors::nd_spool_atom::value,
                         std::string("tpl_up_v1"), offset, bytes, last);
  };
  auto first = spool(0, "abc", false);
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_EQ(*first, 3u);
  EXPECT_EQ(spool(0, "abc", false).code(), errc::wrong_state) << "a repeat is recognised";
  auto second = spool(3, "de", false);
  ASSERT_TRUE(second);
  EXPECT_EQ(*second, 5u);
  auto bad = ask<uint64_t>(self, node_, timeout, actors::nd_spool_atom::value,
                           std::string("../escape"), uint64_t{0}, std::string("x"), true);
  EXPECT_EQ(bad.code(), errc::invalid_argument);
  const auto dir = host_.rootfs->templates_dir().parent_path() / "spool"; // docs/worker.md
  EXPECT_EQ(*read_file(dir / "tpl_up_v1.part"), "abcde");

  // A node that starts again (a restarted worker) finds no upload left.
  stop(node_);
  node_context context;
  context.worker = worker_;
  context.rootfs = host_.rootfs;
  context.clock = clock_;
  node_ = spawn_node(*system_, context);
  EXPECT_FALSE(path_exists(dir / "tpl_up_v1.part"));
  auto fresh = spool(0, "new", true);
  ASSERT_TRUE(fresh) << fresh.error().message;
  EXPECT_EQ(*read_file(dir / "tpl_up_v1"), "new") << "the last chunk completes the file";
}

TEST_F(node_actor_test, checkpoints_are_taken_listed_and_deleted_through_the_node) {
  must_create("nd-ckpt");
  caf::scoped_actor self{*system_};
  auto taken = ask<uint64_t>(self, node_, timeout, actors::nd_ckpt_atom::value,
                             std::string("nd-ckpt"), std::string("nd-ck1"), false);
  ASSERT_TRUE(taken) << taken.error().message;
  // A repeat after a lost reply says the checkpoint exists.
  auto repeat = ask<uint64_t>(self, node_, timeout, actors::nd_ckpt_atom::value,
                              std::string("nd-ckpt"), std::string("nd-ck1"), false);
  EXPECT_EQ(repeat.code(), errc::already_exists);
  auto held = ask<std::vector<std::string>>(self, node_, timeout, actors::nd_ckpts_atom::value);
  ASSERT_TRUE(held) << held.error().message;
  EXPECT_EQ(*held, std::vector<std::string>{"nd-ck1"});
  for (int round = 0; round < 2; ++round) {
    auto deleted =
      ask<bool>(self, node_, timeout, actors::nd_ckptdel_atom::value, std::string("nd-ck1"));
    ASSERT_TRUE(deleted) << deleted.error().message;
  }
  held = ask<std::vector<std::string>>(self, node_, timeout, actors::nd_ckpts_atom::value);
  ASSERT_TRUE(held);
  EXPECT_TRUE(held->empty());
  auto unknown = ask<uint64_t>(self, node_, timeout, actors::nd_ckpt_atom::value,
                               std::string("nobody"), std::string("nd-ck2"), false);
  EXPECT_EQ(unknown.code(), errc::not_found);
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

TEST_F(node_actor_test, dp_quiet_says_how_long_ago_a_data_plane_call_used_the_sandbox) {
  must_create("nd-quiet");
  caf::scoped_actor self{*system_};
  auto quiet = [&] {
    auto answer =
      ask<int64_t>(self, node_, timeout, actors::dp_quiet_atom::value, std::string("nd-quiet"));
    EXPECT_TRUE(answer) << answer.error().message;
    return answer ? *answer : int64_t{-2};
  };
  EXPECT_EQ(quiet(), -1) << "nothing has used it yet";
  // The idle policy's own process listing is not activity.
  ASSERT_TRUE(ask<std::vector<process_view>>(self, node_, timeout, actors::dp_procs_atom::value,
                                             std::string("nd-quiet")));
  EXPECT_EQ(quiet(), -1);
  ASSERT_TRUE(file("nd-quiet", fspec(file_verb::stat, "/")));
  const int64_t after_file = quiet();
  EXPECT_GE(after_file, 0);
  EXPECT_LT(after_file, 60'000);
  auto unknown =
    ask<int64_t>(self, node_, timeout, actors::dp_quiet_atom::value, std::string("nobody"));
  ASSERT_TRUE(unknown);
  EXPECT_EQ(*unknown, -1);
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

} // namespace
} // namespace airlock::worker::test
