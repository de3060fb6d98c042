// envd's calls through the E2B front against the real daemon, as the e2b SDK
// sends them (docs/e2b.md): filesystem calls, health, refusals as Connect
// errors, process streams and input, and envd's host-name addresses.

#include <set>
#include <string>
#include <thread>

#include "schema/base64.hpp"
#include "tests/api/e2b_fixture.hpp"
#include "tests/support/wait.hpp"

namespace airlock::test {
namespace {

TEST_F(api_e2b_envd, filesystem_calls_make_stat_list_and_remove_as_envd_does) {
  auto box = create_with_token();
  ASSERT_FALSE(box.token.empty()) << "create hands out envd's access token";

  auto made = rpc(box, "filesystem.Filesystem/MakeDir", {{"path", "proj/sub"}});
  ASSERT_EQ(made.status, 200) << made.body;
  EXPECT_EQ(made.json["entry"]["path"], "/root/proj/sub") << "relative to the user's home";
  EXPECT_EQ(made.json["entry"]["type"], "FILE_TYPE_DIRECTORY");
  auto again = rpc(box, "filesystem.Filesystem/MakeDir", {{"path", "/root/proj/sub"}});
  EXPECT_EQ(again.status, 409) << again.body;
  EXPECT_EQ(again.json["code"], "already_exists") << "makeDir() returns false on it";

  auto api = admin();
  ASSERT_EQ(
    api.call("PUT", "/v1/sandboxes/" + box.id + "/files?path=/root/proj/a.txt&mode=0640", "four")
        .status
      / 100,
    2);
  auto stat = rpc(box, "filesystem.Filesystem/Stat", {{"path", "/root/proj/a.txt"}});
  ASSERT_EQ(stat.status, 200) << stat.body;
  EXPECT_EQ(stat.json["entry"]["type"], "FILE_TYPE_FILE");
  EXPECT_EQ(stat.json["entry"]["size"], "4") << "int64 as proto3 JSON writes it";
  EXPECT_EQ(stat.json["entry"]["mode"], 0640);
  EXPECT_EQ(stat.json["entry"]["permissions"], "-rw-r-----");

  auto listed = rpc(box, "filesystem.Filesystem/ListDir", {{"path", "/root/proj"}, {"depth", 1}});
  ASSERT_EQ(listed.status, 200) << listed.body;
  std::set<std::string> paths;
  for (const auto& entry : listed.json["entries"])
    paths.insert(entry["path"].get<std::string>());
  EXPECT_EQ(paths, (std::set<std::string>{"/root/proj/a.txt", "/root/proj/sub"}));

  auto missing = rpc(box, "filesystem.Filesystem/Stat", {{"path", "/root/none"}});
  EXPECT_EQ(missing.status, 404) << missing.body;
  EXPECT_EQ(missing.json["code"], "not_found") << "exists() is false on it";

  EXPECT_EQ(rpc(box, "filesystem.Filesystem/Remove", {{"path", "proj"}}).status, 200);
  EXPECT_EQ(rpc(box, "filesystem.Filesystem/Remove", {{"path", "proj"}}).status, 200)
    << "removing what is not there succeeds";
  EXPECT_EQ(rpc(box, "filesystem.Filesystem/Stat", {{"path", "/root/proj"}}).status, 404);
  EXPECT_EQ(e2b("DELETE", "/sandboxes/" + box.id).status, 204);
}

TEST_F(api_e2b_envd, health_tells_a_running_sandbox_from_a_killed_one) {
  auto box = create_with_token();
  auto health = [&box] {
    return as("").call("GET", "/e2b/envd/health", {},
                       {{"E2b-Sandbox-Id", box.id}, {"X-Access-Token", box.token}});
  };
  EXPECT_EQ(health().status, 204);
  ASSERT_EQ(e2b("DELETE", "/sandboxes/" + box.id).status, 204);
  EXPECT_EQ(health().status, 502) << "isRunning() is false only on 502";
}

TEST_F(api_e2b_envd, refusals_are_connect_errors) {
  auto box = create_with_token();
  auto no_token = as("").call("POST", "/e2b/envd/filesystem.Filesystem/Stat", R"({"path":"/"})",
                              {{"Content-Type", "application/json"}, {"E2b-Sandbox-Id", box.id}});
  EXPECT_EQ(no_token.status, 401);
  EXPECT_EQ(no_token.json["code"], "unauthenticated");
  auto forged = rpc({box.id, "not-a-token"}, "filesystem.Filesystem/Stat", {{"path", "/"}});
  EXPECT_EQ(forged.status, 401) << forged.body;
  EXPECT_EQ(rpc(box, "filesystem.Filesystem/Stat", {{"path", "/"}}, "text/plain").status, 415);
  auto unknown = rpc(box, "filesystem.Filesystem/Chmod", {{"path", "/"}});
  EXPECT_EQ(unknown.json["code"], "unimplemented") << unknown.body;
  auto bad_body = as("").call("POST", "/e2b/envd/filesystem.Filesystem/Stat", "{\"path\":",
                              {{"Content-Type", "application/json"},
                               {"E2b-Sandbox-Id", box.id},
                               {"X-Access-Token", box.token}});
  EXPECT_EQ(bad_body.status, 400);
  EXPECT_EQ(bad_body.json["code"], "invalid_argument");
  // A stream refused before it starts: 200, and the error in the end-of-stream envelope.
  std::string envelope = std::string("\0\0\0\0\2{}", 7);
  auto start = as("").call("POST", "/e2b/envd/process.Process/StreamInput", envelope,
                           {{"Content-Type", "application/connect+json"},
                            {"E2b-Sandbox-Id", box.id},
                            {"X-Access-Token", box.token}});
  EXPECT_EQ(start.status, 200);
  ASSERT_GE(start.body.size(), 5u);
  EXPECT_EQ(start.body[0], '\2') << "only the end-of-stream envelope";
  EXPECT_NE(start.body.find("invalid_argument"), std::string::npos)
    << "an end-of-stream envelope is no start: " << start.body;
  EXPECT_EQ(e2b("DELETE", "/sandboxes/" + box.id).status, 204);
}

TEST_F(api_e2b_envd, start_streams_a_commands_output_and_exit_as_envd_events) {
  auto box = create_with_token();
  // What commands.run() sends, with /bin/sh: the minimal template has no bash.
  json request = {{"process",
                   {{"cmd", "/bin/sh"},
                    {"args", {"-c", "echo out; echo \"$E2B_VAR\" >&2; pwd; exit 3"}},
                    {"envs", {{"E2B_VAR", "from envs"}}}}},
                  {"stdin", false}};
  auto started = as("").call("POST", "/e2b/envd/process.Process/Start", envelope_of(request),
                             {{"Content-Type", "application/connect+json"},
                              {"Connect-Protocol-Version", "1"},
                              {"E2b-Sandbox-Id", box.id},
                              {"X-Access-Token", box.token}});
  ASSERT_EQ(started.status, 200) << started.body;
  EXPECT_EQ(started.headers["content-type"], "application/connect+json");
  auto stream = read_envelopes(started.body);
  ASSERT_TRUE(stream.ended) << "a stream ends with its end-of-stream envelope";
  EXPECT_EQ(stream.end, json::object()) << stream.end.dump();
  ASSERT_GE(stream.messages.size(), 2u) << started.body;
  EXPECT_GT(stream.messages.front()["event"]["start"].value("pid", 0), 1)
    << "the first event is start, with the sandbox's pid";
  std::string out, err;
  for (const auto& message : stream.messages) {
    const auto& data = message["event"].value("data", json::object());
    if (data.contains("stdout"))
      out += base64_decode(data["stdout"].get<std::string>()).value_or("?");
    if (data.contains("stderr"))
      err += base64_decode(data["stderr"].get<std::string>()).value_or("?");
  }
  EXPECT_EQ(out, "out\n/root\n") << "stdout, in the user's home";
  EXPECT_EQ(err, "from envs\n");
  const auto& end = stream.messages.back()["event"]["end"];
  EXPECT_EQ(end.value("exitCode", 0), 3) << stream.messages.back().dump();
  EXPECT_TRUE(end.value("exited", false));
  EXPECT_EQ(end.value("error", ""), "exit status 3") << "CommandExitError's message";

  auto missing = as("").call("POST", "/e2b/envd/process.Process/Start",
                             envelope_of({{"process", {{"cmd", "/no/such/program"}}}}),
                             {{"Content-Type", "application/connect+json"},
                              {"E2b-Sandbox-Id", box.id},
                              {"X-Access-Token", box.token}});
  ASSERT_EQ(missing.status, 200) << missing.body;
  auto failed = read_envelopes(missing.body);
  ASSERT_TRUE(failed.ended);
  EXPECT_EQ(e2b("DELETE", "/sandboxes/" + box.id).status, 204);
}

TEST_F(api_e2b_envd, a_quiet_stream_gets_keepalive_events_at_the_asked_interval) {
  auto box = create_with_token();
  // The process is quiet for three seconds: the subject, not a synchronisation.
  json request = {{"process", {{"cmd", "/bin/sh"}, {"args", {"-c", "sleep 3; echo done"}}}},
                  {"stdin", false}};
  auto reply = as("").call("POST", "/e2b/envd/process.Process/Start", envelope_of(request),
                           {{"Content-Type", "application/connect+json"},
                            {"Keepalive-Ping-Interval", "1"},
                            {"E2b-Sandbox-Id", box.id},
                            {"X-Access-Token", box.token}});
  ASSERT_EQ(reply.status, 200) << reply.body;
  auto stream = read_envelopes(reply.body);
  ASSERT_TRUE(stream.ended) << reply.body;
  size_t keepalives = 0;
  for (const auto& message : stream.messages)
    keepalives += message["event"].contains("keepalive") ? 1 : 0;
  EXPECT_GE(keepalives, 1u) << "a stream quiet for 3 s at a 1 s interval: " << reply.body;
  const auto& end = stream.messages.back()["event"]["end"];
  EXPECT_TRUE(end.value("exited", false)) << reply.body;
  EXPECT_EQ(end.value("exitCode", 0), 0) << "proto3 JSON leaves a zero code out: " << reply.body;
  EXPECT_EQ(e2b("DELETE", "/sandboxes/" + box.id).status, 204);
}

TEST_F(api_e2b_envd, background_processes_take_input_list_reattach_and_die_by_signal) {
  auto box = create_with_token();
  auto stream_call = [&box](const std::string& method, const json& request) {
    return as("").call("POST", "/e2b/envd/process.Process/" + method, envelope_of(request),
                       {{"Content-Type", "application/connect+json"},
                        {"E2b-Sandbox-Id", box.id},
                        {"X-Access-Token", box.token}});
  };
  auto running_pids = [&box] {
    std::set<int> pids;
    auto listed = rpc(box, "process.Process/List", json::object());
    for (const auto& process : listed.json["processes"])
      pids.insert(process.value("pid", 0));
    return pids;
  };
  // A command that echoes its stdin, left running as commands.run({background: true}) does.
  api_reply cat_reply;
  std::jthread cat([&] {
    cat_reply = stream_call("Start", {{"process", {{"cmd", "/bin/cat"}}}, {"stdin", true}});
  });
  std::set<int> pids;
  ASSERT_TRUE(wait_for([&] { return !(pids = running_pids()).empty(); }, std::chrono::seconds(30),
                       std::chrono::milliseconds(50)))
    << "List shows the running process";
  const int pid = *pids.begin();
  // Re-attach (commands.connect) on a socket of its own, and read its start
  // event before sending input: the stream is attached from then on.
  auto watcher = http_connection::open(server().host(), server().port());
  ASSERT_TRUE(watcher);
  const auto connect_body = envelope_of({{"process", {{"pid", pid}}}});
  ASSERT_TRUE(watcher->send("POST /e2b/envd/process.Process/Connect HTTP/1.1\r\nHost: test\r\n"
                            "Content-Type: application/connect+json\r\nE2b-Sandbox-Id: "
                            + box.id + "\r\nX-Access-Token: " + box.token + "\r\nContent-Length: "
                            + std::to_string(connect_body.size()) + "\r\n\r\n" + connect_body));
  auto watch_head = watcher->read_head();
  ASSERT_TRUE(watch_head);
  EXPECT_EQ(watch_head->status, 200);
  auto watch_start = watcher->read_until("}}}");
  ASSERT_TRUE(watch_start) << "the start event of Connect";

  auto input = rpc(box, "process.Process/SendInput",
                   {{"process", {{"pid", pid}}}, {"input", {{"stdin", "aGVsbG8K"}}}});
  EXPECT_EQ(input.status, 200) << input.body;
  EXPECT_EQ(rpc(box, "process.Process/CloseStdin", {{"process", {{"pid", pid}}}}).status, 200);
  cat.join();
  auto started = read_envelopes(cat_reply.body);
  ASSERT_TRUE(started.ended) << cat_reply.body;
  std::string echoed;
  for (const auto& message : started.messages)
    if (message["event"].contains("data"))
      echoed += base64_decode(message["event"]["data"].value("stdout", "")).value_or("?");
  EXPECT_EQ(echoed, "hello\n") << "stdin reached it";
  const auto& cat_end = started.messages.back()["event"]["end"];
  EXPECT_TRUE(cat_end.value("exited", false)) << started.messages.back().dump();
  EXPECT_EQ(cat_end.value("exitCode", 0), 0) << "0 is proto3's default: left out";

  ASSERT_TRUE(watcher->read_body(*watch_head));
  auto connected = read_envelopes(*watch_start + watch_head->body);
  ASSERT_TRUE(connected.ended) << watch_head->body;
  ASSERT_FALSE(connected.messages.empty());
  EXPECT_EQ(connected.messages.front()["event"]["start"].value("pid", 0), pid);
  std::string seen;
  for (const auto& message : connected.messages)
    if (message["event"].contains("data"))
      seen += base64_decode(message["event"]["data"].value("stdout", "")).value_or("?");
  EXPECT_EQ(seen, "hello\n") << "what came after it attached";
  EXPECT_TRUE(connected.messages.back()["event"].contains("end")) << "it saw the exit too";

  api_reply sleep_reply;
  std::jthread sleeper([&] {
    sleep_reply = stream_call("Start", {{"process", {{"cmd", "/bin/sleep"}, {"args", {"600"}}}}});
  });
  ASSERT_TRUE(wait_for([&] { return !(pids = running_pids()).empty(); }, std::chrono::seconds(30),
                       std::chrono::milliseconds(50)));
  auto killed = rpc(box, "process.Process/SendSignal",
                    {{"process", {{"pid", *pids.begin()}}}, {"signal", "SIGNAL_SIGKILL"}});
  EXPECT_EQ(killed.status, 200) << killed.body;
  sleeper.join();
  auto slept = read_envelopes(sleep_reply.body);
  ASSERT_FALSE(slept.messages.empty()) << sleep_reply.body;
  EXPECT_NE(slept.messages.back()["event"]["end"].value("error", "").find("signal 9"),
            std::string::npos)
    << slept.messages.back().dump();
  EXPECT_TRUE(running_pids().empty()) << "a killed process is gone, not a zombie";
  auto none = rpc(box, "process.Process/SendSignal",
                  {{"process", {{"pid", 99999}}}, {"signal", "SIGNAL_SIGKILL"}});
  EXPECT_EQ(none.json["code"], "not_found") << "kill() returns false";
  EXPECT_EQ(e2b("DELETE", "/sandboxes/" + box.id).status, 204);
}

TEST_F(api_e2b_envd, host_name_addresses_reach_envd_as_the_sdk_sends_them_without_a_sandbox_url) {
  auto created = e2b("POST", "/v2/sandboxes", {{"templateID", "minimal"}});
  ASSERT_EQ(created.status, 201) << created.body;
  EXPECT_EQ(created.json["domain"], e2b_test_domain) << "the SDK builds envd's host from it";
  sandbox_access box{created.json.value("sandboxID", ""),
                     created.json.value("envdAccessToken", "")};
  const std::string host = "49983-" + box.id + "." + e2b_test_domain;
  auto health =
    as("").call("GET", "/health", {}, {{"Host", host + ":443"}, {"X-Access-Token", box.token}});
  EXPECT_EQ(health.status, 204) << health.body;
  auto stat = as("").call("POST", "/filesystem.Filesystem/Stat", json{{"path", "/etc"}}.dump(),
                          {{"Host", host},
                           {"Content-Type", "application/json"},
                           {"Connect-Protocol-Version", "1"},
                           {"X-Access-Token", box.token}});
  ASSERT_EQ(stat.status, 200) << stat.body;
  EXPECT_EQ(stat.json["entry"]["type"], "FILE_TYPE_DIRECTORY");
  auto upper =
    as("").call("GET", "/health", {},
                {{"Host", "49983-" + box.id + ".E2B.Test"}, {"X-Access-Token", box.token}});
  EXPECT_EQ(upper.status, 204) << "host names are case-insensitive";
  auto wrong_token = as("").call("GET", "/files?path=/etc/hostname", {},
                                 {{"Host", host}, {"X-Access-Token", "not-a-token"}});
  EXPECT_EQ(wrong_token.status / 100, 4) << wrong_token.body;
  auto other_port =
    as("").call("GET", "/", {}, {{"Host", "8080-" + box.id + "." + e2b_test_domain}});
  EXPECT_EQ(other_port.status, 501) << other_port.body;
  EXPECT_NE(other_port.json.value("message", "").find("49983"), std::string::npos);
  auto elsewhere =
    as("").call("GET", "/health", {}, {{"Host", "49983-" + box.id + ".example.org"}});
  EXPECT_EQ(elsewhere.status, 404) << "another domain is not rewritten";
  ASSERT_EQ(e2b("DELETE", "/sandboxes/" + box.id).status, 204);
  EXPECT_EQ(
    as("").call("GET", "/health", {}, {{"Host", host}, {"X-Access-Token", box.token}}).status, 502);
}
} // namespace
} // namespace airlock::test
