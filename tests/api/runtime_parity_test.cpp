// What holds for a sandbox whatever its runtime: the same cases run against a
// namespace sandbox and a microVM (one of each, from one `serve --microvm on`
// shared with microvm_test.cpp): a PTY has the asked size and follows a
// resize; the files API never reaches the host through `..` or symbolic
// links; the host's processes, files and network are not visible inside. The
// microvm cases skip with the reason where QEMU or the guest's tools are
// missing; the namespace ones run anyway.

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <string>

#include "tests/api/microvm_fixture.hpp"

namespace airlock::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class runtime_parity : public serve_suite<microvm_suite_config>,
                       public ::testing::WithParamInterface<std::string> {
public:
  static void TearDownTestSuite() {
    if (has_server())
      for (const auto& [runtime, id] : sandboxes_)
        if (!id.empty())
          admin().call("DELETE", "/v1/sandboxes/" + id);
    sandboxes_.clear();
    serve_suite::TearDownTestSuite();
  }

protected:
  void SetUp() override {
    if (GetParam() == "microvm") {
      if (auto missing = microvm_missing(); !missing.empty())
        GTEST_SKIP() << "microvm: " << missing;
    }
    serve_suite::SetUp();
    // No server (its start failed): SetUp's assertion says so; nothing to create on.
    if (IsSkipped() || HasFatalFailure())
      return;
    auto& id = sandboxes_[GetParam()];
    if (id.empty()) {
      // A whole core for a VM: its kernel boots under emulation, bounded by the sandbox's CPU.
      json extra = {{"runtime", GetParam()}};
      if (GetParam() == "microvm")
        extra.update({{"cpu_millis", 1000}, {"cpu_request_millis", 1000}, {"memory_mb", 256}});
      id = admin().create_running(extra);
    }
    ASSERT_FALSE(id.empty()) << "the " << GetParam() << " sandbox did not start";
    sandbox_ = id;
  }

  std::string files(const std::string& query) const {
    return "/v1/sandboxes/" + sandbox_ + "/files" + query;
  }

  std::string sandbox_;
  static inline std::map<std::string, std::string> sandboxes_;
};

TEST_P(runtime_parity, a_pty_has_the_requested_size_follows_resize_and_is_a_pts) {
  auto api = admin();
  auto process = api.exec(sandbox_, {{"cmd", "stty size; tty; read line; stty size"},
                                     {"pty", {{"rows", 30}, {"cols", 100}}},
                                     {"stdin", true}});
  ASSERT_TRUE(process);
  auto stream = api.open_stream(process->attach_path + "/output",
                                {{"Authorization", "Bearer " + process->attach_token}});
  ASSERT_TRUE(stream);
  ASSERT_EQ(stream->second.status, 200);
  process_output output;
  while (output.stdout_bytes.find("/dev/pts/") == std::string::npos && !output.exit) {
    auto event = stream->first.next_event();
    ASSERT_TRUE(event) << "got only: " << output.stdout_bytes;
    collect_event(output, *event);
  }
  EXPECT_NE(output.stdout_bytes.find("30 100"), std::string::npos) << output.stdout_bytes;
  auto resized = api.post(process->attach_path + "/resize", {{"rows", 40}, {"cols", 120}});
  EXPECT_EQ(resized.status, 200) << resized.body;
  EXPECT_EQ(api.call("POST", process->attach_path + "/stdin", "\n").status, 200);
  while (!output.exit) {
    auto event = stream->first.next_event();
    ASSERT_TRUE(event) << "got only: " << output.stdout_bytes;
    collect_event(output, *event);
  }
  EXPECT_NE(output.stdout_bytes.find("40 120"), std::string::npos) << output.stdout_bytes;
  EXPECT_EQ((*output.exit)["exit_code"], 0);
  auto bad = api.post(process->attach_path + "/resize", {{"rows", 0}, {"cols", 80}});
  EXPECT_EQ(bad.status, 400);
}

TEST_P(runtime_parity, dot_dot_and_symlinks_never_reach_the_host) {
  auto api = admin();
  // A file only the host has, with content the sandbox cannot know.
  std::string marker = server().dir() + "/host-marker-" + GetParam();
  std::string secret = "host secret " + std::to_string(::getpid());
  write_file(marker, secret);
  auto host_shadow = read_file("/etc/shadow");

  auto shadow = api.get(files("?path=/../../etc/shadow"));
  EXPECT_TRUE(shadow.status != 200 || shadow.body != host_shadow || host_shadow.empty())
    << "read the host's /etc/shadow";
  auto dotted = api.get(files("?path=/../../../../.." + marker));
  EXPECT_FALSE(dotted.status == 200 && dotted.body == secret) << "read a host file via ..";

  auto links = api.run(sandbox_, "ln -sf / /hostroot && ln -sf " + marker
                                   + " /marker-link && "
                                     "ln -sf ../../../../.. /up && echo ok");
  ASSERT_EQ(links.stdout_bytes, "ok\n") << links.stderr_bytes;
  for (const std::string& path : {"/hostroot" + marker, std::string("/marker-link"), "/up" + marker,
                                  "/hostroot/../.." + marker}) {
    auto through = api.get(files("?path=" + path));
    EXPECT_FALSE(through.status == 200 && through.body == secret)
      << "read a host file through " << path;
  }
  // Writes through a link land inside the sandbox, if anywhere.
  std::string host_target = server().dir() + "/written-from-sandbox-" + GetParam();
  auto write = api.call("PUT", files("?path=/hostroot" + host_target), "x");
  EXPECT_FALSE(fs::exists(host_target)) << "wrote a host file (" << write.status << ")";
  auto write_up = api.call("PUT", files("?path=/up" + host_target), "x");
  EXPECT_FALSE(fs::exists(host_target)) << "wrote a host file (" << write_up.status << ")";
  EXPECT_EQ(read_file(marker), secret);
}

TEST_P(runtime_parity, the_hosts_processes_files_and_network_are_not_visible) {
  auto api = admin();
  // Processes: no command line inside names the host's daemon or this test.
  auto listed = api.run(sandbox_, "cat /proc/[0-9]*/cmdline | tr '\\0' ' '; echo; echo end");
  ASSERT_NE(listed.stdout_bytes.find("end"), std::string::npos) << listed.stderr_bytes;
  EXPECT_EQ(listed.stdout_bytes.find("airlockd"), std::string::npos) << listed.stdout_bytes;
  EXPECT_EQ(listed.stdout_bytes.find("api_e2e_test"), std::string::npos) << listed.stdout_bytes;

  // Files: a host file with a secret is at no path inside.
  std::string marker = server().dir() + "/visible-marker-" + GetParam();
  write_file(marker, "host only");
  auto looked =
    api.run(sandbox_, "cat " + marker + " 2>/dev/null; ls -d " + marker + " 2>/dev/null; echo end");
  EXPECT_EQ(looked.stdout_bytes, "end\n");

  // Network: none of the host's interfaces, and not the daemon's listening port.
  std::set<std::string> host_interfaces;
  for (const auto& entry : fs::directory_iterator("/sys/class/net")) {
    auto name = entry.path().filename().string();
    if (name != "lo" && name != "eth0")
      host_interfaces.insert(name);
  }
  auto dev = api.run(sandbox_, "cat /proc/net/dev");
  ASSERT_NE(dev.stdout_bytes.find("lo:"), std::string::npos) << dev.stdout_bytes;
  for (const auto& name : host_interfaces)
    EXPECT_EQ(dev.stdout_bytes.find(" " + name + ":"), std::string::npos)
      << "the host's " << name << " is visible:\n"
      << dev.stdout_bytes;
  char port_hex[8];
  std::snprintf(port_hex, sizeof port_hex, ":%04X", static_cast<unsigned>(server().port()));
  auto tcp = api.run(sandbox_, "cat /proc/net/tcp");
  EXPECT_EQ(tcp.stdout_bytes.find(port_hex), std::string::npos)
    << "the daemon's socket is visible:\n"
    << tcp.stdout_bytes;
}

INSTANTIATE_TEST_SUITE_P(runtimes, runtime_parity, ::testing::Values("namespace", "microvm"),
                         [](const ::testing::TestParamInfo<std::string>& param) {
                           return param.param;
                         });

} // namespace
} // namespace airlock::test
