// A sandbox created with "runtime": "microvm" through the API runs in a QEMU
// microVM (docs/microvm.md): one `airlockd serve --microvm on` and one VM for
// the whole executable (a boot takes seconds under TCG), shared by the cases
// in order: its kernel is the guest's, files go through the data plane to
// the guest's disk, pause and resume stop and continue it, and delete leaves
// no QEMU process and no file of it. Skipped with the reason where QEMU or
// the guest's build tools are missing; the first run downloads Debian's
// kernel package into the test cache (AIRLOCK_TEST_CACHE, as
// microvm_integration_tests).

#include <sys/utsname.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/api/microvm_fixture.hpp"
#include "tests/support/wait.hpp"

namespace airlock::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

/// Processes whose command line mentions both `a` and `b`.
std::vector<std::string> processes_with(const std::string& a, const std::string& b) {
  std::vector<std::string> found;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    std::string cmdline;
    std::ifstream in(entry.path() / "cmdline");
    char buffer[4096];
    while (in.read(buffer, sizeof buffer) || in.gcount() > 0)
      cmdline.append(buffer, static_cast<size_t>(in.gcount()));
    for (char& c : cmdline)
      if (c == '\0')
        c = ' ';
    if (cmdline.find(a) != std::string::npos && cmdline.find(b) != std::string::npos)
      found.push_back(entry.path().filename().string() + ": " + cmdline);
  }
  return found;
}

/// The worker's airlock_worker_vm_base_boots_total (-1 when absent).
double base_boots(const api_client& api) {
  const std::string name = "\nairlock_worker_vm_base_boots_total ";
  auto text = api.get("/metrics").body;
  auto at = text.find(name);
  return at == std::string::npos ? -1 : std::stod(text.substr(at + name.size()));
}

std::string trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
    text.pop_back();
  return text;
}

class api_microvm : public serve_suite<microvm_suite_config> {
public:
  static void SetUpTestSuite() {
    skip_ = microvm_missing();
    if (!skip_.empty())
      return;
    serve_suite::SetUpTestSuite();
    if (!has_server())
      return;
    // A whole core (and its share) and 256 MiB: the guest kernel boots under
    // emulation, and the VM's QEMU is bounded by the sandbox's CPU.
    auto created = admin().create(small_spec({{"runtime", "microvm"},
                                              {"cpu_millis", 1000},
                                              {"cpu_request_millis", 1000},
                                              {"memory_mb", 256}}));
    if (created.status != 202) {
      failure_ = "create answered " + std::to_string(created.status) + ": " + created.body;
      return;
    }
    auto op = admin().wait_operation(created.json.value("operation_id", ""));
    if (op.value("state", "") != "succeeded") {
      failure_ = "create did not succeed: " + op.dump() + "\n" + server().log();
      return;
    }
    sandbox_ = created.json.value("sandbox_id", "");
  }

  static void TearDownTestSuite() {
    sandbox_.clear();
    serve_suite::TearDownTestSuite();
  }

protected:
  void SetUp() override {
    if (!skip_.empty())
      GTEST_SKIP() << skip_;
    serve_suite::SetUp();
    if (!IsSkipped()) {
      ASSERT_FALSE(sandbox_.empty()) << failure_;
    }
  }

  static std::string files(const std::string& query) {
    return "/v1/sandboxes/" + sandbox_ + "/files" + query;
  }

  static inline std::string skip_;
  static inline std::string failure_;
  static inline std::string sandbox_;
};

TEST_F(api_microvm, the_sandbox_runs_the_guest_kernel_not_the_hosts) {
  auto api = admin();
  auto got = api.get("/v1/sandboxes/" + sandbox_);
  ASSERT_EQ(got.status, 200) << got.body;
  EXPECT_EQ(got.json["runtime"], "microvm") << got.body;
  EXPECT_EQ(got.json["state"], "running") << got.body;
  struct utsname host {};
  ASSERT_EQ(::uname(&host), 0);
  auto release = api.run(sandbox_, "uname -r");
  ASSERT_TRUE(release.exit) << "uname did not end";
  EXPECT_EQ((*release.exit)["exit_code"], 0) << release.stderr_bytes;
  const std::string guest = trimmed(release.stdout_bytes);
  EXPECT_FALSE(guest.empty());
  EXPECT_NE(guest, host.release) << "the sandbox saw the host's kernel";
  // Its QEMU runs on this host, named by the sandbox's id, as the
  // unprivileged VMM uid (nobody by default), in a pid namespace of its own.
  auto qemu = processes_with("qemu-system", sandbox_);
  ASSERT_EQ(qemu.size(), 1u);
  const std::string pid = qemu[0].substr(0, qemu[0].find(':'));
  std::ifstream status("/proc/" + pid + "/status");
  std::string line;
  std::string uid_line;
  std::string nspid_line;
  while (std::getline(status, line)) {
    if (line.rfind("Uid:", 0) == 0)
      uid_line = line;
    if (line.rfind("NSpid:", 0) == 0)
      nspid_line = line;
  }
  EXPECT_EQ(uid_line, "Uid:\t65534\t65534\t65534\t65534");
  EXPECT_EQ(nspid_line, "NSpid:\t" + pid + "\t1");
  auto workers = api.get("/v1/workers");
  ASSERT_EQ(workers.status, 200) << workers.body;
  EXPECT_EQ(workers.json["items"][0]["runtimes"], json::array({"namespace", "microvm"}));
}

TEST_F(api_microvm, files_round_trip_through_the_data_plane_to_the_guest) {
  auto api = admin();
  const std::string content = "written through the API into a microVM\n";
  auto put = api.call("PUT", files("?path=/tmp/vm/hello.txt"), content);
  ASSERT_EQ(put.status, 201) << put.body;
  auto got = api.get(files("?path=/tmp/vm/hello.txt"));
  ASSERT_EQ(got.status, 200) << got.body;
  EXPECT_EQ(got.body, content);
  // A process in the guest sees the same bytes, and what it writes is read back.
  auto seen = api.run(sandbox_, "cat /tmp/vm/hello.txt; echo from-guest > /tmp/vm/back.txt");
  EXPECT_EQ(seen.stdout_bytes, content);
  EXPECT_EQ(api.get(files("?path=/tmp/vm/back.txt")).body, "from-guest\n");
}

TEST_F(api_microvm, pause_and_resume_stop_and_continue_the_vm) {
  auto api = admin();
  auto paused = api.call("POST", "/v1/sandboxes/" + sandbox_ + "/pause");
  ASSERT_EQ(paused.status, 202) << paused.body;
  EXPECT_EQ(api.wait_operation(paused.json["operation_id"])["state"], "succeeded");
  EXPECT_EQ(api.get("/v1/sandboxes/" + sandbox_).json["state"], "paused");
  auto resumed = api.call("POST", "/v1/sandboxes/" + sandbox_ + "/resume");
  ASSERT_EQ(resumed.status, 202) << resumed.body;
  EXPECT_EQ(api.wait_operation(resumed.json["operation_id"])["state"], "succeeded");
  EXPECT_EQ(api.get("/v1/sandboxes/" + sandbox_).json["state"], "running");
  EXPECT_EQ(api.run(sandbox_, "echo alive").stdout_bytes, "alive\n");
}

/// Starts `operation` (POST `path` with an empty object) and waits for it.
json run_operation(const api_client& api, const std::string& path) {
  auto started = api.post(path, json::object());
  EXPECT_EQ(started.status, 202) << path << ": " << started.body;
  if (started.status != 202)
    return json::object();
  return api.wait_operation(started.json["operation_id"]);
}

/// A guest command that waits (at most ~10 s of the guest's time) for
/// /tmp/count to move on, then prints it: proof that the counter runs.
constexpr const char* next_count =
  "a=$(cat /tmp/count); i=0; while [ \"$(cat /tmp/count)\" = \"$a\" ] && [ $i -lt 200 ]; "
  "do sleep 0.05; i=$((i+1)); done; cat /tmp/count";

TEST_F(api_microvm, suspend_keeps_memory_and_a_counting_process_goes_on_in_the_same_pid) {
  auto api = admin();
  // A counter in the background, left running when its shell ends; each
  // value is renamed into place, so a reader never sees the file empty.
  auto started = api.run(sandbox_, "sh -c 'i=0; while true; do i=$((i+1)); echo $i > "
                                   "/tmp/count.new; mv /tmp/count.new /tmp/count; sleep 0.1; "
                                   "done' >/dev/null 2>&1 & echo $!");
  const std::string pid = trimmed(started.stdout_bytes);
  ASSERT_FALSE(pid.empty()) << started.stderr_bytes;
  const long before = std::strtol(api.run(sandbox_, next_count).stdout_bytes.c_str(), nullptr, 10);
  ASSERT_GT(before, 0);

  auto suspended = run_operation(api, "/v1/sandboxes/" + sandbox_ + "/suspend");
  ASSERT_EQ(suspended["state"], "succeeded") << suspended.dump() << server().log();
  EXPECT_EQ(suspended["result"]["memory_persisted"], true) << suspended.dump();
  EXPECT_GT(suspended["result"].value("size_bytes", uint64_t{0}), 0u);
  EXPECT_EQ(api.get("/v1/sandboxes/" + sandbox_).json["state"], "suspended");
  EXPECT_TRUE(processes_with("qemu-system", sandbox_).empty()) << "a suspended VM holds no QEMU";

  auto restored = run_operation(api, "/v1/sandboxes/" + sandbox_ + "/restore");
  ASSERT_EQ(restored["state"], "succeeded") << restored.dump() << server().log();
  EXPECT_EQ(restored["result"]["memory_persisted"], true) << restored.dump();
  EXPECT_EQ(api.get("/v1/sandboxes/" + sandbox_).json["state"], "running");
  // The same process, counting on from where it was (not from 1 again).
  EXPECT_EQ(api.run(sandbox_, "kill -0 " + pid + " && echo alive").stdout_bytes, "alive\n");
  const long after = std::strtol(api.run(sandbox_, next_count).stdout_bytes.c_str(), nullptr, 10);
  EXPECT_GT(after, before);
  // Its network was wired to a new slot and the guest re-addressed by the
  // refresh: a default route via the new gateway is in place.
  auto routes = api.run(sandbox_, "cat /proc/net/route").stdout_bytes;
  EXPECT_NE(routes.find("eth0\t00000000\t"), std::string::npos) << routes;
  EXPECT_EQ(trimmed(api.run(sandbox_, "hostname").stdout_bytes), sandbox_);
}

TEST_F(api_microvm, a_checkpoint_holds_memory_and_a_fork_goes_on_with_the_same_processes) {
  auto api = admin();
  auto files_only =
    api.post("/v1/sandboxes/" + sandbox_ + "/checkpoints", {{"include_memory", false}});
  EXPECT_EQ(files_only.status, 400) << files_only.body;
  EXPECT_NE(files_only.body.find("always holds its memory"), std::string::npos);

  auto pid = trimmed(api
                       .run(sandbox_, "sh -c 'while true; do date +%s%N > /tmp/tick; sleep "
                                      "0.1; done' >/dev/null 2>&1 & echo $!")
                       .stdout_bytes);
  ASSERT_FALSE(pid.empty());
  auto checkpoint = run_operation(api, "/v1/sandboxes/" + sandbox_ + "/checkpoints");
  ASSERT_EQ(checkpoint["state"], "succeeded") << checkpoint.dump() << server().log();
  const std::string checkpoint_id = checkpoint["result"].value("checkpoint_id", "");
  auto listed = api.get("/v1/checkpoints/" + checkpoint_id);
  ASSERT_EQ(listed.status, 200) << listed.body;
  EXPECT_EQ(listed.json["memory_persisted"], true) << listed.body;
  EXPECT_EQ(listed.json["runtime"], "microvm") << listed.body;
  const fs::path machine = server().data_dir() + "/microvm/machines/" + checkpoint_id;
  EXPECT_TRUE(fs::exists(machine / "snapshot.json")) << machine;
  // The source runs on after its checkpoint.
  EXPECT_EQ(api.run(sandbox_, "kill -0 " + pid + " && echo alive").stdout_bytes, "alive\n");

  auto forked = api.post("/v1/sandboxes/" + sandbox_ + "/fork", {{"count", 1}});
  ASSERT_EQ(forked.status, 202) << forked.body;
  auto fork_op = api.wait_operation(forked.json["operation_id"]);
  ASSERT_EQ(fork_op["state"], "succeeded") << fork_op.dump() << server().log();
  ASSERT_EQ(fork_op["result"]["sandbox_ids"].size(), 1u) << fork_op.dump();
  const std::string child = fork_op["result"]["sandbox_ids"][0];
  EXPECT_EQ(api.get("/v1/sandboxes/" + child).json["runtime"], "microvm");
  // The fork has the source's processes (same pid, running), its own
  // hostname, and files that are its own from here on.
  EXPECT_EQ(api.run(child, "kill -0 " + pid + " && echo alive").stdout_bytes, "alive\n");
  EXPECT_EQ(trimmed(api.run(child, "hostname").stdout_bytes), child);
  EXPECT_EQ(api.run(child, "echo fork > /tmp/owner; cat /tmp/owner").stdout_bytes, "fork\n");
  EXPECT_NE(api.run(sandbox_, "cat /tmp/owner 2>/dev/null || echo none").stdout_bytes, "fork\n");
  auto deleted = api.call("DELETE", "/v1/sandboxes/" + child);
  ASSERT_EQ(deleted.status, 202) << deleted.body;
  EXPECT_EQ(api.wait_operation(deleted.json["operation_id"])["state"], "succeeded");

  auto dropped = api.call("DELETE", "/v1/checkpoints/" + checkpoint_id);
  ASSERT_EQ(dropped.status, 202) << dropped.body;
  EXPECT_EQ(api.wait_operation(dropped.json["operation_id"])["state"], "succeeded");
  EXPECT_FALSE(fs::exists(machine)) << "the machine snapshot goes with its checkpoint";
  (void)api.run(sandbox_, "kill " + pid);
}

TEST_F(api_microvm, a_second_vm_of_the_same_shape_is_a_clone_of_the_base_the_first_left) {
  auto api = admin();
  const fs::path machines = server().data_dir() + "/microvm/machines";
  std::vector<std::string> bases;
  for (const auto& entry : fs::directory_iterator(machines))
    if (entry.path().filename().string().rfind("base-", 0) == 0)
      bases.push_back(entry.path().filename().string());
  ASSERT_EQ(bases.size(), 1u) << "the suite's VM left the base of its shape";
  EXPECT_EQ(bases[0], "base-minimal-256m-1c-net");
  auto clone = api.create_running({{"runtime", "microvm"},
                                   {"cpu_millis", 1000},
                                   {"cpu_request_millis", 1000},
                                   {"memory_mb", 256}});
  ASSERT_FALSE(clone.empty());
  // Its QEMU loaded the base's state instead of booting the kernel.
  auto qemu = processes_with("qemu-system", clone);
  ASSERT_EQ(qemu.size(), 1u);
  EXPECT_NE(qemu[0].find("-incoming"), std::string::npos) << qemu[0];
  // Its RAM is the base's file mapped private: pages it has not written are the base's.
  EXPECT_NE(qemu[0].find("mem-path=" + (machines / bases[0] / "memory").string() + ",share=off"),
            std::string::npos)
    << qemu[0];
  // Its own identity and network, not the base's (the suite's VM, whose
  // MAC is QEMU's from its boot).
  EXPECT_EQ(trimmed(api.run(clone, "hostname").stdout_bytes), clone);
  const auto mac_of = [&api](const std::string& id) {
    return trimmed(api.run(id, "cat /sys/class/net/eth0/address").stdout_bytes);
  };
  const std::string clone_mac = mac_of(clone);
  EXPECT_EQ(clone_mac.size(), 17u) << clone_mac;
  EXPECT_EQ(clone_mac.rfind("02:", 0), 0u) << clone_mac;
  EXPECT_NE(clone_mac, mac_of(sandbox_));
  auto routes = api.run(clone, "cat /proc/net/route").stdout_bytes;
  EXPECT_NE(routes.find("eth0\t00000000\t"), std::string::npos) << routes;
  EXPECT_EQ(api.run(clone, "echo fresh > /tmp/mine; cat /tmp/mine").stdout_bytes, "fresh\n");
  // Its checkpoint carries its RAM in the state: it has no RAM file to save.
  auto checkpoint = run_operation(api, "/v1/sandboxes/" + clone + "/checkpoints");
  ASSERT_EQ(checkpoint["state"], "succeeded") << checkpoint.dump();
  const fs::path saved = machines / checkpoint["result"].value("checkpoint_id", "");
  EXPECT_TRUE(fs::exists(saved / "state"));
  EXPECT_FALSE(fs::exists(saved / "memory"));
  EXPECT_EQ(trimmed(api.run(clone, "cat /tmp/mine").stdout_bytes), "fresh") << "it runs on";
  auto deleted = api.call("DELETE", "/v1/sandboxes/" + clone);
  ASSERT_EQ(deleted.status, 202) << deleted.body;
  EXPECT_EQ(api.wait_operation(deleted.json["operation_id"])["state"], "succeeded");
}

TEST_F(api_microvm, delete_leaves_no_qemu_process_and_no_file_of_the_vm) {
  auto api = admin();
  auto deleted = api.call("DELETE", "/v1/sandboxes/" + sandbox_);
  ASSERT_EQ(deleted.status, 202) << deleted.body;
  auto op = api.wait_operation(deleted.json["operation_id"]);
  EXPECT_EQ(op["state"], "succeeded") << op.dump();
  EXPECT_EQ(api.get("/v1/sandboxes/" + sandbox_).json["state"], "destroyed");
  auto left = processes_with("qemu-system", sandbox_);
  EXPECT_TRUE(left.empty()) << left.front();
  const fs::path run_dir = server().data_dir() + "/microvm/run";
  ASSERT_TRUE(fs::is_directory(run_dir));
  for (const auto& entry : fs::directory_iterator(run_dir))
    EXPECT_EQ(entry.path().filename().string().find(sandbox_), std::string::npos)
      << entry.path() << " is left";
}

TEST_F(api_microvm, a_template_can_make_microvm_the_default_that_a_create_may_override) {
  auto api = admin();
  auto bad = api.post(
    "/v1/templates",
    {{"name", "vm-bad"}, {"from", {{"template", "minimal"}}}, {"default_runtime", "firecracker"}});
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_TRUE(bad.is_error_shape());
  auto built = api.post("/v1/templates", {{"name", "vm-default"},
                                          {"from", {{"template", "minimal"}}},
                                          {"run", {"echo from-template > /etc/vm-default"}},
                                          {"default_runtime", "microvm"}});
  ASSERT_EQ(built.status, 202) << built.body;
  ASSERT_EQ(api.wait_operation(built.json["operation_id"])["state"], "succeeded");
  auto listed = api.get("/v1/templates/vm-default");
  ASSERT_EQ(listed.status, 200) << listed.body;
  EXPECT_NE(listed.body.find("\"default_runtime\":\"microvm\""), std::string::npos) << listed.body;

  // No runtime asked: the template's, a VM with the template's files.
  const auto vm =
    api.create_running({{"template", "vm-default"}, {"cpu_millis", 1000}, {"memory_mb", 256}});
  ASSERT_FALSE(vm.empty());
  EXPECT_EQ(api.get("/v1/sandboxes/" + vm).json["runtime"], "microvm");
  EXPECT_FALSE(processes_with("qemu-system", vm).empty());
  EXPECT_EQ(api.run(vm, "cat /etc/vm-default").stdout_bytes, "from-template\n");
  // Asked for: the create's wins.
  const auto plain = api.create_running({{"template", "vm-default"}, {"runtime", "namespace"}});
  ASSERT_FALSE(plain.empty());
  EXPECT_EQ(api.get("/v1/sandboxes/" + plain).json["runtime"], "namespace");
  EXPECT_TRUE(processes_with("qemu-system", plain).empty());
  for (const auto& id : {vm, plain})
    api.wait_operation(api.call("DELETE", "/v1/sandboxes/" + id).json.value("operation_id", ""));
}

TEST_F(api_microvm, a_warm_pool_of_a_vm_template_holds_vms_that_a_create_of_their_shape_claims) {
  auto api = admin();
  // The template of the case above: its default runtime is microvm.
  auto set = api.call("PUT", "/v1/templates/vm-default/pool",
                      json{{"size", 1}, {"cpu_millis", 1000}, {"memory_mb", 256}}.dump());
  ASSERT_EQ(set.status, 200) << set.body;
  auto pool = [&api] { return api.get("/v1/templates/vm-default/pool").json; };
  ASSERT_TRUE(wait_for([&] { return pool().value("ready", uint64_t{0}) == 1; }, wait_max,
                       std::chrono::milliseconds(100)))
    << pool().dump();
  auto listed = api.get("/v1/sandboxes?state=running&metadata.airlock.pool=vm-default");
  ASSERT_EQ(listed.json["items"].size(), 1u) << listed.body;
  const std::string member = listed.json["items"][0]["id"];
  EXPECT_EQ(listed.json["items"][0]["runtime"], "microvm") << listed.body;
  ASSERT_EQ(processes_with("qemu-system", member).size(), 1u) << "a pool member is a VM";

  // Another memory size is another VM: a miss.
  auto other =
    api.create_running({{"template", "vm-default"}, {"cpu_millis", 1000}, {"memory_mb", 320}});
  ASSERT_FALSE(other.empty());
  EXPECT_NE(other, member);
  // Its shape: the member is claimed, less CPU time set in place.
  auto created = api.create(small_spec({{"template", "vm-default"},
                                        {"cpu_millis", 500},
                                        {"memory_mb", 256},
                                        {"metadata", {{"team", "vm"}}}}));
  ASSERT_EQ(created.status, 202) << created.body;
  EXPECT_EQ(created.json["sandbox_id"], member) << "the warm VM was not claimed";
  ASSERT_EQ(api.wait_operation(created.json["operation_id"])["state"], "succeeded");
  auto claimed = api.get("/v1/sandboxes/" + member);
  EXPECT_EQ(claimed.json["runtime"], "microvm") << claimed.body;
  EXPECT_EQ(claimed.json["metadata"]["team"], "vm") << claimed.body;
  EXPECT_EQ(api.run(member, "cat /etc/vm-default").stdout_bytes, "from-template\n");
  EXPECT_EQ(pool().value("hits_total", 0), 1) << pool().dump();
  EXPECT_EQ(pool().value("misses_total", 0), 1) << pool().dump();
  ASSERT_EQ(api.call("PUT", "/v1/templates/vm-default/pool", R"({"size": 0})").status, 200);
  for (const auto& id : {member, other})
    api.wait_operation(api.call("DELETE", "/v1/sandboxes/" + id).json.value("operation_id", ""));
}

TEST_F(api_microvm, a_vm_template_with_a_start_cmd_is_cloned_from_a_base_that_started_it) {
  auto api = admin();
  // The build starts start_cmd before ready_cmd, which waits for it.
  auto built = api.post("/v1/templates", {{"name", "vm-warm"},
                                          {"from", {{"template", "minimal"}}},
                                          {"env", {{"WARM_FROM", "template"}}},
                                          {"start_cmd", "echo $$ > /tmp/warm.pid; while :; do "
                                                        "sleep 1; done"},
                                          {"ready_cmd", "test -s /tmp/warm.pid"},
                                          {"default_runtime", "microvm"}});
  ASSERT_EQ(built.status, 202) << built.body;
  auto build = api.wait_operation(built.json["operation_id"]);
  ASSERT_EQ(build["state"], "succeeded") << build.dump();

  // Two creates at once: one VM makes the base, the other create waits for it.
  const double boots_before = base_boots(api);
  std::string ops[2];
  std::string vms[2];
  for (int i = 0; i < 2; ++i) {
    auto created = api.create(small_spec({{"template", "vm-warm"},
                                          {"cpu_millis", 1000},
                                          {"memory_mb", 256},
                                          {"env", {{"CREATE_ONLY", "tenant-secret"}}}}));
    ASSERT_EQ(created.status, 202) << created.body;
    ops[i] = created.json.value("operation_id", "");
    vms[i] = created.json.value("sandbox_id", "");
  }
  for (const auto& op : ops)
    ASSERT_EQ(api.wait_operation(op)["state"], "succeeded") << server().log();
  EXPECT_EQ(base_boots(api), boots_before + 1) << "one VM boots to make the base";
  std::string pids[2];
  for (int i = 0; i < 2; ++i) {
    pids[i] = trimmed(api.run(vms[i], "cat /tmp/warm.pid").stdout_bytes);
    ASSERT_FALSE(pids[i].empty());
    // The base's start_cmd runs on, once: the create started no other.
    EXPECT_EQ(api.run(vms[i], "kill -0 " + pids[i] + " && echo alive").stdout_bytes, "alive\n");
    EXPECT_EQ(trimmed(api
                        .run(vms[i], "n=0; for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $f "
                                     "| grep -q 'warm[.]pid; while' && n=$((n+1)); done; echo $n")
                        .stdout_bytes),
              "1");
    // It has the template's env, not the create's: it ran before any tenant's.
    auto environ = api.run(vms[i], "tr '\\0' '\\n' < /proc/" + pids[i] + "/environ").stdout_bytes;
    EXPECT_NE(environ.find("WARM_FROM=template"), std::string::npos) << environ;
    EXPECT_EQ(environ.find("CREATE_ONLY"), std::string::npos) << environ;
    EXPECT_EQ(api.run(vms[i], "echo $CREATE_ONLY").stdout_bytes, "tenant-secret\n");
  }
  EXPECT_EQ(pids[0], pids[1]) << "both VMs are clones of one base";
  const fs::path machines = server().data_dir() + "/microvm/machines";
  EXPECT_TRUE(fs::exists(machines / "base-vm-warm_v1-256m-1c-net" / "snapshot.json"));
  // The VM the base was made in is gone.
  for (const auto& entry : fs::directory_iterator(server().data_dir() + "/microvm/run"))
    EXPECT_NE(entry.path().filename().string().rfind("base-", 0), 0u) << entry.path();
  for (const auto& id : vms)
    api.wait_operation(api.call("DELETE", "/v1/sandboxes/" + id).json.value("operation_id", ""));
}

TEST_F(api_microvm, a_vm_checkpoint_outlives_a_kill_of_the_daemon_and_bases_are_made_again) {
  auto api = admin();
  auto source =
    api.create_running({{"runtime", "microvm"}, {"cpu_millis", 1000}, {"memory_mb", 256}});
  ASSERT_FALSE(source.empty());
  const std::string pid = trimmed(
    api.run(source, "sh -c 'while true; do sleep 1; done' >/dev/null 2>&1 & echo $!").stdout_bytes);
  ASSERT_FALSE(pid.empty());
  auto checkpoint = run_operation(api, "/v1/sandboxes/" + source + "/checkpoints");
  ASSERT_EQ(checkpoint["state"], "succeeded") << checkpoint.dump();
  const std::string checkpoint_id = checkpoint["result"].value("checkpoint_id", "");
  const fs::path machines = server().data_dir() + "/microvm/machines";

  std::string error;
  ASSERT_TRUE(restart_server(serve_process::stop_kind::sigkill, error)) << error;
  auto again = admin();
  // The acknowledged checkpoint's machine is kept; the bases are made again.
  EXPECT_TRUE(fs::exists(machines / checkpoint_id / "snapshot.json"));
  for (const auto& entry : fs::directory_iterator(machines))
    EXPECT_NE(entry.path().filename().string().rfind("base-", 0), 0u) << entry.path();
  // A sandbox from it runs the process the source ran when it was taken.
  auto created = again.create({{"from_checkpoint", checkpoint_id}});
  ASSERT_EQ(created.status, 202) << created.body;
  ASSERT_EQ(again.wait_operation(created.json["operation_id"])["state"], "succeeded")
    << server().log();
  const std::string restored = created.json["sandbox_id"];
  EXPECT_EQ(again.run(restored, "kill -0 " + pid + " && echo alive").stdout_bytes, "alive\n");
  for (const auto& id : {restored, source})
    again.wait_operation(
      again.call("DELETE", "/v1/sandboxes/" + id).json.value("operation_id", ""));
}

} // namespace
} // namespace airlock::test
