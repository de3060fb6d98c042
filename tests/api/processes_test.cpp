// Processes through the data plane of `airlockd serve`: output over SSE
// (ids, base64, resume, filters, 410), stdin, signals, timeouts, waits and
// lists (PTYs: runtime_parity_test.cpp, for every runtime). One sandbox
// serves the whole suite.

#include <set>

#include "tests/api/api_fixture.hpp"

namespace airlock::test {
namespace {

using nlohmann::json;

class api_processes : public sandbox_suite<api_processes> {
public:
  static nlohmann::json sandbox_shape() { return {{"cpu_millis", 1000}, {"memory_mb", 512}}; }
};

/// The bytes `seq 1 n` prints.
std::string seq_output(int n) {
  std::string out;
  for (int i = 1; i <= n; ++i)
    out += std::to_string(i) + "\n";
  return out;
}

TEST_F(api_processes, output_streams_stdout_and_stderr_with_offsets_and_the_exit_code) {
  auto api = admin();
  auto process = api.exec(sandbox_, {{"cmd", "echo out1; echo err1 >&2; echo out2; exit 3"}});
  ASSERT_TRUE(process);
  EXPECT_EQ(process->process_id.rfind("proc_", 0), 0u);
  EXPECT_FALSE(process->attach_token.empty());
  auto output = api.read_output(*process);
  EXPECT_EQ(output.stdout_bytes, "out1\nout2\n");
  EXPECT_EQ(output.stderr_bytes, "err1\n");
  ASSERT_TRUE(output.exit);
  EXPECT_EQ((*output.exit)["exit_code"], 3);
  EXPECT_TRUE((*output.exit)["signal"].is_null());
  EXPECT_TRUE(output.ended);
  // Each id is the end offset of its chunk in the combined stream.
  int64_t combined = 0;
  for (const auto& event : output.events) {
    if (event.event != "stdout" && event.event != "stderr")
      continue;
    combined += static_cast<int64_t>(json::parse(event.data)["data"].get<std::string>().size());
    EXPECT_EQ(std::stoll(event.id), combined) << event.data;
  }
  EXPECT_EQ(combined, 15);
  EXPECT_EQ(output.events.back().event, "exit");
}

TEST_F(api_processes, non_utf8_output_is_sent_base64_encoded) {
  auto api = admin();
  auto process = api.exec(sandbox_, {{"cmd", "printf 'a\\377\\376b'"}});
  ASSERT_TRUE(process);
  auto output = api.read_output(*process);
  EXPECT_EQ(output.stdout_bytes, std::string("a\xff\xfe"
                                             "b"));
  bool saw_base64 = false;
  for (const auto& event : output.events)
    if (event.event == "stdout")
      saw_base64 = saw_base64 || json::parse(event.data).value("encoding", "") == "base64";
  EXPECT_TRUE(saw_base64);
  ASSERT_TRUE(output.exit);
  EXPECT_EQ((*output.exit)["exit_code"], 0);
}

TEST_F(api_processes, a_dropped_stream_resumes_after_last_event_id_without_loss_or_repeats) {
  auto api = admin();
  constexpr int lines = 60'000; // ~350 KB: well inside the 1 MiB buffer
  auto process = api.exec(sandbox_, {{"cmd", "seq 1 " + std::to_string(lines)}});
  ASSERT_TRUE(process);
  process_output first;
  {
    auto stream = api.open_stream(process->attach_path + "/output",
                                  {{"Authorization", "Bearer " + process->attach_token}});
    ASSERT_TRUE(stream);
    ASSERT_EQ(stream->second.status, 200);
    while (first.stdout_bytes.size() < 64 * 1024 && !first.exit) {
      auto event = stream->first.next_event();
      ASSERT_TRUE(event) << "the stream ended early";
      collect_event(first, *event);
    }
    ASSERT_FALSE(first.exit) << "read only part of the stream";
  } // the connection drops here, mid-stream
  ASSERT_FALSE(first.last_id.empty());
  auto rest = api.read_output(*process, "", {{"Last-Event-ID", first.last_id}});
  ASSERT_TRUE(rest.exit);
  EXPECT_EQ((*rest.exit)["exit_code"], 0);
  std::string whole = first.stdout_bytes + rest.stdout_bytes;
  auto expected = seq_output(lines);
  EXPECT_EQ(whole.size(), expected.size());
  EXPECT_TRUE(whole == expected) << "bytes lost or repeated across the reconnect";
  EXPECT_EQ(std::stoll(rest.last_id), static_cast<int64_t>(expected.size()));
}

TEST_F(api_processes, stdout_and_stderr_filters_leave_out_the_other_stream) {
  auto api = admin();
  auto process = api.exec(sandbox_, {{"cmd", "echo out; echo err >&2"}});
  ASSERT_TRUE(process);
  auto only_err = api.read_output(*process, "?stdout=0");
  EXPECT_EQ(only_err.stdout_bytes, "");
  EXPECT_EQ(only_err.stderr_bytes, "err\n");
  ASSERT_TRUE(only_err.exit);
  auto only_out = api.read_output(*process, "?stderr=0");
  EXPECT_EQ(only_out.stdout_bytes, "out\n");
  EXPECT_EQ(only_out.stderr_bytes, "");
  ASSERT_TRUE(only_out.exit);
  auto bad = api.call("GET", process->attach_path + "/output?stdout=maybe");
  EXPECT_EQ(bad.status, 400);
  EXPECT_TRUE(bad.is_error_shape());
}

TEST_F(api_processes, output_dropped_from_the_buffer_answers_410) {
  auto api = admin();
  // ~2 MB of output: the first MiB is gone from the 1 MiB buffer.
  auto process = api.exec(sandbox_, {{"cmd", "seq 1 300000"}});
  ASSERT_TRUE(process);
  auto done = api.get(process->attach_path + "?wait=30");
  ASSERT_EQ(done.json["state"], "exited") << done.body;
  auto gone = api.call("GET", process->attach_path + "/output");
  EXPECT_EQ(gone.status, 410) << gone.body;
  EXPECT_EQ(gone.error_code(), "gone");
  auto late = api.call("GET", process->attach_path + "/output", "", {{"Last-Event-ID", "10"}});
  EXPECT_EQ(late.status, 410);
}

TEST_F(api_processes, stdin_bytes_reach_the_process_and_close_ends_its_input) {
  auto api = admin();
  auto process = api.exec(sandbox_, {{"argv", {"cat"}}, {"stdin", true}});
  ASSERT_TRUE(process);
  auto with_token = as(process->attach_token);
  auto wrote = with_token.call("POST", process->attach_path + "/stdin", "hello\n");
  EXPECT_EQ(wrote.status, 200) << wrote.body;
  EXPECT_EQ(wrote.json["bytes"], 6);
  EXPECT_EQ(with_token.call("POST", process->attach_path + "/stdin", "world\n").status, 200);
  auto closed = with_token.call("POST", process->attach_path + "/stdin/close");
  EXPECT_EQ(closed.status, 200) << closed.body;
  auto output = api.read_output(*process);
  EXPECT_EQ(output.stdout_bytes, "hello\nworld\n");
  ASSERT_TRUE(output.exit);
  EXPECT_EQ((*output.exit)["exit_code"], 0);
}

TEST_F(api_processes, a_signal_ends_the_process_and_the_exit_event_names_it) {
  auto api = admin();
  auto process = api.exec(sandbox_, {{"argv", {"sleep", "100"}}});
  ASSERT_TRUE(process);
  auto sent = api.post(process->attach_path + "/signal", {{"signal", "TERM"}});
  EXPECT_EQ(sent.status, 200) << sent.body;
  auto output = api.read_output(*process);
  ASSERT_TRUE(output.exit);
  EXPECT_EQ((*output.exit)["signal"], 15) << output.exit->dump();
  EXPECT_TRUE((*output.exit)["exit_code"].is_null()) << output.exit->dump();
  auto state = api.get(process->attach_path);
  EXPECT_TRUE(state.json["exit_code"].is_null()) << state.body;
  EXPECT_EQ(state.json["signal"], 15) << state.body;
  auto bad = api.post(process->attach_path + "/signal", {{"signal", "NOPE"}});
  EXPECT_EQ(bad.status, 400);
  EXPECT_TRUE(bad.is_error_shape());
}

TEST_F(api_processes, timeout_s_kills_a_process_that_runs_too_long) {
  auto api = admin();
  auto started = std::chrono::steady_clock::now();
  auto process = api.exec(sandbox_, {{"argv", {"sleep", "100"}}, {"timeout_s", 1}});
  ASSERT_TRUE(process);
  auto output = api.read_output(*process, "", {}, milliseconds(30'000));
  ASSERT_TRUE(output.exit) << "not killed within 30 s";
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(30));
  auto signal = (*output.exit)["signal"];
  EXPECT_TRUE(signal == 9 || signal == 15) << output.exit->dump();
}

TEST_F(api_processes, get_waits_for_the_exit_and_the_list_shows_running_and_ended_processes) {
  auto api = admin();
  auto quick = api.exec(sandbox_, {{"cmd", "exit 4"}});
  auto slow = api.exec(sandbox_, {{"argv", {"sleep", "100"}}});
  ASSERT_TRUE(quick && slow);
  auto ended = api.get(quick->attach_path + "?wait=30");
  ASSERT_EQ(ended.status, 200) << ended.body;
  EXPECT_EQ(ended.json["state"], "exited");
  EXPECT_EQ(ended.json["exit_code"], 4);
  EXPECT_TRUE(ended.json["ended_at"].is_string());
  EXPECT_EQ(ended.json["process_id"], quick->process_id);
  auto running = api.get(slow->attach_path + "?wait=1");
  EXPECT_EQ(running.json["state"], "running");
  EXPECT_TRUE(running.json["exit_code"].is_null());

  auto list = api.get("/v1/sandboxes/" + sandbox_ + "/processes");
  ASSERT_EQ(list.status, 200) << list.body;
  std::map<std::string, std::string> states;
  for (const auto& item : list.json["items"])
    states[item["process_id"]] = item["state"];
  EXPECT_EQ(states[quick->process_id], "exited");
  EXPECT_EQ(states[slow->process_id], "running");
  EXPECT_EQ(api.post(slow->attach_path + "/signal", {{"signal", "KILL"}}).status, 200);
  EXPECT_EQ(api.get(slow->attach_path + "?wait=30").json["state"], "exited");
  EXPECT_EQ(api.get("/v1/sandboxes/" + sandbox_ + "/processes/proc_nosuch").status, 404);
}

TEST_F(api_processes, a_process_shows_what_it_was_asked_to_run_and_its_tag) {
  auto api = admin();
  auto tagged = api.exec(
    sandbox_,
    {{"argv", {"sleep", "100"}}, {"env", {{"ASKED", "yes"}}}, {"cwd", "/tmp"}, {"tag", "sleeper"}});
  auto shell = api.exec(sandbox_, {{"cmd", "exit 0"}});
  ASSERT_TRUE(tagged && shell);
  auto shown = api.get(tagged->attach_path);
  ASSERT_EQ(shown.status, 200) << shown.body;
  EXPECT_EQ(shown.json["argv"], json({"sleep", "100"}));
  EXPECT_TRUE(shown.json["cmd"].is_null());
  EXPECT_EQ(shown.json["cwd"], "/tmp");
  EXPECT_EQ(shown.json["env"], json({{"ASKED", "yes"}})) << "the client's env, not the merged one";
  EXPECT_EQ(shown.json["tag"], "sleeper");
  auto line = api.get(shell->attach_path + "?wait=30");
  EXPECT_EQ(line.json["cmd"], "exit 0");
  EXPECT_EQ(line.json["argv"], json::array());
  EXPECT_TRUE(line.json["tag"].is_null());
  auto too_long = api.call("POST", "/v1/sandboxes/" + sandbox_ + "/processes",
                           json{{"argv", {"true"}}, {"tag", std::string(5000, 't')}}.dump());
  EXPECT_EQ(too_long.status, 400) << too_long.body;
  EXPECT_EQ(api.post(tagged->attach_path + "/signal", {{"signal", "KILL"}}).status, 200);
}

} // namespace
} // namespace airlock::test

namespace airlock::test {
namespace {

/// Runs `body` (with "cmd") and collects the output to the end.
process_output run_spec(const api_client& api, const std::string& sandbox, const json& body) {
  auto process = api.exec(sandbox, body);
  return process ? api.read_output(*process) : process_output{};
}

TEST_F(api_processes, a_named_user_runs_with_its_ids_home_and_home_as_the_default_cwd) {
  auto api = admin();
  // An account of the sandbox's own /etc/passwd, with a home.
  auto added = api.run(sandbox_, "echo 'agent:x:1000:1000::/home/agent:/bin/sh' >> /etc/passwd && "
                                 "mkdir -p /home/agent && chown 1000:1000 /home/agent && echo ok");
  ASSERT_EQ(added.stdout_bytes, "ok\n") << added.stderr_bytes;
  auto as_agent =
    run_spec(api, sandbox_, {{"cmd", "id -u; id -g; echo $HOME; pwd"}, {"user", "agent"}});
  EXPECT_EQ(as_agent.stdout_bytes, "1000\n1000\n/home/agent\n/home/agent\n")
    << as_agent.stderr_bytes;
  auto elsewhere = run_spec(api, sandbox_, {{"cmd", "pwd"}, {"user", "agent"}, {"cwd", "/tmp"}});
  EXPECT_EQ(elsewhere.stdout_bytes, "/tmp\n") << "a given cwd wins";
  // nobody's home (/nonexistent) cannot be entered: the process starts in /.
  auto nobody = run_spec(api, sandbox_, {{"cmd", "id -u; pwd"}, {"user", "nobody"}});
  EXPECT_EQ(nobody.stdout_bytes, "65534\n/\n") << nobody.stderr_bytes;
  // Without a user: root, in /, as before.
  EXPECT_EQ(api.run(sandbox_, "id -u; pwd").stdout_bytes, "0\n/\n");
  auto unknown = api.call("POST", "/v1/sandboxes/" + sandbox_ + "/processes",
                          json{{"cmd", "true"}, {"user", "nosuchuser"}}.dump());
  EXPECT_EQ(unknown.status, 400) << unknown.body;
  EXPECT_TRUE(unknown.is_error_shape());
  EXPECT_NE(unknown.body.find("nosuchuser"), std::string::npos) << unknown.body;
}

} // namespace
} // namespace airlock::test
