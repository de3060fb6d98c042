// Snapshots through the API with the real daemon: suspend and restore (files,
// metadata, env, egress policy and id kept; the worker's resources released
// while suspended), wake from paused and from suspended, rollback to a
// checkpoint, fork into several sandboxes and a create from a checkpoint.
// Bad input answers with a clear 4xx and changes nothing.

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <set>
#include <string>

#include "tests/api/api_fixture.hpp"
#include "worker/runtime/net.hpp"

namespace airlock::test {
namespace {

using nlohmann::json;

class api_snapshots : public api_suite {};

bool path_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

/// Whether the worker holds a cgroup or a host-side veth for the sandbox.
bool holds_resources(const std::string& sandbox_id) {
  const std::string instance = serve_process::options{}.instance;
  const std::string prefix = serve_process::options{}.veth_prefix;
  for (const auto& cgroup : {"/sys/fs/cgroup/memory/" + instance + "/" + sandbox_id,
                             "/sys/fs/cgroup/pids/" + instance + "/" + sandbox_id,
                             "/sys/fs/cgroup/" + instance + "/" + sandbox_id})
    if (path_exists(cgroup))
      return true;
  return path_exists("/sys/class/net/" + worker::host_interface_name(prefix, sandbox_id));
}

/// Starts `path` (POST, with `body`) and waits for its operation.
json run_operation(const api_client& api, const std::string& path, const json& body) {
  auto started = api.post(path, body);
  EXPECT_EQ(started.status, 202) << path << ": " << started.body;
  if (started.status != 202)
    return json::object();
  return api.wait_operation(started.json["operation_id"]);
}

std::string output_of(const api_client& api, const std::string& id, const std::string& cmd) {
  return api.run(id, cmd).stdout_bytes;
}

TEST_F(api_snapshots, suspend_then_restore_keeps_files_metadata_env_policy_and_id) {
  auto api = admin();
  auto id =
    api.create_running({{"metadata", {{"owner", "agent-7"}}},
                        {"env", {{"GREETING", "kept"}}},
                        {"egress", {{"profile", "allowlist"}, {"allow", {"example.com"}}}}});
  ASSERT_FALSE(id.empty());
  ASSERT_EQ(output_of(api, id, "echo work > /root/file && cat /root/file"), "work\n");
  ASSERT_TRUE(holds_resources(id)) << "the check must see a running sandbox's cgroup or veth";

  auto suspended = run_operation(api, "/v1/sandboxes/" + id + "/suspend", json::object());
  ASSERT_EQ(suspended["state"], "succeeded") << suspended.dump();
  EXPECT_EQ(suspended["kind"], "sandbox.suspend");
  const auto& result = suspended["result"];
  const std::string snapshot = result.value("snapshot_id", "");
  ASSERT_EQ(snapshot.rfind("ckpt_", 0), 0u) << result.dump();
  EXPECT_EQ(result["memory_persisted"], false) << "a namespace suspend keeps files only";

  auto record = api.get("/v1/sandboxes/" + id);
  EXPECT_EQ(record.json["state"], "suspended");
  EXPECT_EQ(record.json["snapshot_id"], snapshot);
  EXPECT_FALSE(holds_resources(id)) << "a suspended sandbox holds no cgroup and no veth";
  // A suspend snapshot is not one of the sandbox's checkpoints.
  EXPECT_TRUE(api.get("/v1/sandboxes/" + id + "/checkpoints").json["items"].empty());

  // Nothing changes on bad requests.
  auto again = api.post("/v1/sandboxes/" + id + "/suspend", json::object());
  EXPECT_EQ(again.status, 409) << again.body;
  EXPECT_EQ(again.error_code(), "wrong_state");
  auto exec = api.post("/v1/sandboxes/" + id + "/processes", {{"cmd", "true"}});
  EXPECT_EQ(exec.status, 409) << exec.body;
  EXPECT_NE(exec.body.find("wake"), std::string::npos) << "the error says what to do next";
  auto pause = api.post("/v1/sandboxes/" + id + "/pause", json::object());
  EXPECT_EQ(pause.status, 409) << pause.body;
  EXPECT_EQ(api.get("/v1/sandboxes/" + id).json["state"], "suspended");

  auto restored = run_operation(api, "/v1/sandboxes/" + id + "/restore", json::object());
  ASSERT_EQ(restored["state"], "succeeded") << restored.dump();
  EXPECT_EQ(restored["result"]["restored_from"], snapshot) << "a restore says where it came from";
  EXPECT_EQ(restored["result"]["sandbox_id"], id);
  record = api.get("/v1/sandboxes/" + id);
  EXPECT_EQ(record.json["state"], "running");
  EXPECT_TRUE(record.json["snapshot_id"].is_null()) << record.body;
  EXPECT_EQ(record.json["metadata"]["owner"], "agent-7");
  EXPECT_EQ(record.json["egress"]["profile"], "allowlist");
  EXPECT_EQ(record.json["egress"]["allow"], json({"example.com"}));
  EXPECT_EQ(output_of(api, id, "cat /root/file"), "work\n");
  EXPECT_EQ(output_of(api, id, "echo $GREETING"), "kept\n");
  // The guest's clock is the host's.
  auto guest_now = output_of(api, id, "date +%s");
  auto host_now = std::chrono::duration_cast<std::chrono::seconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count();
  ASSERT_FALSE(guest_now.empty());
  EXPECT_LE(std::abs(std::stoll(guest_now) - host_now), 5);
  // The suspend snapshot is gone once the sandbox runs again.
  EXPECT_EQ(api.get("/v1/checkpoints/" + snapshot).status, 404);

  auto twice = api.post("/v1/sandboxes/" + id + "/restore", json::object());
  EXPECT_EQ(twice.status, 409) << "restore of a running sandbox needs a checkpoint";
  EXPECT_TRUE(twice.is_error_shape());
}

TEST_F(api_snapshots, wake_resumes_a_paused_sandbox_and_restores_a_suspended_one) {
  auto api = admin();
  auto id = api.create_running();
  ASSERT_FALSE(id.empty());
  ASSERT_EQ(output_of(api, id, "echo awake > /root/mark && echo ok"), "ok\n");

  auto already = run_operation(api, "/v1/sandboxes/" + id + "/wake", json::object());
  EXPECT_EQ(already["state"], "succeeded") << "waking a running sandbox does nothing";
  EXPECT_EQ(already["kind"], "sandbox.wake");

  ASSERT_EQ(run_operation(api, "/v1/sandboxes/" + id + "/pause", json::object())["state"],
            "succeeded");
  auto from_paused = run_operation(api, "/v1/sandboxes/" + id + "/wake", json::object());
  EXPECT_EQ(from_paused["state"], "succeeded") << from_paused.dump();
  EXPECT_EQ(api.get("/v1/sandboxes/" + id).json["state"], "running");

  ASSERT_EQ(run_operation(api, "/v1/sandboxes/" + id + "/suspend", json::object())["state"],
            "succeeded");
  auto from_suspended = run_operation(api, "/v1/sandboxes/" + id + "/wake", json::object());
  EXPECT_EQ(from_suspended["state"], "succeeded") << from_suspended.dump();
  EXPECT_EQ(api.get("/v1/sandboxes/" + id).json["state"], "running");
  EXPECT_EQ(output_of(api, id, "cat /root/mark"), "awake\n");
}

TEST_F(api_snapshots, restore_with_a_checkpoint_rolls_the_sandbox_back) {
  auto api = admin();
  auto id = api.create_running();
  auto other = api.create_running();
  ASSERT_FALSE(id.empty());
  ASSERT_FALSE(other.empty());
  ASSERT_EQ(output_of(api, id,
                      "echo v1 > /root/state && head -c 2097152 /dev/urandom > /root/blob && "
                      "echo ok"),
            "ok\n");
  auto taken = run_operation(api, "/v1/sandboxes/" + id + "/checkpoints", {{"label", "v1"}});
  ASSERT_EQ(taken["state"], "succeeded") << taken.dump();
  const std::string checkpoint = taken["result"]["checkpoint_id"];
  // Its size is what the sandbox wrote beyond its template: the 2 MiB blob
  // and a little more, not the template's hundreds of MiB.
  auto listed = api.get("/v1/sandboxes/" + id + "/checkpoints");
  ASSERT_EQ(listed.status, 200) << listed.body;
  ASSERT_EQ(listed.json["items"].size(), 1u) << listed.body;
  const uint64_t size = listed.json["items"][0]["size_bytes"];
  EXPECT_GE(size, uint64_t{2} << 20) << listed.body;
  EXPECT_LT(size, uint64_t{64} << 20) << listed.body;
  auto other_taken = run_operation(api, "/v1/sandboxes/" + other + "/checkpoints", json::object());
  ASSERT_EQ(other_taken["state"], "succeeded");
  const std::string others_checkpoint = other_taken["result"]["checkpoint_id"];

  ASSERT_EQ(output_of(api, id, "echo v2 > /root/state && touch /root/later && echo ok"), "ok\n");
  // Bad input first: nothing changes.
  auto foreign =
    api.post("/v1/sandboxes/" + id + "/restore", {{"checkpoint_id", others_checkpoint}});
  EXPECT_EQ(foreign.status, 400) << foreign.body;
  EXPECT_TRUE(foreign.is_error_shape());
  auto missing = api.post("/v1/sandboxes/" + id + "/restore", {{"checkpoint_id", "ckpt_none"}});
  EXPECT_EQ(missing.status, 404) << missing.body;
  auto not_text = api.post("/v1/sandboxes/" + id + "/restore", {{"checkpoint_id", 5}});
  EXPECT_EQ(not_text.status, 400) << not_text.body;
  EXPECT_EQ(output_of(api, id, "cat /root/state"), "v2\n");

  auto rolled =
    run_operation(api, "/v1/sandboxes/" + id + "/restore", {{"checkpoint_id", checkpoint}});
  ASSERT_EQ(rolled["state"], "succeeded") << rolled.dump();
  EXPECT_EQ(rolled["result"]["restored_from"], checkpoint);
  EXPECT_EQ(api.get("/v1/sandboxes/" + id).json["state"], "running");
  EXPECT_EQ(output_of(api, id, "cat /root/state; test -e /root/later && echo later"), "v1\n");
  // The checkpoint stays, and works again from suspended.
  ASSERT_EQ(run_operation(api, "/v1/sandboxes/" + id + "/suspend", json::object())["state"],
            "succeeded");
  auto from_suspended =
    run_operation(api, "/v1/sandboxes/" + id + "/restore", {{"checkpoint_id", checkpoint}});
  ASSERT_EQ(from_suspended["state"], "succeeded") << from_suspended.dump();
  EXPECT_EQ(output_of(api, id, "cat /root/state"), "v1\n");
  EXPECT_TRUE(api.get("/v1/sandboxes/" + id).json["snapshot_id"].is_null());

  // A deleted checkpoint cannot be restored.
  auto deleted = api.call("DELETE", "/v1/checkpoints/" + checkpoint);
  ASSERT_EQ(deleted.status, 202);
  ASSERT_EQ(api.wait_operation(deleted.json["operation_id"])["state"], "succeeded");
  auto gone = api.post("/v1/sandboxes/" + id + "/restore", {{"checkpoint_id", checkpoint}});
  EXPECT_EQ(gone.status, 404) << gone.body;
}

TEST_F(api_snapshots, fork_makes_independent_sandboxes_from_one_checkpoint) {
  auto api = admin();
  auto id = api.create_running({{"metadata", {{"role", "source"}}}});
  ASSERT_FALSE(id.empty());
  ASSERT_EQ(output_of(api, id, "echo shared > /root/base && echo ok"), "ok\n");

  for (int bad : {0, 65}) {
    auto refused = api.post("/v1/sandboxes/" + id + "/fork", {{"count", bad}});
    EXPECT_EQ(refused.status, 400) << bad << ": " << refused.body;
    EXPECT_TRUE(refused.is_error_shape());
  }
  EXPECT_EQ(api.post("/v1/sandboxes/" + id + "/fork", {{"count", "3"}}).status, 400);
  EXPECT_EQ(api.post("/v1/sandboxes/sb_none/fork", {{"count", 1}}).status, 404);

  constexpr size_t forks = 10;
  auto forked = run_operation(api, "/v1/sandboxes/" + id + "/fork",
                              {{"count", forks}, {"metadata", {{"role", "fork"}}}});
  ASSERT_EQ(forked["state"], "succeeded") << forked.dump();
  EXPECT_EQ(forked["kind"], "sandbox.fork");
  const auto& result = forked["result"];
  ASSERT_EQ(result["sandbox_ids"].size(), forks) << result.dump();
  EXPECT_TRUE(result["failed"].empty()) << result.dump();
  const std::string checkpoint = result["checkpoint_id"];
  EXPECT_EQ(api.get("/v1/checkpoints/" + checkpoint).json["complete"], true);

  std::vector<std::string> ids = result["sandbox_ids"];
  EXPECT_EQ(std::set<std::string>(ids.begin(), ids.end()).size(), forks);
  for (size_t i = 0; i < ids.size(); ++i) {
    auto record = api.get("/v1/sandboxes/" + ids[i]);
    EXPECT_EQ(record.json["state"], "running") << record.body;
    EXPECT_EQ(record.json["from_checkpoint"], checkpoint);
    EXPECT_EQ(record.json["metadata"]["role"], "fork");
    EXPECT_EQ(output_of(api, ids[i],
                        "cat /root/base && echo " + std::to_string(i) + " > /root/mine-"
                          + std::to_string(i)),
              "shared\n");
  }
  // Each sees its own file and none of the others'.
  for (size_t i = 0; i < ids.size(); ++i)
    EXPECT_EQ(output_of(api, ids[i], "ls /root | grep -c mine-"), "1\n") << ids[i];
  EXPECT_EQ(output_of(api, id, "ls /root | grep -c mine- || true"), "0\n");

  // A create from the same checkpoint, with the checkpoint's template.
  auto created = api.create({{"from_checkpoint", checkpoint}});
  ASSERT_EQ(created.status, 202) << created.body;
  ASSERT_EQ(api.wait_operation(created.json["operation_id"])["state"], "succeeded");
  const std::string from_create = created.json["sandbox_id"];
  EXPECT_EQ(api.get("/v1/sandboxes/" + from_create).json["template"], "minimal");
  EXPECT_EQ(output_of(api, from_create, "cat /root/base"), "shared\n");
  auto wrong_template = api.create({{"from_checkpoint", checkpoint}, {"template", "base"}});
  EXPECT_EQ(wrong_template.status, 400) << wrong_template.body;
  EXPECT_EQ(api.create({{"from_checkpoint", "ckpt_none"}}).status, 404);

  ids.push_back(from_create);
  for (const auto& fork : ids) {
    auto gone = api.call("DELETE", "/v1/sandboxes/" + fork);
    ASSERT_EQ(gone.status, 202);
    EXPECT_EQ(api.wait_operation(gone.json["operation_id"])["state"], "succeeded");
  }
  // A suspended sandbox does not fork.
  ASSERT_EQ(run_operation(api, "/v1/sandboxes/" + id + "/suspend", json::object())["state"],
            "succeeded");
  auto suspended = api.post("/v1/sandboxes/" + id + "/fork", {{"count", 1}});
  EXPECT_EQ(suspended.status, 409) << suspended.body;
  EXPECT_EQ(suspended.error_code(), "wrong_state");
}

TEST_F(api_snapshots, deleting_a_suspended_sandbox_deletes_its_suspend_snapshot) {
  auto api = admin();
  auto id = api.create_running();
  ASSERT_FALSE(id.empty());
  auto suspended = run_operation(api, "/v1/sandboxes/" + id + "/suspend", json::object());
  ASSERT_EQ(suspended["state"], "succeeded") << suspended.dump();
  const std::string snapshot = suspended["result"]["snapshot_id"];
  auto deleted = api.call("DELETE", "/v1/sandboxes/" + id);
  ASSERT_EQ(deleted.status, 202) << deleted.body;
  EXPECT_EQ(api.wait_operation(deleted.json["operation_id"])["state"], "succeeded");
  EXPECT_EQ(api.get("/v1/sandboxes/" + id).json["state"], "destroyed");
  EXPECT_EQ(api.get("/v1/checkpoints/" + snapshot).status, 404);
  EXPECT_FALSE(path_exists(server().data_dir() + "/rootfs/checkpoints/" + snapshot))
    << "the suspend snapshot's subvolume must be gone too";
}

/// Polls GET /v1/sandboxes/{id} (every 100 ms, at most `limit`) until its
/// state is `wanted`; the last state seen.
std::string wait_state(const api_client& api, const std::string& id, const std::string& wanted,
                       std::chrono::seconds limit) {
  std::string state;
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    state = api.get("/v1/sandboxes/" + id).json.value("state", "");
    if (state == wanted)
      return state;
    ::usleep(100'000);
  }
  return state;
}

TEST_F(api_snapshots, idle_sandboxes_are_suspended_busy_ones_are_not_and_lifetimes_end) {
  auto api = admin();
  auto idle = api.create_running({{"idle_timeout_s", 2}});
  auto busy = api.create_running({{"idle_timeout_s", 2}});
  auto short_lived = api.create_running({{"max_lifetime_s", 3}, {"on_idle", "delete"}});
  ASSERT_FALSE(idle.empty());
  ASSERT_FALSE(busy.empty());
  ASSERT_FALSE(short_lived.empty());
  EXPECT_EQ(api.get("/v1/sandboxes/" + short_lived).json["on_idle"], "delete");
  // Output nobody reads is activity.
  auto writer = api.exec(busy, {{"cmd", "while true; do echo tick; sleep 0.3; done"}});
  ASSERT_TRUE(writer);

  EXPECT_EQ(wait_state(api, idle, "suspended", std::chrono::seconds(90)), "suspended");
  auto ops = api.get("/v1/operations?target_id=" + idle);
  bool suspended_by_policy = false;
  for (const auto& op : ops.json["items"])
    suspended_by_policy |= op["kind"] == "sandbox.suspend" && op["state"] == "succeeded";
  EXPECT_TRUE(suspended_by_policy) << "the idle suspend is an operation: " << ops.body;
  EXPECT_EQ(api.get("/v1/sandboxes/" + busy).json["state"], "running")
    << "a sandbox writing output is not idle";
  EXPECT_EQ(wait_state(api, short_lived, "destroyed", std::chrono::seconds(90)), "destroyed");
  auto bad = api.create({{"template", "minimal"}, {"on_idle", "sleep"}});
  EXPECT_EQ(bad.status, 400) << bad.body;
}

TEST_F(api_snapshots, file_operations_and_an_open_attach_stream_count_as_activity) {
  auto api = admin();
  auto files = api.create_running({{"idle_timeout_s", 3}});
  auto attached = api.create_running({{"idle_timeout_s", 3}});
  auto quiet = api.create_running({{"idle_timeout_s", 3}});
  ASSERT_FALSE(files.empty());
  ASSERT_FALSE(attached.empty());
  ASSERT_FALSE(quiet.empty());
  // A silent process whose output stream stays open.
  auto silent = api.exec(attached, {{"cmd", "sleep 120"}});
  ASSERT_TRUE(silent);
  auto stream = api.open_stream(silent->attach_path + "/output",
                                {{"Authorization", "Bearer " + silent->attach_token}});
  ASSERT_TRUE(stream);
  ASSERT_EQ(stream->second.status, 200);
  // Files written now and then while the quiet one idles into a suspend.
  int writes = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(90);
  while (std::chrono::steady_clock::now() < deadline
         && api.get("/v1/sandboxes/" + quiet).json.value("state", "") != "suspended") {
    auto put =
      api.call("PUT", "/v1/sandboxes/" + files + "/files?path=/root/n", std::to_string(++writes));
    EXPECT_LT(put.status, 300) << put.body;
    ::usleep(500'000);
  }
  ASSERT_EQ(api.get("/v1/sandboxes/" + quiet).json["state"], "suspended")
    << "the control sandbox never idled out";
  EXPECT_EQ(api.get("/v1/sandboxes/" + files).json["state"], "running")
    << "file writes are activity";
  EXPECT_EQ(api.get("/v1/sandboxes/" + attached).json["state"], "running")
    << "an open attach stream is activity";
}

TEST_F(api_snapshots, patch_changes_the_lifecycle_policy) {
  auto api = admin();
  auto id = api.create_running();
  ASSERT_FALSE(id.empty());
  auto patched = api.call("PATCH", "/v1/sandboxes/" + id,
                          json{{"on_idle", "delete"}, {"max_lifetime_s", 3}}.dump());
  ASSERT_EQ(patched.status, 200) << patched.body;
  EXPECT_EQ(patched.json["on_idle"], "delete");
  EXPECT_EQ(patched.json["max_lifetime_s"], 3);
  auto bad = api.call("PATCH", "/v1/sandboxes/" + id, json{{"checkpoints_max", 0}}.dump());
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_EQ(wait_state(api, id, "destroyed", std::chrono::seconds(60)), "destroyed")
    << "the patched lifetime ends it";
}

/// Its own server: these tests stop and restart it.
struct restart_suite_config : api_suite_config {};
class api_restart : public serve_suite<restart_suite_config> {
public:
  static api_client admin_client() { return admin(); }
  static bool restart_after_kill(std::string& error) {
    return restart_server(serve_process::stop_kind::sigkill, error);
  }
};

/// Polls GET /v1/sandboxes/{id} (every 100 ms, at most `limit`) until the
/// sandbox is running again and served at the new address; its record.
json wait_running_at(const api_client& api, const std::string& id, const std::string& data_url,
                     std::chrono::seconds limit) {
  json record;
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    record = api.get("/v1/sandboxes/" + id).json;
    if (record.is_object() && record.value("state", "") == "running"
        && record.value("data_url", json()).is_string() && record["data_url"] == data_url)
      return record;
    ::usleep(100'000);
  }
  return record;
}

TEST_F(api_restart, a_stop_and_a_crash_lose_no_sandbox_and_keep_their_files) {
  auto api = admin();
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) {
    ids.push_back(api.create_running({{"env", {{"WHO", "sandbox-" + std::to_string(i)}}}}));
    ASSERT_FALSE(ids.back().empty());
    ASSERT_EQ(
      output_of(api, ids.back(), "echo file-" + std::to_string(i) + " > /root/kept && echo ok"),
      "ok\n");
  }
  // One paused and one suspended: both come back as they can.
  ASSERT_EQ(run_operation(api, "/v1/sandboxes/" + ids[1] + "/pause", json::object())["state"],
            "succeeded");
  ASSERT_EQ(run_operation(api, "/v1/sandboxes/" + ids[2] + "/suspend", json::object())["state"],
            "succeeded");

  for (auto how : {serve_process::stop_kind::sigterm, serve_process::stop_kind::sigkill}) {
    const char* what = how == serve_process::stop_kind::sigterm ? "SIGTERM" : "kill -9";
    std::string error;
    ASSERT_TRUE(restart_server(how, error)) << what << ": " << error;
    auto again = admin();
    for (int i = 0; i < 2; ++i) {
      auto record = wait_running_at(again, ids[i], server().url(), std::chrono::seconds(60));
      ASSERT_EQ(record.value("state", ""), "running") << what << ": " << record.dump();
      EXPECT_EQ(output_of(again, ids[i], "cat /root/kept"), "file-" + std::to_string(i) + "\n")
        << what;
      EXPECT_EQ(output_of(again, ids[i], "echo $WHO"), "sandbox-" + std::to_string(i) + "\n")
        << what;
    }
    EXPECT_EQ(again.get("/v1/sandboxes/" + ids[2]).json["state"], "suspended") << what;
  }
  auto api_now = admin();
  auto woken = run_operation(api_now, "/v1/sandboxes/" + ids[2] + "/wake", json::object());
  ASSERT_EQ(woken["state"], "succeeded") << woken.dump();
  EXPECT_EQ(output_of(api_now, ids[2], "cat /root/kept"), "file-2\n");
  for (const auto& id : ids) {
    auto gone = api_now.call("DELETE", "/v1/sandboxes/" + id);
    ASSERT_EQ(gone.status, 202);
    EXPECT_EQ(api_now.wait_operation(gone.json["operation_id"])["state"], "succeeded");
    EXPECT_FALSE(holds_resources(id));
  }
}

/// Starts `path` (POST `body`) and kills the server at once (kill -9), then
/// starts it again; the operation's id ("" if the POST was refused).
std::string kill_during(const std::string& path, const json& body) {
  auto started = api_restart::admin_client().post(path, body);
  EXPECT_EQ(started.status, 202) << path << ": " << started.body;
  std::string error;
  EXPECT_TRUE(api_restart::restart_after_kill(error)) << error;
  return started.json.is_object() ? started.json.value("operation_id", "") : "";
}

TEST_F(api_restart,
       a_kill_during_checkpoint_suspend_restore_or_fork_leaves_a_state_before_or_after) {
  auto api = admin();
  auto id = api.create_running();
  ASSERT_FALSE(id.empty());
  ASSERT_EQ(output_of(api, id, "echo before > /root/state && echo ok"), "ok\n");

  // Checkpoint: the sandbox runs again either way; the checkpoint is whole or gone.
  auto op_id = kill_during("/v1/sandboxes/" + id + "/checkpoints", json::object());
  api = admin();
  auto op = api.wait_operation(op_id);
  ASSERT_TRUE(op["state"] == "succeeded" || op["state"] == "failed") << op.dump();
  ASSERT_EQ(wait_running_at(api, id, server().url(), std::chrono::seconds(60)).value("state", ""),
            "running");
  auto taken = api.get("/v1/sandboxes/" + id + "/checkpoints"); // outlives the loop
  for (const auto& item : taken.json["items"])
    EXPECT_EQ(item["complete"], true) << "no incomplete checkpoint outlives its operation";

  // Suspend: suspended with its snapshot, or running as before.
  op_id = kill_during("/v1/sandboxes/" + id + "/suspend", json::object());
  api = admin();
  op = api.wait_operation(op_id);
  ASSERT_TRUE(op["state"] == "succeeded" || op["state"] == "failed") << op.dump();
  auto state = api.get("/v1/sandboxes/" + id).json.value("state", "");
  if (op["state"] == "succeeded")
    EXPECT_EQ(state, "suspended") << op.dump();
  else
    EXPECT_EQ(wait_running_at(api, id, server().url(), std::chrono::seconds(60))["state"],
              "running")
      << op.dump();
  if (api.get("/v1/sandboxes/" + id).json.value("state", "") != "suspended") {
    ASSERT_EQ(run_operation(api, "/v1/sandboxes/" + id + "/suspend", json::object())["state"],
              "succeeded");
  }

  // Restore: running with its files, or still suspended.
  op_id = kill_during("/v1/sandboxes/" + id + "/restore", json::object());
  api = admin();
  op = api.wait_operation(op_id);
  ASSERT_TRUE(op["state"] == "succeeded" || op["state"] == "failed") << op.dump();
  if (op["state"] == "failed") {
    EXPECT_EQ(api.get("/v1/sandboxes/" + id).json["state"], "suspended") << op.dump();
    ASSERT_EQ(run_operation(api, "/v1/sandboxes/" + id + "/restore", json::object())["state"],
              "succeeded");
  }
  ASSERT_EQ(wait_running_at(api, id, server().url(), std::chrono::seconds(60)).value("state", ""),
            "running");
  EXPECT_EQ(output_of(api, id, "cat /root/state"), "before\n");

  // Fork: each fork runs, or ended destroyed with its reason.
  op_id = kill_during("/v1/sandboxes/" + id + "/fork", {{"count", 3}});
  api = admin();
  op = api.wait_operation(op_id);
  ASSERT_TRUE(op["state"] == "succeeded" || op["state"] == "failed") << op.dump();
  std::vector<std::string> forks;
  if (op["state"] == "succeeded")
    forks = op["result"]["sandbox_ids"].get<std::vector<std::string>>();
  for (const auto& fork : forks) {
    EXPECT_EQ(wait_running_at(api, fork, server().url(), std::chrono::seconds(60))["state"],
              "running");
    EXPECT_EQ(output_of(api, fork, "cat /root/state"), "before\n");
  }

  // Nothing is left once everything is deleted.
  forks.push_back(id);
  for (const auto& sandbox : forks) {
    auto gone = api.call("DELETE", "/v1/sandboxes/" + sandbox);
    ASSERT_EQ(gone.status, 202);
    EXPECT_EQ(api.wait_operation(gone.json["operation_id"])["state"], "succeeded");
    EXPECT_FALSE(holds_resources(sandbox)) << sandbox;
    EXPECT_FALSE(path_exists(server().data_dir() + "/rootfs/sandboxes/" + sandbox)) << sandbox;
  }
  auto left = api.get("/v1/sandboxes/" + id + "/checkpoints"); // outlives the loop
  ASSERT_FALSE(left.json["items"].empty()) << "the checkpoint and the fork's are listed";
  for (const auto& item : left.json["items"]) {
    auto gone = api.call("DELETE", "/v1/checkpoints/" + item["id"].get<std::string>());
    ASSERT_EQ(gone.status, 202);
    EXPECT_EQ(api.wait_operation(gone.json["operation_id"])["state"], "succeeded");
  }
  std::error_code ignored;
  for (const auto& entry :
       std::filesystem::directory_iterator(server().data_dir() + "/rootfs/checkpoints", ignored))
    ADD_FAILURE() << "a snapshot no record names is left: " << entry.path();
}

} // namespace
} // namespace airlock::test
