// Templates through the API with the real daemon: an OCI image and a
// `docker save` archive uploaded as versions (whiteouts, opaque directories,
// a symlink, a hard link and a setuid file come out as the layers say; the
// image's Env and Entrypoint/Cmd become the template's defaults, and its
// start_cmd runs in every sandbox), pinned and current versions, a version
// in use that cannot be deleted, archives that try to escape the root or
// carry a device node, and what another tenant may see and do.

#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "tests/api/api_fixture.hpp"
#include "tests/support/host.hpp"

namespace airlock::test {
namespace {

using nlohmann::json;

class api_templates : public api_suite {
protected:
  /// The archive make_image.py writes for `kind`, as bytes.
  static std::string image(const std::string& kind) {
    temp_dir dir("airlock-image");
    const std::string out = dir.path() + "/" + kind + ".tar";
    const std::string command =
      "python3 " + std::string(AIRLOCK_MAKE_IMAGE) + " " + kind + " " + out;
    EXPECT_EQ(std::system(command.c_str()), 0) << command;
    return read_file(out);
  }

  /// PUT the archive; the build operation as it ended.
  static json upload(const api_client& api, const std::string& name, const std::string& format,
                     const std::string& bytes, const std::string& query = {}) {
    auto put = api.call("PUT", "/v1/templates/" + name + "/archive?format=" + format + query, bytes,
                        {{"Content-Type", "application/octet-stream"}});
    EXPECT_EQ(put.status, 202) << put.body;
    if (put.status != 202)
      return json::object();
    EXPECT_EQ(put.json["template"], name);
    return api.wait_operation(put.json["operation_id"]);
  }

  static std::string output_of(const api_client& api, const std::string& id,
                               const std::string& cmd) {
    return api.run(id, cmd).stdout_bytes;
  }
};

TEST_F(api_templates, an_oci_image_becomes_a_version_whose_sandboxes_see_its_layers_and_defaults) {
  auto api = admin();
  auto built = upload(api, "oci-test", "oci", image("oci"));
  ASSERT_EQ(built["state"], "succeeded") << built.dump();
  EXPECT_EQ(built["result"]["version"]["version"], 1);
  EXPECT_EQ(built["result"]["progress"]["percent"], 100);
  auto log = api.get("/v1/templates/oci-test/versions/1/log");
  ASSERT_EQ(log.status, 200) << log.body;
  EXPECT_NE(log.body.find("# layer 1/"), std::string::npos) << "each layer is logged: " << log.body;
  auto record = api.get("/v1/templates/oci-test");
  ASSERT_EQ(record.status, 200) << record.body;
  EXPECT_EQ(record.json["version"], 1);
  EXPECT_EQ(record.json["state"], "ready");
  const auto& v1 = record.json["versions"][0];
  EXPECT_EQ(v1["digest"].get<std::string>().rfind("sha256:", 0), 0u) << v1.dump();
  EXPECT_EQ(v1["env"]["GREETING"], "hello from the image");
  EXPECT_EQ(v1["workdir"], "/opt");
  EXPECT_GT(v1["size_bytes"].get<uint64_t>(), 500'000u) << "busybox alone is about 1 MiB";
  EXPECT_FALSE(v1["start_cmd"].is_null()) << "Entrypoint and Cmd give the start_cmd";

  auto id = api.create_running({{"template", "oci-test"}});
  ASSERT_FALSE(id.empty());
  auto sandbox = api.get("/v1/sandboxes/" + id);
  EXPECT_EQ(sandbox.json["template"], "oci-test");
  EXPECT_EQ(sandbox.json["template_version"], 1);
  EXPECT_EQ(output_of(api, id, "cat /etc/hello"), "layer one\n");
  EXPECT_EQ(output_of(api, id, "test -e /etc/doomed || echo whiteout"), "whiteout\n");
  EXPECT_EQ(output_of(api, id, "ls /opt/cache"), "new\n") << "the opaque directory";
  EXPECT_EQ(output_of(api, id, "stat -c %a /usr/bin/tool"), "4755\n") << "setuid kept";
  EXPECT_EQ(output_of(api, id, "stat -c %h /data/original; cat /data/hard"), "2\nlinked\n");
  EXPECT_EQ(output_of(api, id, "stat -c %F /bin/sh"), "symbolic link\n");
  EXPECT_EQ(output_of(api, id, "echo $GREETING"), "hello from the image\n");
  EXPECT_EQ(output_of(api, id, "pwd"), "/opt\n") << "the image's WorkingDir";
  EXPECT_EQ(output_of(api, id,
                      "i=0; while [ ! -s /tmp/start-log ] && [ $i -lt 100 ]; do sleep 0.1; "
                      "i=$((i+1)); done; cat /tmp/start-log"),
            "started\n")
    << "the image's Entrypoint and Cmd ran as the start_cmd";

  // A version in use stays; the sandbox gone, it goes.
  auto refused = api.call("DELETE", "/v1/templates/oci-test");
  EXPECT_EQ(refused.status, 409) << refused.body;
  EXPECT_NE(refused.body.find(id), std::string::npos) << "the refusal names the user";
  auto gone = api.call("DELETE", "/v1/sandboxes/" + id);
  ASSERT_EQ(gone.status, 202);
  ASSERT_EQ(api.wait_operation(gone.json["operation_id"])["state"], "succeeded");
  auto deleted = api.call("DELETE", "/v1/templates/oci-test");
  ASSERT_EQ(deleted.status, 202) << deleted.body;
  EXPECT_EQ(api.wait_operation(deleted.json["operation_id"])["state"], "succeeded");
  EXPECT_EQ(api.get("/v1/templates/oci-test").status, 404);
  auto after = api.create({{"template", "oci-test:1"}});
  EXPECT_EQ(after.status, 404) << after.body;
}

TEST_F(api_templates, a_docker_save_archive_gives_the_same_root_and_versions_count_up) {
  auto api = admin();
  auto first = upload(api, "docker-test", "docker", image("docker"));
  ASSERT_EQ(first["state"], "succeeded") << first.dump();
  // The second version replaces the start_cmd: it becomes current; the first
  // stays reachable by number.
  auto second = upload(api, "docker-test", "docker", image("docker"),
                       "&start_cmd=echo%20second%20>%20/tmp/which;%20exec%20sleep%20600");
  ASSERT_EQ(second["state"], "succeeded") << second.dump();
  EXPECT_EQ(second["result"]["version"]["version"], 2);
  auto record = api.get("/v1/templates/docker-test");
  EXPECT_EQ(record.json["version"], 2);
  ASSERT_EQ(record.json["versions"].size(), 2u);

  auto current = api.create_running({{"template", "docker-test"}});
  auto pinned = api.create_running({{"template", "docker-test:1"}});
  ASSERT_FALSE(current.empty());
  ASSERT_FALSE(pinned.empty());
  EXPECT_EQ(api.get("/v1/sandboxes/" + current).json["template_version"], 2);
  EXPECT_EQ(api.get("/v1/sandboxes/" + pinned).json["template_version"], 1);
  EXPECT_EQ(output_of(api, current, "ls /opt/cache; cat /etc/hello"), "new\nlayer one\n");
  EXPECT_EQ(output_of(api, current,
                      "i=0; while [ ! -s /tmp/which ] && [ $i -lt 100 ]; do sleep 0.1; "
                      "i=$((i+1)); done; cat /tmp/which"),
            "second\n");
  // Version 1 is in use, version 2 too: neither goes; an unknown one is 404.
  EXPECT_EQ(api.call("DELETE", "/v1/templates/docker-test?version=1").status, 409);
  EXPECT_EQ(api.call("DELETE", "/v1/templates/docker-test?version=9").status, 404);
  EXPECT_EQ(api.call("DELETE", "/v1/templates/docker-test?version=x").status, 400);
}

TEST_F(api_templates, archives_that_escape_the_root_or_hold_devices_fail_and_write_nothing) {
  auto api = admin();
  auto escaped = upload(api, "escape-test", "tar", image("escape"));
  EXPECT_EQ(escaped["state"], "failed") << escaped.dump();
  EXPECT_EQ(escaped["error"]["code"], "invalid_argument") << escaped.dump();
  EXPECT_NE(escaped["error"]["message"].get<std::string>().find("escaped-from-the-root"),
            std::string::npos)
    << "the refusal names the entry: " << escaped.dump();
  // Nowhere next to the build directory, nor above it.
  const std::string rootfs = server().data_dir() + "/rootfs";
  for (const auto* dir : {"", "/templates", "/spool"}) {
    struct stat st {};
    EXPECT_NE(::stat((rootfs + dir + "/escaped-from-the-root").c_str(), &st), 0) << dir;
  }
  auto record = api.get("/v1/templates/escape-test");
  ASSERT_EQ(record.status, 200);
  EXPECT_EQ(record.json["versions"][0]["state"], "failed");
  EXPECT_TRUE(record.json["version"].is_null()) << "no ready version: nothing is current";
  auto create = api.create({{"template", "escape-test"}});
  EXPECT_EQ(create.status, 409) << create.body;

  auto device = upload(api, "device-test", "tar", image("device"));
  EXPECT_EQ(device["state"], "failed") << device.dump();
  EXPECT_NE(device["error"]["message"].get<std::string>().find("dev/sda"), std::string::npos)
    << device.dump();
  auto garbage = upload(api, "garbage-test", "oci", "this is not a tar archive at all");
  EXPECT_EQ(garbage["state"], "failed") << garbage.dump();
}

TEST_F(api_templates, bad_requests_and_other_tenants_get_clear_errors) {
  auto api = admin();
  auto bad_format = api.call("PUT", "/v1/templates/ok-name/archive?format=zip", "x");
  EXPECT_EQ(bad_format.status, 400) << bad_format.body;
  EXPECT_TRUE(bad_format.is_error_shape());
  auto bad_name = api.call("PUT", "/v1/templates/Bad_Name/archive?format=tar", "x");
  EXPECT_EQ(bad_name.status, 400) << bad_name.body;
  EXPECT_EQ(api.create({{"template", "minimal:0"}}).status, 400);
  EXPECT_EQ(api.create({{"template", "minimal:7"}}).status, 404);

  // The built-in templates are listed like any other.
  auto listed = api.get("/v1/templates");
  ASSERT_EQ(listed.status, 200) << listed.body;
  bool has_minimal = false;
  for (const auto& item : listed.json["items"])
    has_minimal = has_minimal || (item["name"] == "minimal" && item["shared"] == true);
  EXPECT_TRUE(has_minimal) << listed.body;

  auto key = api.post("/v1/api-keys", {{"tenant_id", "tpl-a"}});
  ASSERT_EQ(key.status, 201);
  auto tenant_a = as(key.json["api_key"].get<std::string>());
  key = api.post("/v1/api-keys", {{"tenant_id", "tpl-b"}});
  ASSERT_EQ(key.status, 201);
  auto tenant_b = as(key.json["api_key"].get<std::string>());
  // A tenant adds no version to a shared template.
  auto shared = tenant_a.call("PUT", "/v1/templates/minimal/archive?format=tar", image("escape"));
  EXPECT_EQ(shared.status, 403) << shared.body;
  // A tenant's own template is its own.
  ASSERT_EQ(upload(tenant_a, "a-only", "oci", image("oci"))["state"], "succeeded");
  EXPECT_EQ(tenant_a.get("/v1/templates/a-only").status, 200);
  EXPECT_EQ(tenant_b.get("/v1/templates/a-only").status, 404);
  EXPECT_EQ(tenant_b.create({{"template", "a-only:1"}}).status, 404);
  EXPECT_EQ(tenant_b.call("DELETE", "/v1/templates/a-only").status, 404);
  auto theirs = tenant_b.call("PUT", "/v1/templates/a-only/archive?format=oci", image("oci"));
  EXPECT_EQ(theirs.status, 404) << theirs.body;
  EXPECT_EQ(tenant_a.call("DELETE", "/v1/templates/minimal").status, 403);
}

TEST_F(api_templates, a_recipe_runs_its_steps_and_ready_cmd_in_a_build_sandbox) {
  auto api = admin();
  auto posted = api.post(
    "/v1/templates",
    {{"name", "recipe-test"},
     {"from", {{"template", "minimal"}}},
     {"run", {"echo built > /etc/built-by-recipe", "mkdir -p /opt/app && echo v1 > /opt/app/v"}},
     {"env", {{"APP_MODE", "recipe"}}},
     {"workdir", "/opt/app"},
     // start_cmd is started before ready_cmd, which can wait for it.
     {"ready_cmd", "test -e /etc/built-by-recipe && test -s /tmp/start-log"},
     {"start_cmd", "echo started in $(hostname) > /tmp/start-log; exec sleep 600"}});
  ASSERT_EQ(posted.status, 202) << posted.body;
  EXPECT_EQ(posted.json["template"], "recipe-test");
  auto done = api.wait_operation(posted.json["operation_id"]);
  ASSERT_EQ(done["state"], "succeeded") << done.dump();
  auto record = api.get("/v1/templates/recipe-test");
  ASSERT_EQ(record.status, 200) << record.body;
  const auto& v1 = record.json["versions"][0];
  EXPECT_EQ(v1["state"], "ready");
  EXPECT_EQ(v1["env"]["APP_MODE"], "recipe");
  EXPECT_EQ(v1["workdir"], "/opt/app");
  EXPECT_NE(v1["build_log_tail"].get<std::string>().find("$ echo built"), std::string::npos)
    << v1.dump();
  EXPECT_NE(v1["build_log_tail"].get<std::string>().find("$ start_cmd: echo started"),
            std::string::npos)
    << v1.dump();

  auto id = api.create_running({{"template", "recipe-test"}});
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(output_of(api, id, "cat /etc/built-by-recipe"), "built\n");
  EXPECT_EQ(output_of(api, id, "pwd; cat v; echo $APP_MODE"), "/opt/app\nv1\nrecipe\n");
  // The sandbox's own start_cmd ran (the hostname is the sandbox's id).
  EXPECT_EQ(output_of(api, id,
                      "i=0; until grep -q " + id
                        + " /tmp/start-log || [ $i -ge 100 ]; do sleep 0.1; "
                          "i=$((i+1)); done; cat /tmp/start-log"),
            "started in " + id + "\n");

  // A version derived from it keeps what it had and adds its own.
  auto derived = api.post("/v1/templates", {{"name", "recipe-child"},
                                            {"from", {{"template", "recipe-test:1"}}},
                                            {"run", {"echo two >> /opt/app/v"}}});
  ASSERT_EQ(derived.status, 202) << derived.body;
  ASSERT_EQ(api.wait_operation(derived.json["operation_id"])["state"], "succeeded");
  auto child = api.create_running({{"template", "recipe-child"}});
  ASSERT_FALSE(child.empty());
  EXPECT_EQ(output_of(api, child, "cat /opt/app/v; echo $APP_MODE"), "v1\ntwo\nrecipe\n")
    << "the base's files, env and workdir carry over";
}

TEST_F(api_templates, a_failing_run_step_fails_the_build_and_names_the_step) {
  auto api = admin();
  auto posted = api.post("/v1/templates", {{"name", "recipe-broken"},
                                           {"from", {{"template", "minimal"}}},
                                           {"run", {"true", "echo oops >&2; exit 3"}}});
  ASSERT_EQ(posted.status, 202) << posted.body;
  auto done = api.wait_operation(posted.json["operation_id"]);
  ASSERT_EQ(done["state"], "failed") << done.dump();
  const auto message = done["error"]["message"].get<std::string>();
  EXPECT_NE(message.find("run step 2"), std::string::npos) << message;
  EXPECT_NE(message.find("exited with code 3"), std::string::npos) << message;
  EXPECT_NE(message.find("oops"), std::string::npos) << "the log's tail: " << message;
  auto record = api.get("/v1/templates/recipe-broken");
  ASSERT_EQ(record.status, 200);
  EXPECT_EQ(record.json["versions"][0]["state"], "failed");
  EXPECT_EQ(api.create({{"template", "recipe-broken"}}).status, 409) << "no ready version";
  // Nothing of the build is left on the worker: its sandbox's root went.
  const std::string sandboxes = server().data_dir() + "/rootfs/sandboxes";
  ASSERT_TRUE(std::filesystem::is_directory(sandboxes)) << sandboxes;
  for (const auto& entry : std::filesystem::directory_iterator(sandboxes))
    EXPECT_NE(entry.path().filename().string().rfind("tplb-", 0), 0u) << entry.path();
}

TEST_F(api_templates, a_build_reports_progress_in_order_and_keeps_a_log_that_can_be_read) {
  auto api = admin();
  // Steps that take a few seconds each, so that the worker is asked how far
  // the build got (once a second) while each runs.
  auto posted =
    api.post("/v1/templates",
             {{"name", "recipe-progress"},
              {"from", {{"template", "minimal"}}},
              {"run", {"echo step-one; sleep 3", "echo step-two; sleep 3", "echo step-three"}}});
  ASSERT_EQ(posted.status, 202) << posted.body;
  const std::string op = posted.json["operation_id"];
  auto stream = api.open_stream("/v1/operations/" + op + "/events");
  ASSERT_TRUE(stream);
  ASSERT_EQ(stream->second.status, 200);
  std::vector<std::string> steps;
  int last_percent = -1;
  json last_state;
  while (auto event = stream->first.next_event(operation_wait_max)) {
    auto data = json::parse(event->data, nullptr, false);
    ASSERT_TRUE(data.is_object()) << event->data;
    if (event->event == "state") {
      last_state = data;
      continue;
    }
    ASSERT_EQ(event->event, "progress");
    EXPECT_EQ(data["state"], "running");
    const auto& progress = data["progress"];
    ASSERT_TRUE(progress.is_object()) << event->data;
    const int percent = progress["percent"].is_number() ? progress["percent"].get<int>() : -1;
    EXPECT_GE(percent, last_percent) << "progress went back: " << event->data;
    last_percent = percent;
    const std::string step = progress["step"];
    if (steps.empty() || steps.back() != step)
      steps.push_back(step);
  }
  ASSERT_EQ(last_state["state"], "succeeded") << last_state.dump();
  EXPECT_EQ(last_state["result"]["progress"]["percent"], 100);
  // Each step is reported in the order it ran, never one after a later one.
  std::vector<std::string> runs;
  for (const auto& step : steps)
    if (step.rfind("run ", 0) == 0)
      runs.push_back(step);
  EXPECT_GE(runs.size(), 2u) << "two three-second steps, polled every second";
  EXPECT_TRUE(std::is_sorted(runs.begin(), runs.end())) << ::testing::PrintToString(steps);
  for (const auto& step : runs)
    EXPECT_TRUE(step == "run 1/3" || step == "run 2/3" || step == "run 3/3") << step;

  // The log: each command and its output, in order; readable from an offset.
  const std::string log_path = last_state["result"]["log"];
  EXPECT_EQ(log_path, "/v1/templates/recipe-progress/versions/1/log");
  auto log = api.get(log_path);
  ASSERT_EQ(log.status, 200) << log.body;
  EXPECT_EQ(log.headers["content-type"], "text/plain; charset=utf-8");
  EXPECT_EQ(log.headers["x-airlock-log-complete"], "true");
  const auto one = log.body.find("$ echo step-one");
  const auto one_out = log.body.find("step-one\n", one + 2);
  const auto two = log.body.find("$ echo step-two");
  const auto three_out = log.body.find("\nstep-three\n");
  ASSERT_NE(one, std::string::npos) << log.body;
  ASSERT_NE(one_out, std::string::npos) << log.body;
  ASSERT_NE(two, std::string::npos) << log.body;
  ASSERT_NE(three_out, std::string::npos) << log.body;
  EXPECT_LT(one, one_out);
  EXPECT_LT(one_out, two);
  EXPECT_LT(two, three_out);
  EXPECT_EQ(log.headers["x-airlock-log-next-offset"], std::to_string(log.body.size()));
  auto rest = api.get(log_path + "?offset=" + std::to_string(two));
  ASSERT_EQ(rest.status, 200);
  EXPECT_EQ(rest.body, log.body.substr(two));
  EXPECT_EQ(api.get("/v1/templates/recipe-progress/versions/x/log").status, 400);
  EXPECT_EQ(api.get("/v1/templates/recipe-progress/versions/9/log").status, 404);
  EXPECT_EQ(api.get(log_path + "?offset=-1").status, 400);
}

TEST_F(api_templates, a_build_cancelled_while_a_step_runs_ends_cancelled_and_leaves_nothing) {
  auto api = admin();
  auto posted = api.post("/v1/templates", {{"name", "recipe-cancel"},
                                           {"from", {{"template", "minimal"}}},
                                           {"run", {"echo started; sleep 600"}}});
  ASSERT_EQ(posted.status, 202) << posted.body;
  const std::string op = posted.json["operation_id"];
  auto stream = api.open_stream("/v1/operations/" + op + "/events");
  ASSERT_TRUE(stream);
  // Cancel once the step is under way (its progress says so).
  bool cancelled = false;
  json last_state;
  while (auto event = stream->first.next_event(operation_wait_max)) {
    auto data = json::parse(event->data, nullptr, false);
    if (event->event == "state")
      last_state = data;
    if (!cancelled && event->event == "progress" && data["progress"]["step"] == "run 1/1") {
      auto cancel = api.call("POST", "/v1/operations/" + op + "/cancel");
      EXPECT_EQ(cancel.status, 202) << cancel.body;
      cancelled = true;
    }
  }
  ASSERT_TRUE(cancelled) << "the step's progress never arrived";
  EXPECT_EQ(last_state["state"], "cancelled") << last_state.dump();
  EXPECT_EQ(last_state["error"]["code"], "cancelled");
  auto record = api.get("/v1/templates/recipe-cancel");
  ASSERT_EQ(record.status, 200);
  EXPECT_EQ(record.json["versions"][0]["state"], "failed");
  auto log = api.get("/v1/templates/recipe-cancel/versions/1/log");
  ASSERT_EQ(log.status, 200);
  EXPECT_NE(log.body.find("started"), std::string::npos) << log.body;
  EXPECT_NE(log.body.find("cancelled on request"), std::string::npos) << log.body;
  const std::string sandboxes = server().data_dir() + "/rootfs/sandboxes";
  for (const auto& entry : std::filesystem::directory_iterator(sandboxes))
    EXPECT_NE(entry.path().filename().string().rfind("tplb-", 0), 0u) << entry.path();
}

TEST_F(api_templates, every_sandbox_runs_the_hosts_agent_which_it_cannot_change) {
  auto api = admin();
  auto id = api.create_running({{"template", "minimal"}});
  ASSERT_FALSE(id.empty());
  // No copy in the root: the init is the host's file, executed from a
  // descriptor, shared by every sandbox.
  EXPECT_EQ(output_of(api, id, "test -e /sbin/airlock-guest && echo copy || echo none"), "none\n");
  EXPECT_EQ(output_of(api, id, "tr '\\0' ' ' < /proc/1/cmdline"), "/sbin/airlock-guest --fd 3 ");
  // Root in the sandbox is not root on the host: the file cannot be written.
  EXPECT_EQ(output_of(api, id, "(echo x >> /proc/1/exe) 2>/dev/null && echo wrote || echo refused"),
            "refused\n");
  EXPECT_EQ(output_of(api, id,
                      "(cat /proc/1/exe > /tmp/agent && chmod 755 /tmp/agent) 2>&1; "
                      "test -s /tmp/agent && echo readable"),
            "readable\n")
    << "reading it is harmless: it is the published agent";
}

TEST_F(api_templates, bad_recipes_are_refused_with_what_to_fix) {
  auto api = admin();
  auto expect_400 = [&api](const json& body, const std::string& mentions) {
    auto answer = api.post("/v1/templates", body);
    EXPECT_EQ(answer.status, 400) << body.dump() << " -> " << answer.body;
    EXPECT_NE(answer.body.find(mentions), std::string::npos) << answer.body;
  };
  expect_400({{"from", {{"template", "minimal"}}}}, "name");
  expect_400({{"name", "Bad_Name"}, {"from", {{"template", "minimal"}}}}, "name");
  expect_400({{"name", "r"}}, "from");
  expect_400({{"name", "r"}, {"from", {{"template", "minimal"}, {"debootstrap", json::object()}}}},
             "from");
  expect_400({{"name", "r"}, {"from", {{"debootstrap", {{"packages", {"ok", "no way"}}}}}}},
             "package");
  expect_400({{"name", "r"}, {"from", {{"template", "minimal"}}}, {"run", "echo one"}}, "run");
  expect_400({{"name", "r"}, {"from", {{"template", "minimal"}}}, {"run", {""}}}, "run");
  expect_400({{"name", "r"}, {"from", {{"template", "minimal"}}}, {"egress", {{"profile", "x"}}}},
             "egress");
  expect_400(
    {{"name", "r"}, {"from", {{"template", "minimal"}}}, {"ready_cmd", std::string(5000, 'x')}},
    "ready_cmd");
  auto unknown = api.post("/v1/templates", {{"name", "r"}, {"from", {{"template", "no-such"}}}});
  EXPECT_EQ(unknown.status, 404) << unknown.body;
}

} // namespace
} // namespace airlock::test
