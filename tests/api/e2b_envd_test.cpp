// envd against the real daemon, continued: accounts (the default user, root
// on request, ownership of what envd writes), process configs and tags, and
// directory watches (WatchDir and the watcher calls).

#include <zlib.h>

#include <set>
#include <string>
#include <vector>

#include "schema/base64.hpp"
#include "tests/api/e2b_fixture.hpp"
#include "tests/support/wait.hpp"

namespace airlock::test {
namespace {

TEST_F(api_e2b_envd, calls_run_as_the_default_user_when_the_sandbox_has_it_else_as_root) {
  // The stdout of `script` run through envd's Start (as `user` when given,
  // through Basic auth as the SDK sends it).
  auto envd_run = [](const std::string& sandbox, const std::string& token,
                     const std::string& script, const std::string& user = {}) {
    json request = {{"process", {{"cmd", "/bin/sh"}, {"args", {"-c", script}}}}, {"stdin", false}};
    std::vector<std::pair<std::string, std::string>> headers = {
      {"Content-Type", "application/connect+json"},
      {"E2b-Sandbox-Id", sandbox},
      {"X-Access-Token", token}};
    if (!user.empty())
      headers.emplace_back("Authorization", "Basic " + base64_encode(user + ":"));
    return stdout_of(
      as("").call("POST", "/e2b/envd/process.Process/Start", envelope_of(request), headers).body);
  };
  // minimal has no `user`: calls are root's, relative paths under /root.
  auto rootish = create_with_token();
  EXPECT_EQ(envd_run(rootish.id, rootish.token, "id -u; pwd"), "0\n/root\n");
  EXPECT_EQ(e2b("DELETE", "/sandboxes/" + rootish.id).status, 204);

  // A sandbox given E2B's account before its first envd call.
  auto created = e2b("POST", "/v2/sandboxes", {{"templateID", "minimal"}});
  ASSERT_EQ(created.status, 201) << created.body;
  const std::string id = created.json["sandboxID"];
  const std::string token = created.json["envdAccessToken"];
  auto api = admin();
  auto passwd = api.get("/v1/sandboxes/" + id + "/files?path=/etc/passwd");
  ASSERT_EQ(passwd.status, 200);
  ASSERT_EQ(api
              .call("PUT", "/v1/sandboxes/" + id + "/files?path=/etc/passwd",
                    passwd.body + "user:x:1000:1000::/home/user:/bin/sh\n")
              .status,
            201);
  ASSERT_EQ(api.call("POST", "/v1/sandboxes/" + id + "/files/mkdir?path=/home/user").status, 201);
  EXPECT_EQ(envd_run(id, token, "chown 1000:1000 /home/user && echo ok", "root"), "ok\n");

  EXPECT_EQ(envd_run(id, token, "id -u; pwd"), "1000\n/home/user\n") << "the default user";
  EXPECT_EQ(envd_run(id, token, "id -u", "root"), "0\n") << "Basic auth picks root";

  // Files written for the user are the user's, parents inside the home too.
  auto written = as("").call("POST", "/e2b/envd/files?path=notes/today.txt", "mine\n",
                             {{"Content-Type", "application/octet-stream"},
                              {"E2b-Sandbox-Id", id},
                              {"X-Access-Token", token}});
  ASSERT_EQ(written.status, 200) << written.body;
  EXPECT_EQ(written.json[0]["path"], "/home/user/notes/today.txt");
  EXPECT_EQ(envd_run(id, token,
                     "stat -c %u /home/user/notes /home/user/notes/today.txt; "
                     "echo more >> notes/today.txt && cat notes/today.txt"),
            "1000\n1000\nmine\nmore\n");
  auto made = rpc({id, token}, "filesystem.Filesystem/MakeDir", {{"path", "work/a"}});
  ASSERT_EQ(made.status, 200) << made.body;
  EXPECT_EQ(made.json["entry"]["path"], "/home/user/work/a");
  EXPECT_EQ(envd_run(id, token, "touch work/a/b && stat -c %u work work/a/b"), "1000\n1000\n");
  auto as_root = as("").call("POST", "/e2b/envd/files?path=/tmp/r.txt&username=root", "r",
                             {{"Content-Type", "application/octet-stream"},
                              {"E2b-Sandbox-Id", id},
                              {"X-Access-Token", token}});
  ASSERT_EQ(as_root.status, 200) << as_root.body;
  EXPECT_EQ(envd_run(id, token, "stat -c %u /tmp/r.txt"), "0\n") << "username=root writes as root";
  EXPECT_EQ(e2b("DELETE", "/sandboxes/" + id).status, 204);
}

TEST_F(api_e2b_envd, stream_input_writes_a_client_streams_inputs_in_order) {
  auto box = create_with_token();
  auto api = admin();
  auto started = api.exec(
    box.id,
    {{"argv", {"sh", "-c", "head -c 10 > /tmp/in.txt"}}, {"stdin", true}, {"tag", "reader"}});
  ASSERT_TRUE(started);
  ASSERT_TRUE(wait_for(
    [&] {
      auto list = rpc(box, "process.Process/List", json::object());
      for (const auto& process : list.json.value("processes", json::array()))
        if (process.value("tag", "") == "reader")
          return true;
      return false;
    },
    std::chrono::seconds(30), std::chrono::milliseconds(50)));
  auto stream_input = [&](const std::string& body) {
    return as("").call("POST", "/e2b/envd/process.Process/StreamInput", body,
                       {{"Content-Type", "application/connect+json"},
                        {"E2b-Sandbox-Id", box.id},
                        {"X-Access-Token", box.token}});
  };
  auto data = [](const std::string& bytes) {
    return envelope_of({{"data", {{"input", {{"stdin", base64_encode(bytes)}}}}}});
  };
  auto answer =
    stream_input(envelope_of({{"start", {{"process", {{"tag", "reader"}}}}}}) + data("hello")
                 + envelope_of({{"keepalive", json::object()}}) + data("world"));
  ASSERT_EQ(answer.status, 200) << answer.body;
  auto frames = read_envelopes(answer.body);
  EXPECT_EQ(frames.messages.size(), 1u) << "one StreamInputResponse";
  ASSERT_TRUE(frames.ended);
  EXPECT_FALSE(frames.end.contains("error")) << answer.body;
  auto ended = api.get(started->attach_path + "?wait=30");
  EXPECT_EQ(ended.json["state"], "exited") << ended.body;
  EXPECT_EQ(api.run(box.id, "cat /tmp/in.txt").stdout_bytes, "helloworld") << "in order";

  auto no_start = read_envelopes(stream_input(data("x")).body);
  ASSERT_TRUE(no_start.ended);
  EXPECT_EQ(no_start.end["error"]["code"], "invalid_argument");
  auto nobody = read_envelopes(
    stream_input(envelope_of({{"start", {{"process", {{"tag", "none"}}}}}}) + data("x")).body);
  EXPECT_EQ(nobody.end["error"]["code"], "not_found");
  auto cut = envelope_of({{"start", {{"process", {{"tag", "reader"}}}}}});
  cut.resize(cut.size() - 2);
  EXPECT_EQ(read_envelopes(stream_input(cut).body).end["error"]["code"], "invalid_argument")
    << "a stream ending inside an envelope";
  EXPECT_EQ(e2b("DELETE", "/sandboxes/" + box.id).status, 204);
}

TEST_F(api_e2b_envd, list_shows_configs_and_tags_and_calls_find_processes_by_tag) {
  auto box = create_with_token();
  auto api = admin();
  auto started = api.exec(
    box.id,
    {{"argv", {"sleep", "100"}}, {"env", {{"ASKED", "yes"}}}, {"cwd", "/tmp"}, {"tag", "sleeper"}});
  ASSERT_TRUE(started);
  // Listed once it has a pid (bounded: the start is asynchronous).
  json listed;
  ASSERT_TRUE(wait_for(
    [&] {
      auto list = rpc(box, "process.Process/List", json::object());
      for (const auto& process : list.json.value("processes", json::array()))
        if (process.value("tag", "") == "sleeper")
          listed = process;
      return !listed.is_null();
    },
    std::chrono::seconds(30), std::chrono::milliseconds(50)));
  EXPECT_EQ(listed["config"]["cmd"], "sleep");
  EXPECT_EQ(listed["config"]["args"], json({"100"}));
  EXPECT_EQ(listed["config"]["envs"], json({{"ASKED", "yes"}}));
  EXPECT_EQ(listed["config"]["cwd"], "/tmp");
  auto killed = rpc(box, "process.Process/SendSignal",
                    {{"process", {{"tag", "sleeper"}}}, {"signal", "SIGNAL_SIGKILL"}});
  EXPECT_EQ(killed.status, 200) << killed.body;
  auto ended = api.get(started->attach_path + "?wait=30");
  EXPECT_EQ(ended.json["state"], "exited") << ended.body;
  auto again = rpc(box, "process.Process/SendSignal",
                   {{"process", {{"tag", "sleeper"}}}, {"signal", "SIGNAL_SIGKILL"}});
  EXPECT_EQ(again.status, 404) << "no running process has the tag now: " << again.body;
  EXPECT_EQ(e2b("DELETE", "/sandboxes/" + box.id).status, 204);
}

TEST_F(api_e2b_envd, watch_dir_streams_start_then_changes_as_envd_names_them) {
  auto box = create_with_token();
  auto api = admin();
  auto run = [&api, &box](const std::string& line) {
    auto out = api.run(box.id, line);
    ASSERT_TRUE(out.exit.has_value()) << line;
    ASSERT_EQ(out.exit->value("exit_code", -1), 0) << line << ": " << out.stderr_bytes;
  };
  run("mkdir -p /root/proj/sub");
  auto connection = http_connection::open(server().host(), server().port());
  ASSERT_TRUE(connection);
  const auto body = envelope_of({{"path", "proj"}, {"recursive", true}});
  ASSERT_TRUE(
    connection->send("POST /e2b/envd/filesystem.Filesystem/WatchDir HTTP/1.1\r\nHost: test\r\n"
                     "Content-Type: application/connect+json\r\nE2b-Sandbox-Id: "
                     + box.id + "\r\nX-Access-Token: " + box.token
                     + "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body));
  auto head = connection->read_head();
  ASSERT_TRUE(head);
  EXPECT_EQ(head->status, 200);
  EXPECT_EQ(head->headers["content-type"], "application/connect+json");
  ASSERT_TRUE(connection->read_until("{\"start\":{}}")) << "start first, once it watches";
  run("echo a > /root/proj/a.txt && echo b > /root/proj/sub/b.txt && chmod 600 /root/proj/a.txt"
      " && rm /root/proj/a.txt");
  const auto event = [](const std::string& name, const std::string& type) {
    return "{\"filesystem\":{\"name\":\"" + name + "\",\"type\":\"EVENT_TYPE_" + type + "\"}}";
  };
  auto seen = connection->read_until(event("a.txt", "REMOVE"));
  ASSERT_TRUE(seen) << "relative paths resolve under the home; " << connection->unread();
  EXPECT_NE(seen->find(event("a.txt", "CREATE")), std::string::npos) << *seen;
  EXPECT_NE(seen->find(event("a.txt", "WRITE")), std::string::npos) << *seen;
  EXPECT_NE(seen->find(event("a.txt", "CHMOD")), std::string::npos) << *seen;
  EXPECT_NE(seen->find(event("sub/b.txt", "CREATE")), std::string::npos) << *seen;

  // The directory goes: the stream ends with not_found in its end-of-stream envelope.
  run("rm -rf /root/proj");
  auto rest = connection->read_until("not_found");
  ASSERT_TRUE(rest) << connection->unread();
  EXPECT_TRUE(connection->wait_closed());

  auto missing = as("").call("POST", "/e2b/envd/filesystem.Filesystem/WatchDir",
                             envelope_of({{"path", "/no/such/dir"}}),
                             {{"Content-Type", "application/connect+json"},
                              {"E2b-Sandbox-Id", box.id},
                              {"X-Access-Token", box.token}});
  EXPECT_EQ(missing.status, 200) << "a stream's error goes in its end-of-stream envelope";
  auto refused = read_envelopes(missing.body);
  ASSERT_TRUE(refused.ended) << missing.body;
  EXPECT_TRUE(refused.messages.empty()) << "no start: it never watched";
  EXPECT_EQ(refused.end["error"].value("code", ""), "not_found") << missing.body;
  EXPECT_EQ(e2b("DELETE", "/sandboxes/" + box.id).status, 204);
}

TEST_F(api_e2b_envd, watchers_are_polled_for_their_events_and_removed) {
  auto box = create_with_token();
  auto api = admin();
  ASSERT_EQ(api.run(box.id, "mkdir -p /root/polled").exit->value("exit_code", -1), 0);
  auto created = rpc(box, "filesystem.Filesystem/CreateWatcher", {{"path", "/root/polled"}});
  ASSERT_EQ(created.status, 200) << created.body;
  const std::string id = created.json.value("watcherId", "");
  ASSERT_FALSE(id.empty()) << created.body;
  ASSERT_EQ(api.run(box.id, "echo x > /root/polled/x.txt").exit->value("exit_code", -1), 0);
  std::set<std::string> seen;
  ASSERT_TRUE(wait_for(
    [&] {
      auto polled = rpc(box, "filesystem.Filesystem/GetWatcherEvents", {{"watcherId", id}});
      EXPECT_EQ(polled.status, 200) << polled.body;
      for (const auto& event : polled.json.value("events", json::array()))
        seen.insert(event.value("name", "") + " " + event.value("type", ""));
      return seen.count("x.txt EVENT_TYPE_CREATE") != 0;
    },
    std::chrono::seconds(30), std::chrono::milliseconds(100)))
    << "GetWatcherEvents hands out the changes since the last call";
  auto stranger =
    rpc({box.id, "another-token"}, "filesystem.Filesystem/GetWatcherEvents", {{"watcherId", id}});
  EXPECT_NE(stranger.status, 200) << "a watcher is its creator's";
  EXPECT_EQ(rpc(box, "filesystem.Filesystem/RemoveWatcher", {{"watcherId", id}}).status, 200);
  auto gone = rpc(box, "filesystem.Filesystem/GetWatcherEvents", {{"watcherId", id}});
  EXPECT_EQ(gone.status, 404) << gone.body;
  EXPECT_EQ(gone.json["code"], "not_found");
  auto missing =
    rpc(box, "filesystem.Filesystem/CreateWatcher", {{"path", "/root/none"}, {"recursive", true}});
  EXPECT_EQ(missing.status, 404) << missing.body;
  EXPECT_EQ(e2b("DELETE", "/sandboxes/" + box.id).status, 204);
}

/// `bytes` gzip-compressed.
std::string gzip_of(const std::string& bytes) {
  z_stream stream{};
  EXPECT_EQ(
    deflateInit2(&stream, Z_BEST_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY),
    Z_OK);
  std::string out(deflateBound(&stream, bytes.size()), '\0');
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  stream.avail_in = static_cast<uInt>(bytes.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&stream, Z_FINISH), Z_STREAM_END);
  out.resize(stream.total_out);
  deflateEnd(&stream);
  return out;
}

TEST_F(api_e2b_envd, gzip_uploads_are_inflated_within_the_upload_limit_and_metadata_is_refused) {
  auto box = create_with_token();
  auto upload = [&](const std::string& path, const std::string& body, const std::string& encoding) {
    return as("").call("POST", "/e2b/envd/files?path=" + path, body,
                       {{"Content-Type", "application/octet-stream"},
                        {"Content-Encoding", encoding},
                        {"E2b-Sandbox-Id", box.id},
                        {"X-Access-Token", box.token}});
  };
  const std::string text(100'000, 'z');
  auto zipped = upload("/tmp/z.txt", gzip_of(text), "gzip");
  ASSERT_EQ(zipped.status, 200) << zipped.body;
  auto back = admin().get("/v1/sandboxes/" + box.id + "/files?path=/tmp/z.txt");
  EXPECT_EQ(back.body, text) << "stored as the plain bytes";

  auto broken = upload("/tmp/b.txt", "not gzip at all", "gzip");
  EXPECT_EQ(broken.status, 400) << broken.body;
  auto cut = gzip_of(text);
  cut.resize(cut.size() / 2);
  EXPECT_EQ(upload("/tmp/c.txt", cut, "gzip").status, 400) << "a truncated body";
  EXPECT_EQ(upload("/tmp/d.txt", "x", "br").status, 400) << "an encoding it does not speak";
  // 65 MiB of zeros is a small body that inflates past the 64 MiB upload limit.
  auto bomb = upload("/tmp/bomb", gzip_of(std::string((65u << 20), '\0')), "gzip");
  EXPECT_EQ(bomb.status, 413) << bomb.body;
  EXPECT_EQ(admin().get("/v1/sandboxes/" + box.id + "/files/stat?path=/tmp/bomb").status, 404)
    << "nothing written";

  // File metadata (E2B keeps it as xattrs) is refused, not dropped.
  auto with_metadata = as("").call("POST", "/e2b/envd/files?path=/tmp/m.txt", "meta",
                                   {{"Content-Type", "application/octet-stream"},
                                    {"X-Metadata-Owner", "agent"},
                                    {"E2b-Sandbox-Id", box.id},
                                    {"X-Access-Token", box.token}});
  EXPECT_EQ(with_metadata.status, 400) << with_metadata.body;
  EXPECT_NE(with_metadata.body.find("metadata"), std::string::npos) << with_metadata.body;
  EXPECT_EQ(admin().get("/v1/sandboxes/" + box.id + "/files/stat?path=/tmp/m.txt").status, 404);
  EXPECT_EQ(e2b("DELETE", "/sandboxes/" + box.id).status, 204);
}

} // namespace
} // namespace airlock::test
