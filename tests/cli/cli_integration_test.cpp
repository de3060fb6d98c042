// The CLI against a fake airlockd on 127.0.0.1:0: the HTTP requests it makes
// and what it prints and returns for the answers.

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include <gtest/gtest.h>

#include "cli/base64.hpp"
#include "cli/cli.hpp"
#include "tests/cli/fake_api.hpp"
#include "tests/support/host.hpp"

namespace airlock::cli::test {
namespace {

using nlohmann::json;

struct run_result {
  int code = -1;
  std::string out;
  std::string err;
};

/// Runs the CLI in-process against `url` with key ak_test.
run_result run(const std::string& url, std::vector<std::string> args, std::string input = {}) {
  std::istringstream in(input);
  std::ostringstream out, err;
  env_map env{{"AIRLOCK_URL", url}, {"AIRLOCK_API_KEY", "ak_test"}, {"HOME", "/nonexistent"}};
  cli_options options;
  options.reconnect_delay_ms = 0;
  options.reconnect_attempts_max = 2;
  options.http.connect_timeout_ms = 5'000;
  options.http.io_timeout_ms = 20'000;
  int code = run_cli(args, env, cli_io{in, out, err}, options);
  return {code, out.str(), err.str()};
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

using airlock::test::temp_dir;

TEST(cli_integration, create_waits_for_its_operation_and_prints_the_sandbox_id) {
  std::atomic<int> polls{0};
  fake_api api([&polls](const request_t& req, socket_t& s) {
    if (req.method_string() == "POST" && req.target() == "/v1/sandboxes") {
      auto body = json::parse(req.body());
      bool expected = body["template"] == "py" && body["cpu_millis"] == 500
                      && body["env"]["A"] == "1" && body["metadata"]["team"] == "x";
      return write_json(s, expected ? 202 : 400,
                        {{"sandbox_id", "sb_1"}, {"operation_id", "op_1"}});
    }
    if (req.target().starts_with("/v1/operations/op_1?wait=")) {
      bool done = ++polls >= 2;
      return write_json(
        s, 200, {{"id", "op_1"}, {"state", done ? "succeeded" : "running"}, {"error", nullptr}});
    }
    write_json(s, 404, {{"error", {{"code", "not_found"}, {"message", "no route"}}}});
  });
  auto result = run(api.url(), {"create", "--template", "py", "--cpu", "500", "--env", "A=1",
                                "--metadata", "team=x", "--wait"});
  EXPECT_EQ(result.code, 0) << result.err;
  EXPECT_EQ(result.out, "sb_1\n");
  EXPECT_EQ(polls.load(), 2);
  auto requests = api.requests();
  ASSERT_FALSE(requests.empty());
  EXPECT_EQ(requests[0].authorization, "Bearer ak_test");
}

TEST(cli_integration, template_build_posts_the_recipe_and_shows_its_progress_per_step) {
  std::atomic<int> polls{0};
  json posted;
  std::mutex lock;
  fake_api api([&](const request_t& req, socket_t& s) {
    if (req.method_string() == "POST" && req.target() == "/v1/templates") {
      std::lock_guard guard(lock);
      posted = json::parse(req.body());
      return write_json(s, 202, {{"template", "py"}, {"operation_id", "op_7"}});
    }
    if (req.target().starts_with("/v1/operations/op_7?wait=")) {
      const int poll = ++polls;
      json progress = poll == 1   ? json{{"step", "run 1/2"}, {"percent", 20}}
                      : poll == 2 ? json{{"step", "run 1/2"}, {"percent", 20}}
                                  : json{{"step", "run 2/2"}, {"percent", 60}};
      if (poll >= 4)
        return write_json(s, 200,
                          {{"id", "op_7"},
                           {"state", "succeeded"},
                           {"error", nullptr},
                           {"progress", progress},
                           {"result", {{"version", {{"version", 3}}}}}});
      return write_json(
        s, 200, {{"id", "op_7"}, {"state", "running"}, {"error", nullptr}, {"progress", progress}});
    }
    write_json(s, 404, {{"error", {{"code", "not_found"}, {"message", "no route"}}}});
  });
  auto result =
    run(api.url(), {"template", "build", "py", "--from", "base", "--run", "pip install x", "--run",
                    "true", "--env", "A=1", "--ready-cmd", "python3 -V", "--wait"});
  EXPECT_EQ(result.code, 0) << result.err;
  {
    std::lock_guard guard(lock);
    EXPECT_EQ(posted["name"], "py");
    EXPECT_EQ(posted["from"]["template"], "base");
    EXPECT_EQ(posted["run"], json::array({"pip install x", "true"})) << "in the order given";
    EXPECT_EQ(posted["env"]["A"], "1");
    EXPECT_EQ(posted["ready_cmd"], "python3 -V");
    EXPECT_FALSE(posted.contains("egress"));
  }
  // Not a terminal: one line per step, in order, not one per poll.
  EXPECT_EQ(result.err, "progress: 20% run 1/2\nprogress: 60% run 2/2\n");
  EXPECT_EQ(result.out.rfind("op_7\n", 0), 0u) << result.out;

  auto neither = run(api.url(), {"template", "build", "py", "--run", "true"});
  EXPECT_EQ(neither.code, 2);
  EXPECT_NE(neither.err.find("--from TEMPLATE or --debootstrap SUITE"), std::string::npos)
    << neither.err;
  auto both = run(api.url(), {"template", "build", "py", "--from", "a", "--debootstrap", "b"});
  EXPECT_EQ(both.code, 2);
}

TEST(cli_integration, ls_follows_next_cursor_and_prints_a_table) {
  fake_api api([](const request_t& req, socket_t& s) {
    bool second = req.target().find("cursor=c2") != std::string::npos;
    json item = {{"id", second ? "sb_2" : "sb_1"},
                 {"state", "running"},
                 {"template", "base"},
                 {"created_at", "2026-01-01T00:00:00Z"}};
    write_json(s, 200, {{"items", {item}}, {"next_cursor", second ? json(nullptr) : json("c2")}});
  });
  auto result = run(api.url(), {"ls", "--state", "running"});
  EXPECT_EQ(result.code, 0) << result.err;
  EXPECT_NE(result.out.find("ID"), std::string::npos);
  EXPECT_NE(result.out.find("sb_1"), std::string::npos);
  EXPECT_NE(result.out.find("sb_2"), std::string::npos);
  auto requests = api.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].target, "/v1/sandboxes?state=running");

  auto as_json = run(api.url(), {"ls", "--json"});
  EXPECT_EQ(as_json.code, 0);
  EXPECT_EQ(json::parse(as_json.out)["items"].size(), 2u);
}

/// Plays one process: the output stream drops after two chunks and resumes
/// from Last-Event-ID; the exit event carries `exit`.
class process_server {
public:
  explicit process_server(json exit) : exit_(std::move(exit)) {}

  void handle(const request_t& req, socket_t& s, const std::string& base) {
    std::string target(req.target());
    std::string attach = "/v1/sandboxes/sb_1/processes/proc_1";
    if (target == "/v1/sandboxes/sb_1/processes") {
      return write_json(s, 201,
                        {{"process_id", "proc_1"},
                         {"attach_url", base + attach},
                         {"attach_token", "tok_1"},
                         {"expires_at", "2030-01-01T00:00:00Z"}});
    }
    if (target == attach + "/stdin" || target == attach + "/stdin/close") {
      std::lock_guard lock(mutex_);
      if (target.ends_with("close"))
        stdin_closed_ = true;
      changed_.notify_all();
      return write_json(s, 200, {{"bytes", req.body().size()}});
    }
    if (target == attach + "/output")
      return output(req, s);
    write_json(s, 404, {{"error", {{"code", "not_found"}, {"message", target}}}});
  }

  bool wait_for_stdin_ = false; ///< set before the server starts

private:
  void output(const request_t& req, socket_t& s) {
    if (req["Last-Event-ID"].empty()) {
      // Two chunks, the second split mid-event, then the connection drops.
      write_raw(s, sse_head() + ": heartbeat\n\n" + sse_event("stdout", {{"data", "hello "}}, "6"));
      std::string err =
        sse_event("stderr", {{"data", base64_encode("oops\xff")}, {"encoding", "base64"}}, "11");
      write_raw(s, err.substr(0, 10));
      write_raw(s, err.substr(10));
      return; // dropped without an exit event
    }
    if (req["Last-Event-ID"] != "11")
      return write_json(s, 410, {{"error", {{"code", "gone"}, {"message", "wrong offset"}}}});
    if (wait_for_stdin_) {
      std::unique_lock lock(mutex_);
      changed_.wait_for(lock, std::chrono::seconds(20), [this] { return stdin_closed_; });
    }
    write_raw(s, sse_head() + sse_event("stdout", {{"data", "world\n"}}, "17")
                   + sse_event("exit", exit_, "17"));
  }

  json exit_;
  std::mutex mutex_;
  bool stdin_closed_ = false; // guarded by mutex_
  std::condition_variable changed_;
};

/// The bodies of the requests whose target ends with `suffix`, in order.
/// (Read through fake_api's lock: the handlers run on other threads.)
std::vector<std::string> bodies(const fake_api& api, const std::string& suffix) {
  std::vector<std::string> out;
  for (const auto& request : api.requests()) {
    if (request.target.ends_with(suffix))
      out.push_back(request.body);
  }
  return out;
}

TEST(cli_integration, exec_streams_output_resumes_after_a_drop_and_exits_with_the_code) {
  process_server process({{"exit_code", 3}, {"signal", nullptr}});
  std::string base;
  fake_api api(
    [&process, &base](const request_t& req, socket_t& s) { process.handle(req, s, base); });
  base = api.url();
  auto result =
    run(api.url(), {"exec", "sb_1", "--env", "K=V", "--cwd", "/w", "--", "sh", "-c", "x"});
  EXPECT_EQ(result.code, 3) << result.err;
  EXPECT_EQ(result.out, "hello world\n");
  EXPECT_EQ(result.err, "oops\xff");
  auto created = bodies(api, "/processes");
  ASSERT_EQ(created.size(), 1u);
  auto body = json::parse(created[0]);
  EXPECT_EQ(body["argv"], json({"sh", "-c", "x"}));
  EXPECT_EQ(body["env"]["K"], "V");
  EXPECT_EQ(body["cwd"], "/w");
  EXPECT_EQ(body["stdin"], false);
  EXPECT_FALSE(body.contains("pty"));

  std::vector<std::string> resumed_from;
  for (const auto& request : api.requests()) {
    if (request.target.ends_with("/output")) {
      EXPECT_EQ(request.authorization, "Bearer tok_1");
      resumed_from.push_back(request.last_event_id);
    }
  }
  EXPECT_EQ(resumed_from, (std::vector<std::string>{"", "11"}));
}

TEST(cli_integration, exec_returns_128_plus_the_signal_of_a_killed_process) {
  process_server process({{"exit_code", nullptr}, {"signal", 9}});
  std::string base;
  fake_api api(
    [&process, &base](const request_t& req, socket_t& s) { process.handle(req, s, base); });
  base = api.url();
  EXPECT_EQ(run(api.url(), {"exec", "sb_1", "--", "sleep", "9"}).code, 137);
}

TEST(cli_integration, exec_with_stdin_copies_it_then_closes_it) {
  process_server process({{"exit_code", 0}, {"signal", nullptr}});
  process.wait_for_stdin_ = true;
  std::string base;
  fake_api api(
    [&process, &base](const request_t& req, socket_t& s) { process.handle(req, s, base); });
  base = api.url();
  auto result = run(api.url(), {"exec", "sb_1", "--stdin", "--", "cat"}, "line 1\nline 2\n");
  EXPECT_EQ(result.code, 0) << result.err;
  auto created = bodies(api, "/processes");
  ASSERT_EQ(created.size(), 1u);
  EXPECT_EQ(json::parse(created[0])["stdin"], true);
  std::string copied;
  for (const auto& chunk : bodies(api, "/stdin"))
    copied += chunk;
  EXPECT_EQ(copied, "line 1\nline 2\n");
  EXPECT_EQ(bodies(api, "/stdin/close").size(), 1u);
}

TEST(cli_integration, cp_uploads_and_downloads_in_both_directions) {
  temp_dir dir;
  std::string binary("bytes\0with\xffnul", 14);
  fake_api api([&binary](const request_t& req, socket_t& s) {
    std::string target(req.target());
    if (req.method_string() == "PUT") {
      return write_json(s, 201, {{"path", "/work/a.txt"}, {"size_bytes", req.body().size()}});
    }
    if (target == "/v1/sandboxes/sb_1/files?path=/etc/data")
      return write_bytes(s, 200, binary);
    write_json(s, 404, {{"error", {{"code", "not_found"}, {"message", "no such file"}}}});
  });
  std::string local = dir.path() + "/a.txt";
  std::ofstream(local) << "local content";
  std::filesystem::permissions(local, std::filesystem::perms(0640));

  auto up = run(api.url(), {"cp", local, "sb_1:/work/"});
  EXPECT_EQ(up.code, 0) << up.err;
  auto from_stdin = run(api.url(), {"cp", "-", "sb_1:/work/b"}, "piped");
  EXPECT_EQ(from_stdin.code, 0) << from_stdin.err;
  auto puts = api.requests();
  ASSERT_EQ(puts.size(), 2u);
  EXPECT_EQ(puts[0].method, "PUT");
  EXPECT_EQ(puts[0].target, "/v1/sandboxes/sb_1/files?path=/work/a.txt&mode=0640");
  EXPECT_EQ(puts[0].body, "local content");
  EXPECT_EQ(puts[1].target, "/v1/sandboxes/sb_1/files?path=/work/b");
  EXPECT_EQ(puts[1].body, "piped");

  auto down = run(api.url(), {"cp", "sb_1:/etc/data", dir.path() + "/copy"});
  EXPECT_EQ(down.code, 0) << down.err;
  EXPECT_EQ(read_file(dir.path() + "/copy"), binary);

  auto to_stdout = run(api.url(), {"cp", "sb_1:/etc/data", "-"});
  EXPECT_EQ(to_stdout.code, 0) << to_stdout.err;
  EXPECT_EQ(to_stdout.out, binary);

  auto missing = run(api.url(), {"cp", "sb_1:/absent", dir.path() + "/never"});
  EXPECT_EQ(missing.code, 1);
  EXPECT_NE(missing.err.find("not_found: no such file"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/never"));
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/never.airlock-partial"));
}

TEST(cli_integration, maps_api_errors_to_exit_1_with_code_message_and_hint) {
  fake_api api([](const request_t& req, socket_t& s) {
    if (req.target() == "/v1/sandboxes/sb_x")
      return write_json(s, 404,
                        {{"error", {{"code", "not_found"}, {"message", "no sandbox sb_x"}}}});
    if (req.target() == "/v1/sandboxes/sb_1/pause")
      return write_json(s, 409,
                        {{"error", {{"code", "wrong_state"}, {"message", "it is paused"}}}});
    write_json(s, 401, {{"error", {{"code", "unauthenticated"}, {"message", "bad API key"}}}});
  });
  auto missing = run(api.url(), {"get", "sb_x"});
  EXPECT_EQ(missing.code, 1);
  EXPECT_NE(missing.err.find("not_found: no sandbox sb_x"), std::string::npos);
  EXPECT_NE(missing.err.find("hint:"), std::string::npos);

  auto conflict = run(api.url(), {"pause", "sb_1"});
  EXPECT_EQ(conflict.code, 1);
  EXPECT_NE(conflict.err.find("wrong_state"), std::string::npos);

  auto unauthorised = run(api.url(), {"ls"});
  EXPECT_EQ(unauthorised.code, 1);
  EXPECT_NE(unauthorised.err.find("check AIRLOCK_API_KEY or run airlockd serve once"),
            std::string::npos);
}

TEST(cli_integration, says_where_it_expected_airlockd_when_nothing_listens) {
  std::string url;
  {
    fake_api closed([](const request_t&, socket_t&) {});
    url = closed.url();
  } // the port is free again: nothing listens there now
  auto result = run(url, {"get", "sb_1"});
  EXPECT_EQ(result.code, 1);
  EXPECT_NE(result.err.find("is airlockd running at " + url + "?"), std::string::npos);
}

TEST(cli_integration, wait_exits_1_and_prints_the_error_of_a_failed_operation) {
  fake_api api([](const request_t& req, socket_t& s) {
    bool failed = req.target().starts_with("/v1/operations/op_bad");
    write_json(s, 200,
               {{"id", failed ? "op_bad" : "op_ok"},
                {"state", failed ? "failed" : "succeeded"},
                {"error", failed ? json{{"code", "no_capacity"}, {"message", "no worker fits"}}
                                 : json(nullptr)}});
  });
  auto ok = run(api.url(), {"wait", "op_ok"});
  EXPECT_EQ(ok.code, 0) << ok.err;
  EXPECT_EQ(ok.out, "succeeded\n");
  auto bad = run(api.url(), {"wait", "op_bad", "--timeout", "5"});
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.err.find("no_capacity: no worker fits"), std::string::npos);
}

/// The whitespace-separated cells of each line of `text`.
std::vector<std::vector<std::string>> table_cells(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    auto& row = rows.emplace_back();
    std::string word;
    while (words >> word)
      row.push_back(word);
  }
  return rows;
}

TEST(cli_integration, snapshot_verbs_send_their_method_path_and_body) {
  fake_api api([](const request_t&, socket_t& s) {
    write_json(s, 202, {{"operation_id", "op_7"}, {"state", "pending"}});
  });
  struct expected_request {
    std::vector<std::string> args;
    std::string method;
    std::string target;
    json body; ///< null: no body at all
  };
  const std::vector<expected_request> cases = {
    {{"suspend", "sb_1"}, "POST", "/v1/sandboxes/sb_1/suspend", nullptr},
    {{"wake", "sb_1"}, "POST", "/v1/sandboxes/sb_1/wake", nullptr},
    {{"restore", "sb_1"}, "POST", "/v1/sandboxes/sb_1/restore", nullptr},
    {{"restore", "sb_1", "--checkpoint", "ckpt_9"},
     "POST",
     "/v1/sandboxes/sb_1/restore",
     {{"checkpoint_id", "ckpt_9"}}},
    {{"checkpoint", "sb_1"}, "POST", "/v1/sandboxes/sb_1/checkpoints", json::object()},
    {{"checkpoint", "sb_1", "--label", "before upgrade"},
     "POST",
     "/v1/sandboxes/sb_1/checkpoints",
     {{"label", "before upgrade"}}},
    {{"fork", "sb_1", "-n", "3"}, "POST", "/v1/sandboxes/sb_1/fork", {{"count", 3}}},
    {{"fork", "sb_1", "--count", "64"}, "POST", "/v1/sandboxes/sb_1/fork", {{"count", 64}}},
    {{"rm-checkpoint", "ckpt_9"}, "DELETE", "/v1/checkpoints/ckpt_9", nullptr},
  };
  for (const auto& expected : cases) {
    SCOPED_TRACE(expected.args[0] + " " + expected.target + " " + expected.body.dump());
    size_t before = api.requests().size();
    auto result = run(api.url(), expected.args);
    EXPECT_EQ(result.code, 0) << result.err;
    EXPECT_EQ(result.out, "op_7\n");
    auto requests = api.requests();
    ASSERT_EQ(requests.size(), before + 1);
    const auto& sent = requests.back();
    EXPECT_EQ(sent.method, expected.method);
    EXPECT_EQ(sent.target, expected.target);
    EXPECT_EQ(sent.authorization, "Bearer ak_test");
    if (expected.body.is_null())
      EXPECT_EQ(sent.body, "");
    else
      EXPECT_EQ(json::parse(sent.body), expected.body);
  }
}

/// Answers every POST with 202 op_1 and polls of op_1 with `running` once,
/// then with `finished` (an operation record).
class operation_server {
public:
  explicit operation_server(json finished) : finished_(std::move(finished)) {}

  void handle(const request_t& req, socket_t& s) {
    if (req.target().starts_with("/v1/operations/op_1?wait=")) {
      if (++polls_ == 1)
        return write_json(s, 200, {{"id", "op_1"}, {"state", "running"}, {"error", nullptr}});
      return write_json(s, 200, finished_);
    }
    if (req.method_string() == "POST")
      return write_json(s, 202, {{"operation_id", "op_1"}, {"state", "pending"}});
    write_json(s, 404, {{"error", {{"code", "not_found"}, {"message", "no route"}}}});
  }

  int polls() const { return polls_.load(); }

private:
  json finished_;
  std::atomic<int> polls_{0};
};

TEST(cli_integration, checkpoint_wait_prints_the_operation_id_then_the_checkpoint_id) {
  operation_server server({{"id", "op_1"},
                           {"state", "succeeded"},
                           {"error", nullptr},
                           {"result", {{"checkpoint_id", "ckpt_1"}}}});
  fake_api api([&server](const request_t& req, socket_t& s) { server.handle(req, s); });
  auto result = run(api.url(), {"checkpoint", "sb_1", "--label", "x", "--wait"});
  EXPECT_EQ(result.code, 0) << result.err;
  EXPECT_EQ(result.out, "op_1\nckpt_1\n");
  EXPECT_EQ(server.polls(), 2);
}

TEST(cli_integration, fork_wait_prints_each_new_sandbox_id_on_its_own_line) {
  json finished = {{"id", "op_1"},
                   {"state", "succeeded"},
                   {"error", nullptr},
                   {"result", {{"checkpoint_id", "ckpt_f"}, {"sandbox_ids", {"sb_a", "sb_b"}}}}};
  operation_server server(finished);
  fake_api api([&server](const request_t& req, socket_t& s) { server.handle(req, s); });
  auto result = run(api.url(), {"fork", "sb_1", "-n", "2", "--wait"});
  EXPECT_EQ(result.code, 0) << result.err;
  EXPECT_EQ(result.out, "op_1\nsb_a\nsb_b\n");

  // --json prints the finished operation, the ids inside its result.
  operation_server json_server(finished);
  fake_api json_api(
    [&json_server](const request_t& req, socket_t& s) { json_server.handle(req, s); });
  auto as_json = run(json_api.url(), {"fork", "sb_1", "-n", "2", "--wait", "--json"});
  EXPECT_EQ(as_json.code, 0) << as_json.err;
  EXPECT_EQ(json::parse(as_json.out)["result"]["sandbox_ids"], json({"sb_a", "sb_b"}));
}

TEST(cli_integration, fork_wait_of_a_failed_operation_prints_its_error_and_no_ids) {
  operation_server server(
    {{"id", "op_1"},
     {"state", "failed"},
     {"error", {{"code", "no_capacity"}, {"message", "no worker fits 3 copies"}}},
     {"result", {{"sandbox_ids", {"sb_partial"}}}}});
  fake_api api([&server](const request_t& req, socket_t& s) { server.handle(req, s); });
  auto result = run(api.url(), {"fork", "sb_1", "-n", "3", "--wait"});
  EXPECT_EQ(result.code, 1);
  EXPECT_EQ(result.out, "op_1\n");
  EXPECT_NE(result.err.find("op_1 failed: no_capacity: no worker fits 3 copies"), std::string::npos)
    << result.err;
}

TEST(cli_integration, checkpoints_prints_id_label_automatic_and_created_columns) {
  fake_api api([](const request_t& req, socket_t& s) {
    if (req.target() != "/v1/sandboxes/sb_1/checkpoints")
      return write_json(s, 404, {{"error", {{"code", "not_found"}, {"message", "no route"}}}});
    json base = {{"sandbox_id", "sb_1"}, {"memory_persisted", false}, {"size_bytes", 4096}};
    json labelled = base;
    labelled.update({{"id", "ckpt_1"},
                     {"label", "nightly"},
                     {"automatic", false},
                     {"created_at", "2026-01-01T00:00:00Z"}});
    json automatic = base;
    automatic.update({{"id", "ckpt_2"},
                      {"label", ""},
                      {"automatic", true},
                      {"created_at", "2026-01-02T00:00:00Z"}});
    write_json(s, 200, {{"items", {labelled, automatic}}});
  });
  auto result = run(api.url(), {"checkpoints", "sb_1"});
  EXPECT_EQ(result.code, 0) << result.err;
  using row = std::vector<std::string>;
  EXPECT_EQ(table_cells(result.out),
            (std::vector<row>{{"ID", "LABEL", "AUTOMATIC", "CREATED"},
                              {"ckpt_1", "nightly", "false", "2026-01-01T00:00:00Z"},
                              {"ckpt_2", "-", "true", "2026-01-02T00:00:00Z"}}));
  auto requests = api.requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].method, "GET");
  EXPECT_EQ(requests[0].target, "/v1/sandboxes/sb_1/checkpoints");

  auto as_json = run(api.url(), {"checkpoints", "sb_1", "--json"});
  EXPECT_EQ(as_json.code, 0) << as_json.err;
  auto items = json::parse(as_json.out)["items"];
  ASSERT_EQ(items.size(), 2u);
  EXPECT_EQ(items[1]["automatic"], true);
}

TEST(cli_integration, snapshot_verbs_print_the_server_error_and_exit_1) {
  fake_api api([](const request_t& req, socket_t& s) {
    if (req.target() == "/v1/checkpoints/ckpt_x")
      return write_json(s, 404,
                        {{"error", {{"code", "not_found"}, {"message", "no checkpoint ckpt_x"}}}});
    write_json(s, 409, {{"error", {{"code", "wrong_state"}, {"message", "it is running"}}}});
  });
  auto missing = run(api.url(), {"rm-checkpoint", "ckpt_x", "--wait"});
  EXPECT_EQ(missing.code, 1);
  EXPECT_TRUE(missing.out.empty());
  EXPECT_NE(missing.err.find("not_found: no checkpoint ckpt_x (HTTP 404)"), std::string::npos)
    << missing.err;
  EXPECT_NE(missing.err.find("hint:"), std::string::npos);

  auto conflict = run(api.url(), {"wake", "sb_1"});
  EXPECT_EQ(conflict.code, 1);
  EXPECT_NE(conflict.err.find("wrong_state: it is running (HTTP 409)"), std::string::npos)
    << conflict.err;
  // rm-checkpoint --wait did not poll after the 404: one request per run.
  EXPECT_EQ(api.requests().size(), 2u);
}

} // namespace
} // namespace airlock::cli::test
