// The official npm `e2b` SDK, pinned (tests/e2b_sdk/package.json and its
// lock), against this suite's `airlockd serve`: installs it with `npm ci`
// into the build tree, builds the `base` template first (the SDK runs
// commands with bash), then runs tests/e2b_sdk/sdk_test.mjs with node's test
// runner and E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY pointing at the
// daemon. Without node 20.18 or later (the SDK's requirement) or with no
// reachable npm registry, it says so and skips.

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <tuple>

#include "tests/api/api_fixture.hpp"
#include "tests/support/host.hpp"

namespace airlock::test {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

/// Runs a shell line; its exit status and output (stdout and stderr).
std::pair<int, std::string> shell(const std::string& line) {
  std::string output;
  FILE* pipe = ::popen((line + " 2>&1").c_str(), "r");
  if (pipe == nullptr)
    return {-1, "popen failed"};
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0)
    output.append(buffer, n);
  int status = ::pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

/// node's version as (major, minor, patch); zeros when there is no node.
std::tuple<int, int, int> node_version() {
  auto [status, text] = shell("node --version");
  int major = 0, minor = 0, patch = 0;
  if (status == 0)
    std::sscanf(text.c_str(), "v%d.%d.%d", &major, &minor, &patch);
  return {major, minor, patch};
}

class api_e2b_sdk : public api_suite {};

TEST_F(api_e2b_sdk, the_official_sdk_runs_unchanged_against_airlock) {
  auto version = node_version();
  auto [major, minor, patch] = version;
  if (version < std::tuple{20, 18, 1} || (major == 21))
    GTEST_SKIP() << "the e2b SDK needs node >=20.18.1 <21 or >=22; this host has "
                 << (major == 0 ? std::string("none")
                                : std::to_string(major) + "." + std::to_string(minor) + "."
                                    + std::to_string(patch));
  // The SDK and the test go into the build tree; npm ci installs exactly the lock.
  const fs::path sources = AIRLOCK_E2B_SDK_DIR;
  const fs::path work = fs::path(AIRLOCK_E2B_SDK_WORK_DIR);
  fs::create_directories(work);
  for (const char* file : {"package.json", "package-lock.json", "sdk_test.mjs"})
    fs::copy_file(sources / file, work / file, fs::copy_options::overwrite_existing);
  auto [installed, npm_output] =
    shell("cd '" + work.string() + "' && timeout 600 npm ci --no-audit --no-fund");
  if (installed != 0)
    GTEST_SKIP() << "npm could not install the pinned e2b SDK (is the npm registry "
                    "reachable?):\n"
                 << npm_output;

  // The base template's first build takes minutes: made here, through the
  // API, so that the SDK's creates find it ready.
  auto api = admin();
  auto created = api.create({{"template", "base"}, {"cpu_millis", 500}, {"memory_mb", 256}});
  ASSERT_EQ(created.status, 202) << created.body;
  json op;
  for (int wait = 0; wait < 15; ++wait) { // at most 15 waits of operation_wait_max
    op = api.wait_operation(created.json.value("operation_id", ""));
    if (op.value("state", "") == "succeeded" || op.value("state", "") == "failed")
      break;
  }
  ASSERT_EQ(op.value("state", ""), "succeeded") << "base did not build: " << op.dump();
  EXPECT_EQ(api.call("DELETE", "/v1/sandboxes/" + created.json.value("sandbox_id", "")).status,
            202);

  const std::string env = "E2B_API_URL=" + server().url() + "/e2b E2B_SANDBOX_URL=" + server().url()
                          + "/e2b/envd E2B_API_KEY=" + server().admin_key()
                          + " AIRLOCK_SDK_TEMPLATE=base";
  auto [status, output] = shell("cd '" + work.string() + "' && " + env
                                + " timeout 600 node --test --test-reporter=tap sdk_test.mjs");
  EXPECT_EQ(status, 0) << output;
  // The runner's own counts: every test of the file ran and passed.
  const std::string text = read_file((sources / "sdk_test.mjs").string());
  size_t tests = 0;
  for (size_t at = text.find("\ntest("); at != std::string::npos; at = text.find("\ntest(", at + 1))
    ++tests;
  ASSERT_GT(tests, 0u);
  EXPECT_NE(output.find("# pass " + std::to_string(tests) + "\n"), std::string::npos) << output;
  EXPECT_NE(output.find("# fail 0"), std::string::npos) << output;
}

} // namespace
} // namespace airlock::test
