// Integration tests: the real airlock-guest binary behind a socketpair,
// driven through guest_client. No sleeps: every wait is an event with a
// bounded timeout.

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <optional>

#include "guest_harness.hpp"
#include "tests/support/environment.hpp"
#include "tests/support/host.hpp"

namespace airlock::guest {
namespace {

using testing::guest_process;

constexpr int wait_ms = 10'000;

class agent : public ::testing::Test {
protected:
  void SetUp() override { start_guest({}); }

  void start_guest(std::vector<std::string> args, client_options options = {}) {
    guest_ = guest_process::spawn(std::move(args), options);
    ASSERT_NE(guest_, nullptr);
    auto greeting = guest_->client().handshake(wait_ms);
    ASSERT_TRUE(greeting) << greeting.error().message;
    EXPECT_EQ(greeting->protocol_version, protocol_version);
  }

  guest_client& client() { return guest_->client(); }

  static start_request shell(std::string line) {
    start_request request;
    request.process.cmd = std::move(line);
    request.process.env = {{"PATH", "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"}};
    return request;
  }

  /// The next event for `stream`, failing the test on timeout.
  guest_message next_for(uint32_t stream) {
    for (;;) {
      auto event = client().next_event(wait_ms);
      if (!event) {
        ADD_FAILURE() << "no event: " << event.error().message;
        return error_reply{};
      }
      if (auto* out = std::get_if<output_chunk>(&*event); out && out->stream_id != stream)
        continue;
      return *event;
    }
  }

  /// Collects output of `stream` until it exits.
  std::pair<std::string, exited> drain(uint32_t stream) {
    std::string out;
    for (;;) {
      auto event = next_for(stream);
      if (auto* chunk = std::get_if<output_chunk>(&event))
        out += chunk->bytes;
      else if (auto* e = std::get_if<exited>(&event))
        return {out, *e};
      else if (auto* failure = std::get_if<error_reply>(&event)) {
        ADD_FAILURE() << "error: " << failure->message;
        return {out, exited{}};
      }
    }
  }

  std::unique_ptr<guest_process> guest_;
};

TEST_F(agent, echo_round_trip_reports_output_and_exit_code) {
  start_request echo;
  echo.process.argv = {"echo", "hello"};
  auto ran = client().run(echo, "", wait_ms);
  ASSERT_TRUE(ran) << ran.error().message;
  EXPECT_EQ(ran->out, "hello\n");
  EXPECT_EQ(ran->exit_code, 0);
  auto failing = client().run(shell("exit 7"), "", wait_ms);
  ASSERT_TRUE(failing);
  EXPECT_EQ(failing->exit_code, 7);
  EXPECT_EQ(failing->signal, 0);
}

TEST_F(agent, what_it_runs_is_the_oom_killers_first_choice_not_the_agent) {
  auto ran = client().run(shell("cat /proc/self/oom_score_adj"), "", wait_ms);
  ASSERT_TRUE(ran) << ran.error().message;
  EXPECT_EQ(ran->out, "500\n") << "a program scores above the agent that serves it";
}

TEST_F(agent, true_round_trip_and_ping_work_repeatedly) {
  start_request t;
  t.process.argv = {"true"};
  for (int i = 0; i < 20; ++i) {
    auto ran = client().run(t, "", wait_ms);
    ASSERT_TRUE(ran) << ran.error().message;
    EXPECT_EQ(ran->exit_code, 0);
  }
  auto rtt = client().ping(wait_ms);
  ASSERT_TRUE(rtt);
  EXPECT_GE(*rtt, 0);
}

TEST_F(agent, keeps_stdout_and_stderr_apart_with_gapless_sequences_and_offsets) {
  auto id = client().start(shell("echo out1; echo err1 >&2; echo out2; echo err22 >&2"));
  ASSERT_TRUE(id);
  std::string out, err;
  uint64_t next_sequence = 0;
  uint64_t offsets[3] = {0, 0, 0};
  for (;;) {
    auto event = next_for(*id);
    if (auto* chunk = std::get_if<output_chunk>(&event)) {
      EXPECT_EQ(chunk->sequence, next_sequence++);
      ASSERT_TRUE(chunk->fd == 1 || chunk->fd == 2);
      EXPECT_EQ(chunk->offset, offsets[chunk->fd]);
      offsets[chunk->fd] += chunk->bytes.size();
      (chunk->fd == 1 ? out : err) += chunk->bytes;
    } else if (auto* e = std::get_if<exited>(&event)) {
      EXPECT_EQ(e->exit_code, 0);
      EXPECT_EQ(e->stdout_bytes, out.size());
      EXPECT_EQ(e->stderr_bytes, err.size());
      break;
    } else if (std::holds_alternative<error_reply>(event)) {
      FAIL() << "unexpected error";
    }
  }
  EXPECT_EQ(out, "out1\nout2\n");
  EXPECT_EQ(err, "err1\nerr22\n");
}

TEST_F(agent, cat_echoes_stdin_until_it_is_closed) {
  start_request cat;
  cat.process.argv = {"cat"};
  cat.process.stdin_open = true;
  std::string input(300 * 1024, 'x'); // more than one stdin window
  for (size_t i = 0; i < input.size(); i += 97)
    input[i] = static_cast<char>('a' + i % 26);
  auto id = client().start(cat);
  ASSERT_TRUE(id);
  std::string out;
  // Feed in slices and take what has arrived in between, granting output
  // credit, so that neither window can block the other.
  for (size_t at = 0; at < input.size(); at += 16 * 1024) {
    ASSERT_TRUE(
      client().write_stdin(*id, std::string_view(input).substr(at, 16 * 1024), wait_ms).is_ok());
    while (auto event = client().next_event(0))
      if (auto* chunk = std::get_if<output_chunk>(&*event))
        out += chunk->bytes;
  }
  ASSERT_TRUE(client().close_stdin(*id).is_ok());
  auto [rest, done] = drain(*id);
  EXPECT_EQ(done.exit_code, 0);
  EXPECT_EQ(out + rest, input);
}

TEST_F(agent, signal_term_to_sleep_reports_signal_15) {
  start_request sleeper;
  sleeper.process.argv = {"sleep", "100"};
  auto id = client().start(sleeper);
  ASSERT_TRUE(id);
  auto first = next_for(*id);
  ASSERT_TRUE(std::holds_alternative<started>(first));
  EXPECT_GT(std::get<started>(first).pid, 0);
  ASSERT_TRUE(client().signal(*id, SIGTERM).is_ok());
  auto [out, done] = drain(*id);
  EXPECT_EQ(done.signal, SIGTERM);
  EXPECT_EQ(done.exit_code, -1);
}

TEST_F(agent, pty_process_sees_a_terminal_and_its_resize) {
  auto request = shell("tty; stty size; read line; stty size");
  request.process.pty = true;
  request.process.rows = 24;
  request.process.cols = 80;
  request.process.stdin_open = true;
  auto id = client().start(request);
  ASSERT_TRUE(id);
  std::string out;
  while (out.find("24 80") == std::string::npos) {
    auto event = next_for(*id);
    if (auto* chunk = std::get_if<output_chunk>(&event)) {
      EXPECT_EQ(chunk->fd, 1);
      out += chunk->bytes;
    }
    ASSERT_FALSE(std::holds_alternative<exited>(event)) << out;
    ASSERT_FALSE(std::holds_alternative<error_reply>(event)) << out;
  }
  EXPECT_NE(out.find("/dev/pts/"), std::string::npos) << out;
  ASSERT_TRUE(client().resize(*id, 40, 100).is_ok());
  ASSERT_TRUE(client().write_stdin(*id, "\n", wait_ms).is_ok());
  auto [rest, done] = drain(*id);
  EXPECT_EQ(done.exit_code, 0);
  EXPECT_NE(rest.find("40 100"), std::string::npos) << rest;
}

TEST_F(agent, honours_env_cwd_and_user) {
  AIRLOCK_REQUIRE_ROOT("switching users");
  auto request = shell("echo \"$FOO\"; pwd; id -u; id -g");
  request.process.env.emplace_back("FOO", "bar baz");
  request.process.cwd = "/tmp";
  request.process.run_as.set_user = true;
  request.process.run_as.uid = 65534;
  request.process.run_as.gid = 65534;
  auto ran = client().run(request, "", wait_ms);
  ASSERT_TRUE(ran) << ran.error().message;
  EXPECT_EQ(ran->out, "bar baz\n/tmp\n65534\n65534\n");
  EXPECT_EQ(ran->exit_code, 0);
}

TEST_F(agent, reports_a_missing_program_and_a_missing_cwd_as_not_found) {
  start_request missing;
  missing.process.argv = {"/nonexistent/program"};
  auto ran = client().run(missing, "", wait_ms);
  EXPECT_EQ(ran.code(), errc::not_found);
  auto bad_cwd = shell("true");
  bad_cwd.process.cwd = "/nonexistent-dir";
  EXPECT_EQ(client().run(bad_cwd, "", wait_ms).code(), errc::not_found);
  auto relative_cwd = shell("true");
  relative_cwd.process.cwd = "tmp";
  EXPECT_EQ(client().run(relative_cwd, "", wait_ms).code(), errc::invalid_argument);
}

TEST_F(agent, without_credit_the_guest_stops_at_the_window) {
  guest_.reset();
  client_options manual;
  manual.auto_credit = false;
  start_guest({}, manual);
  auto window = client().peer().limits.window_bytes;
  auto id = client().start(shell("head -c 1048576 /dev/zero"));
  ASSERT_TRUE(id);
  uint64_t received = 0;
  while (received < window) {
    auto event = next_for(*id);
    if (auto* chunk = std::get_if<output_chunk>(&event))
      received += chunk->bytes.size();
    ASSERT_FALSE(std::holds_alternative<exited>(event));
  }
  EXPECT_EQ(received, window);
  // Nothing more may come until we grant credit.
  auto more = client().next_event(200);
  EXPECT_EQ(more.code(), errc::timeout);
  auto stats = client().stats(wait_ms);
  ASSERT_TRUE(stats);
  EXPECT_LE(stats->stream_buffered_bytes_max, window);
  while (received < 1048576) {
    ASSERT_TRUE(client().grant(*id, window).is_ok());
    uint64_t granted_until = received + window;
    while (received < std::min<uint64_t>(granted_until, 1048576)) {
      auto event = next_for(*id);
      if (auto* chunk = std::get_if<output_chunk>(&event))
        received += chunk->bytes.size();
    }
  }
  ASSERT_TRUE(client().grant(*id, window).is_ok()); // room to see the end of output
  auto [rest, done] = drain(*id);
  EXPECT_EQ(rest.size(), 0u);
  EXPECT_EQ(done.exit_code, 0);
  EXPECT_EQ(done.stdout_bytes, 1048576u);
}

TEST_F(agent, output_held_back_past_the_exit_drain_time_is_delivered_whole) {
  guest_.reset();
  client_options manual;
  manual.auto_credit = false;
  start_guest({}, manual);
  auto window = client().peer().limits.window_bytes;
  // Fits the pipe plus one window: the process exits while the rest waits for credit.
  constexpr uint64_t total = 1 << 20;
  auto id = client().start(shell("head -c 1048576 /dev/zero"));
  ASSERT_TRUE(id);
  uint64_t received = 0;
  while (received < window) {
    auto event = next_for(*id);
    if (auto* chunk = std::get_if<output_chunk>(&event))
      received += chunk->bytes.size();
  }
  // Longer than the agent's exit drain time (250 ms) without credit.
  EXPECT_EQ(client().next_event(600).code(), errc::timeout);
  for (;;) {
    ASSERT_TRUE(client().grant(*id, window).is_ok());
    uint64_t granted_until = received + window;
    std::optional<exited> done;
    while (!done && received < granted_until) {
      auto event = next_for(*id);
      if (auto* chunk = std::get_if<output_chunk>(&event))
        received += chunk->bytes.size();
      else if (auto* e = std::get_if<exited>(&event))
        done = *e;
    }
    if (done) {
      EXPECT_EQ(done->stdout_bytes, total);
      break;
    }
  }
  EXPECT_EQ(received, total);
}

TEST_F(agent, a_capped_output_limit_stops_the_guest_at_the_cap_until_it_is_raised) {
  auto window = client().peer().limits.window_bytes;
  const uint64_t cap = uint64_t{window} * 2;
  auto id = client().start(shell("head -c 1048576 /dev/zero"));
  ASSERT_TRUE(id);
  ASSERT_TRUE(client().limit_output(*id, cap).is_ok());
  uint64_t received = 0;
  while (received < cap) {
    auto event = next_for(*id);
    if (auto* chunk = std::get_if<output_chunk>(&event))
      received += chunk->bytes.size();
    ASSERT_FALSE(std::holds_alternative<exited>(event));
  }
  EXPECT_EQ(received, cap);
  // Auto credit is on, but the cap holds: nothing more comes.
  EXPECT_EQ(client().next_event(200).code(), errc::timeout);
  ASSERT_TRUE(client().limit_output(*id, guest_client::no_output_limit).is_ok());
  auto [rest, done] = drain(*id);
  EXPECT_EQ(received + rest.size(), 1048576u);
  EXPECT_EQ(done.exit_code, 0);
}

TEST_F(agent, a_fast_writer_and_a_slow_reader_keep_guest_buffers_bounded) {
  constexpr uint64_t total = 64ull << 20;
  auto window = client().peer().limits.window_bytes;
  auto chunk_max = client().peer().limits.output_chunk_bytes;
  auto id = client().start(shell("head -c 67108864 /dev/zero"));
  ASSERT_TRUE(id);
  uint64_t received = 0;
  uint64_t next_sequence = 0;
  uint64_t chunks = 0;
  for (;;) {
    auto event = next_for(*id);
    if (auto* chunk = std::get_if<output_chunk>(&event)) {
      ASSERT_EQ(chunk->sequence, next_sequence++);
      ASSERT_EQ(chunk->offset, received);
      ASSERT_EQ(chunk->bytes.find_first_not_of('\0'), std::string::npos);
      received += chunk->bytes.size();
      // The slow part: a full round trip to the guest every few chunks.
      if (++chunks % 8 == 0) {
        auto stats = client().stats(wait_ms);
        ASSERT_TRUE(stats);
        EXPECT_LE(stats->stream_buffered_bytes_max, window + chunk_max);
      }
    } else if (auto* e = std::get_if<exited>(&event)) {
      EXPECT_EQ(e->exit_code, 0);
      EXPECT_EQ(e->stdout_bytes, total);
      EXPECT_LE(e->buffered_bytes_max, window + chunk_max);
      EXPECT_GT(e->buffered_bytes_max, 0u);
      break;
    } else {
      ASSERT_TRUE(std::holds_alternative<started>(event)) << "unexpected event";
    }
  }
  EXPECT_EQ(received, total);
}

TEST_F(agent, reaps_orphans_reparented_to_it) {
  auto ran = client().run(shell("sleep 0.2 >/dev/null 2>&1 & exit 0"), "", wait_ms);
  ASSERT_TRUE(ran) << ran.error().message;
  EXPECT_EQ(ran->exit_code, 0);
  // The orphan exits about 0.2 s later; ask until it has been reaped.
  for (int attempt = 0; attempt < 200; ++attempt) {
    auto stats = client().stats(wait_ms);
    ASSERT_TRUE(stats);
    if (stats->orphans_reaped >= 1) {
      EXPECT_EQ(stats->processes_running, 0u);
      EXPECT_GE(stats->reaped_total, 2u);
      return;
    }
    EXPECT_EQ(client().next_event(50).code(), errc::timeout);
  }
  FAIL() << "the orphan was not reaped";
}

TEST_F(agent, file_operations_round_trip) {
  airlock::test::temp_dir scratch("airlock-guest");
  auto dir = scratch.path();
  ASSERT_FALSE(dir.empty());
  std::string data(700 * 1024, '\0');
  for (size_t i = 0; i < data.size(); ++i)
    data[i] = static_cast<char>(i * 131 % 251);
  auto file = dir + "/a/b/file.bin";
  auto wrote = client().write_file(file, data, wait_ms, 0640, true);
  ASSERT_TRUE(wrote) << wrote.error().message;
  EXPECT_EQ(*wrote, data.size());

  auto listing = client().list(dir + "/a/b", wait_ms);
  ASSERT_TRUE(listing);
  ASSERT_EQ(listing->entries.size(), 1u) << "a temporary file was left behind";
  EXPECT_EQ(listing->entries[0].name, "file.bin");
  auto info = client().stat(file, wait_ms);
  ASSERT_TRUE(info);
  EXPECT_EQ(info->type, file_type::regular);
  EXPECT_EQ(info->size, data.size());
  EXPECT_EQ(info->mode, 0640u);

  auto read = client().read_file(file, wait_ms);
  ASSERT_TRUE(read);
  EXPECT_EQ(*read, data);
  auto slice = client().read_file(file, wait_ms, 1000, 300'000);
  ASSERT_TRUE(slice);
  EXPECT_EQ(*slice, data.substr(1000, 300'000));

  // Overwriting replaces the content atomically and takes the new mode.
  ASSERT_TRUE(client().write_file(file, "short", wait_ms, 0600));
  EXPECT_EQ(*client().read_file(file, wait_ms), "short");
  EXPECT_EQ(client().stat(file, wait_ms)->mode, 0600u);

  ASSERT_TRUE(client().mkdir(dir + "/x/y/z", wait_ms, 0750, true).is_ok());
  ASSERT_TRUE(client().mkdir(dir + "/x/y/z", wait_ms, 0750, true).is_ok()) << "mkdir -p twice";
  EXPECT_EQ(client().mkdir(dir + "/x/y/z", wait_ms).code, errc::already_exists);
  EXPECT_EQ(client().stat(dir + "/x/y", wait_ms)->type, file_type::directory);
  ASSERT_TRUE(client().rename(file, dir + "/x/y/z/moved", wait_ms).is_ok());
  EXPECT_EQ(client().stat(file, wait_ms).code(), errc::not_found);
  EXPECT_EQ(*client().read_file(dir + "/x/y/z/moved", wait_ms), "short");

  EXPECT_EQ(client().remove(dir + "/x", wait_ms).code, errc::wrong_state) << "not empty";
  ASSERT_TRUE(client().remove(dir + "/x", wait_ms, true).is_ok());
  EXPECT_EQ(client().stat(dir + "/x", wait_ms).code(), errc::not_found);
  ASSERT_TRUE(client().remove(dir, wait_ms, true).is_ok());
}

TEST_F(agent, file_operations_refuse_bad_paths_and_report_missing_files) {
  EXPECT_EQ(client().read_file("/nonexistent/file", wait_ms).code(), errc::not_found);
  EXPECT_EQ(client().stat("/nonexistent", wait_ms).code(), errc::not_found);
  EXPECT_EQ(client().remove("/nonexistent", wait_ms).code, errc::not_found);
  EXPECT_EQ(client().read_file("relative/path", wait_ms).code(), errc::invalid_argument);
  EXPECT_EQ(client().list("tmp", wait_ms).code(), errc::invalid_argument);
  EXPECT_EQ(client().write_file("x", "data", wait_ms).code(), errc::invalid_argument);
  std::string too_long = "/" + std::string(5000, 'a');
  EXPECT_EQ(client().stat(too_long, wait_ms).code(), errc::invalid_argument);
  EXPECT_EQ(client().write_file(too_long, "data", wait_ms).code(), errc::invalid_argument);
  EXPECT_EQ(client().read_file(std::string("/tmp\0x", 6), wait_ms).code(), errc::invalid_argument);
  EXPECT_EQ(client().read_file("/tmp", wait_ms).code(), errc::invalid_argument) << "a directory";
  EXPECT_EQ(client().list("/nonexistent", wait_ms).code(), errc::not_found);
  // The channel still works after all these errors.
  EXPECT_TRUE(client().ping(wait_ms));
}

TEST_F(agent, an_oversized_frame_makes_the_guest_close_the_channel_cleanly) {
  std::string header = {'\xff', '\xff', '\xff', '\x0f'}; // 255 MiB announced
  ASSERT_TRUE(client().send_raw(header + "garbage").is_ok());
  auto event = client().next_event(wait_ms);
  ASSERT_TRUE(event);
  ASSERT_TRUE(std::holds_alternative<error_reply>(*event));
  EXPECT_EQ(std::get<error_reply>(*event).code, errc::resource_exhausted);
  EXPECT_EQ(client().next_event(wait_ms).code(), errc::unavailable);
  auto status = guest_->wait_exit(wait_ms);
  ASSERT_TRUE(status.has_value());
  ASSERT_TRUE(WIFEXITED(*status)) << "the guest crashed";
  EXPECT_EQ(WEXITSTATUS(*status), 2);
}

TEST_F(agent, refuses_streams_beyond_its_limit) {
  guest_.reset();
  start_guest({"--streams-max", "2"});
  start_request sleeper;
  sleeper.process.argv = {"sleep", "100"};
  auto a = client().start(sleeper);
  auto b = client().start(sleeper);
  auto c = client().start(sleeper);
  ASSERT_TRUE(a && b && c);
  ASSERT_TRUE(std::holds_alternative<started>(next_for(*a)));
  ASSERT_TRUE(std::holds_alternative<started>(next_for(*b)));
  auto refused = next_for(*c);
  ASSERT_TRUE(std::holds_alternative<error_reply>(refused));
  EXPECT_EQ(std::get<error_reply>(refused).code, errc::resource_exhausted);
  EXPECT_TRUE(std::get<error_reply>(refused).ended);
  EXPECT_EQ(client().read_file("/etc/hostname", wait_ms).code(), errc::resource_exhausted)
    << "a file read is a stream too";
  ASSERT_TRUE(client().signal(*a, SIGKILL).is_ok());
  EXPECT_EQ(drain(*a).second.signal, SIGKILL);
  auto d = client().start(sleeper);
  ASSERT_TRUE(d);
  EXPECT_TRUE(std::holds_alternative<started>(next_for(*d))) << "a slot was freed";
}

TEST_F(agent, sigterm_stops_processes_reports_them_and_exits) {
  start_request sleeper;
  sleeper.process.argv = {"sleep", "100"};
  auto id = client().start(sleeper);
  ASSERT_TRUE(id);
  ASSERT_TRUE(std::holds_alternative<started>(next_for(*id)));
  ASSERT_EQ(::kill(guest_->pid(), SIGTERM), 0);
  auto [out, done] = drain(*id);
  EXPECT_EQ(done.signal, SIGTERM);
  EXPECT_EQ(client().next_event(wait_ms).code(), errc::unavailable);
  auto status = guest_->wait_exit(wait_ms);
  ASSERT_TRUE(status.has_value());
  ASSERT_TRUE(WIFEXITED(*status));
  EXPECT_EQ(WEXITSTATUS(*status), 0);
}

TEST_F(agent, a_closed_channel_kills_the_processes_and_the_guest_exits) {
  start_request sleeper;
  sleeper.process.argv = {"sleep", "100"};
  auto id = client().start(sleeper);
  ASSERT_TRUE(id);
  auto first = next_for(*id);
  ASSERT_TRUE(std::holds_alternative<started>(first));
  pid_t child = std::get<started>(first).pid;
  guest_->disconnect();
  auto status = guest_->wait_exit(wait_ms);
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0);
  EXPECT_NE(::kill(child, 0), 0) << "the sleep survived its guest";
}

TEST_F(agent, a_background_process_holding_the_output_delays_the_exit_only_briefly) {
  auto id = client().start(shell("sleep 30 & echo $!; exit 3"));
  ASSERT_TRUE(id);
  std::string out;
  for (;;) {
    auto event = client().next_event(5000); // far below the background sleep
    ASSERT_TRUE(event) << event.error().message;
    if (auto* chunk = std::get_if<output_chunk>(&*event))
      out += chunk->bytes;
    if (auto* e = std::get_if<exited>(&*event)) {
      EXPECT_EQ(e->exit_code, 3);
      break;
    }
  }
  auto background = std::atoi(out.c_str());
  ASSERT_GT(background, 0) << out;
  ::kill(background, SIGKILL);
}

} // namespace
} // namespace airlock::guest
