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

#include "tests/api/api_fixture.hpp"
#include "tests/api/microvm_support.hpp"

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

std::string trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
    text.pop_back();
  return text;
}

/// The API suites' instance (and lock), with the microvm runtime on.
struct microvm_suite_config {
  static constexpr const char* lock_path = "/run/airlock-api-e2e.lock";
  static constexpr const char* what = "the microvm API tests run VMs";
  static serve_process::options options() {
    serve_process::options opts;
    opts.extra_args = microvm_serve_args(AIRLOCK_SOURCE_DIR);
    return opts;
  }
};

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
  // Its QEMU runs on this host, named by the sandbox's id.
  EXPECT_FALSE(processes_with("qemu-system", sandbox_).empty());
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

} // namespace
} // namespace airlock::test
