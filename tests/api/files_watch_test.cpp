// Directory watches through the data plane of `airlockd serve`:
// GET /v1/sandboxes/{id}/files/watch as server-sent events, against the
// guest's inotify in a real sandbox. Waits are for events, each bounded.

#include <algorithm>
#include <functional>
#include <set>

#include "tests/api/api_fixture.hpp"
#include "tests/support/wait.hpp"

namespace airlock::test {
namespace {

using nlohmann::json;

class api_files_watch : public sandbox_suite<api_files_watch> {
public:
  static nlohmann::json sandbox_shape() { return {{"cpu_millis", 500}, {"memory_mb", 256}}; }

protected:
  static std::string watch(const std::string& query) {
    return "/v1/sandboxes/" + sandbox_ + "/files/watch" + query;
  }

  /// Runs a shell line in the sandbox; fails the test unless it exits 0.
  static void sh(const std::string& line) {
    auto out = admin().run(sandbox_, line);
    ASSERT_TRUE(out.exit.has_value()) << line;
    ASSERT_EQ(out.exit->value("exit_code", -1), 0) << line << ": " << out.stderr_bytes;
  }

  using change = std::pair<std::string, std::string>; ///< name, type

  /// Reads `fs` events until `want` are all seen; the changes seen.
  static std::set<change> read_until(http_connection& stream, const std::set<change>& want) {
    std::set<change> seen;
    while (!std::includes(seen.begin(), seen.end(), want.begin(), want.end())) {
      auto event = stream.next_event(milliseconds(30'000));
      if (!event) {
        ADD_FAILURE() << "the watch stream ended or went quiet before all changes came";
        break;
      }
      if (event->event != "fs")
        continue;
      auto data = json::parse(event->data);
      seen.insert({data.value("name", ""), data.value("type", "")});
    }
    return seen;
  }

  /// inotify descriptors the sandbox's agent (its PID 1) holds.
  static int agent_watches() {
    auto out = admin().run(
      sandbox_, "n=0; for f in /proc/1/fd/*; do case $(readlink $f) in *inotify*) n=$((n+1));; "
                "esac; done; echo $n");
    return out.stdout_bytes.empty() ? -1 : std::stoi(out.stdout_bytes);
  }
};

TEST_F(api_files_watch, streams_ready_then_changes_named_below_the_directory) {
  sh("mkdir -p /w1/old");
  auto stream = admin().open_stream(watch("?path=/w1&recursive=true"));
  ASSERT_TRUE(stream);
  ASSERT_EQ(stream->second.status, 200) << stream->second.body;
  EXPECT_EQ(stream->second.headers["content-type"], "text/event-stream");
  auto ready = stream->first.next_event();
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->event, "ready");
  EXPECT_EQ(json::parse(ready->data).value("path", ""), "/w1");

  sh("echo a > /w1/a.txt && mkdir /w1/sub && echo b > /w1/old/b.txt && chmod 600 /w1/a.txt");
  read_until(stream->first, {{"a.txt", "create"},
                             {"a.txt", "write"},
                             {"a.txt", "chmod"},
                             {"sub", "create"},
                             {"old/b.txt", "create"}});
  // The new directory is watched once its create was reported.
  sh("echo c > /w1/sub/c.txt && mv /w1/a.txt /w1/moved.txt && rm /w1/old/b.txt");
  read_until(stream->first, {{"sub/c.txt", "create"},
                             {"a.txt", "rename"},
                             {"moved.txt", "create"},
                             {"old/b.txt", "remove"}});
}

TEST_F(api_files_watch, a_plain_watch_reports_its_own_entries_only) {
  sh("mkdir -p /w2/inner");
  auto stream = admin().open_stream(watch("?path=/w2&recursive=false"));
  ASSERT_TRUE(stream);
  ASSERT_EQ(stream->second.status, 200) << stream->second.body;
  ASSERT_TRUE(stream->first.next_event()); // ready
  sh("echo x > /w2/inner/hidden.txt && echo y > /w2/seen.txt");
  auto seen = read_until(stream->first, {{"seen.txt", "create"}});
  for (const auto& [name, type] : seen)
    EXPECT_EQ(name.find("hidden"), std::string::npos) << name;
}

TEST_F(api_files_watch, bad_input_is_a_json_error_before_any_stream) {
  sh("mkdir -p /w3 && echo f > /w3/file");
  auto api = admin();
  auto relative = api.get(watch("?path=w3"));
  EXPECT_EQ(relative.status, 400) << relative.body;
  EXPECT_TRUE(relative.is_error_shape()) << relative.body;
  auto missing = api.get(watch("?path=/no/such/dir"));
  EXPECT_EQ(missing.status, 404) << missing.body;
  EXPECT_EQ(missing.error_code(), "not_found");
  auto file = api.get(watch("?path=/w3/file"));
  EXPECT_EQ(file.status, 400) << file.body;
  EXPECT_NE(file.body.find("not a directory"), std::string::npos) << file.body;
  EXPECT_EQ(api.get(watch("?path=/w3&recursive=maybe")).status, 400);
  EXPECT_EQ(api.get(watch("")).status, 400) << "?path= is required";
}

TEST_F(api_files_watch, needs_a_token_of_scope_files) {
  auto api = admin();
  auto token_of = [&api](const std::string& scope) {
    auto minted = api.post("/v1/sandboxes/" + sandbox_ + "/token", {{"scope", scope}});
    EXPECT_EQ(minted.status, 201) << minted.body;
    return minted.json.value("token", "");
  };
  sh("mkdir -p /w4");
  api_client processes_only(server().host(), server().port(), token_of("processes"));
  EXPECT_EQ(processes_only.get(watch("?path=/w4")).status, 403);
  api_client files(server().host(), server().port(), token_of("files"));
  auto stream = files.open_stream(watch("?path=/w4"));
  ASSERT_TRUE(stream);
  EXPECT_EQ(stream->second.status, 200);
}

TEST_F(api_files_watch, ends_with_an_error_event_when_the_directory_is_removed) {
  sh("mkdir -p /w5");
  auto stream = admin().open_stream(watch("?path=/w5"));
  ASSERT_TRUE(stream);
  ASSERT_EQ(stream->second.status, 200);
  ASSERT_TRUE(stream->first.next_event()); // ready
  sh("rm -rf /w5");
  std::optional<sse_event> error;
  while (auto event = stream->first.next_event(milliseconds(30'000)))
    if (event->event == "error") {
      error = event;
      break;
    }
  ASSERT_TRUE(error) << "an error event ends the stream";
  auto body = json::parse(error->data);
  EXPECT_EQ(body["error"].value("code", ""), "not_found") << error->data;
  EXPECT_NE(body["error"].value("message", "").find("removed"), std::string::npos);
  EXPECT_TRUE(stream->first.wait_closed()) << "the stream ends after it";
}

TEST_F(api_files_watch, a_client_that_goes_away_stops_the_watch_in_the_sandbox) {
  sh("mkdir -p /w6");
  const int before = agent_watches();
  ASSERT_GE(before, 0);
  {
    auto stream = admin().open_stream(watch("?path=/w6&recursive=true"));
    ASSERT_TRUE(stream);
    ASSERT_EQ(stream->second.status, 200);
    ASSERT_TRUE(stream->first.next_event()); // ready: the guest watches
    EXPECT_EQ(agent_watches(), before + 1);
  } // the connection closes
  EXPECT_TRUE(wait_for([&] { return agent_watches() == before; }, std::chrono::seconds(30),
                       std::chrono::milliseconds(100)))
    << "the guest's inotify descriptor was closed";
}

TEST_F(api_files_watch, a_sandbox_keeps_at_most_16_watches_open) {
  sh("mkdir -p /w7");
  std::vector<std::pair<http_connection, http_reply>> open;
  for (int i = 0; i < 16; ++i) {
    auto stream = admin().open_stream(watch("?path=/w7"));
    ASSERT_TRUE(stream);
    ASSERT_EQ(stream->second.status, 200) << i << ": " << stream->second.body;
    open.push_back(std::move(*stream));
  }
  auto refused = admin().get(watch("?path=/w7"));
  EXPECT_EQ(refused.status, 429) << refused.body;
  EXPECT_EQ(refused.error_code(), "resource_exhausted");
  open.pop_back(); // one client goes: its watch is stopped
  EXPECT_TRUE(wait_for(
    [&] {
      auto again = admin().open_stream(watch("?path=/w7"));
      return again && again->second.status == 200;
    },
    std::chrono::seconds(30), std::chrono::milliseconds(100)));
}

} // namespace
} // namespace airlock::test
