// The seccomp allow list against real workloads: busybox in the minimal
// rootfs, and python3, git and curl in the `base` template, found in the test
// cache or built there (debootstrap; tests/rootfs/test_support.hpp), so this
// suite needs no other to have run first. The unit tests
// (runtime_unit_test.cpp) probe each rule.

#include <gtest/gtest.h>

#include <string>

#include "sandbox_fixture.hpp"
#include "tests/rootfs/test_support.hpp"

namespace airlock::worker::testing {
namespace {

constexpr const char* base_env = "export PATH=/usr/local/bin:/usr/bin:/bin HOME=/root; ";

using seccomp_workloads = runtime_test;

TEST_F(seccomp_workloads, busybox_tools_run_in_the_minimal_rootfs) {
  auto box = start_sandbox(unique_id("sc-busybox"));
  ASSERT_NE(box.runtime, nullptr);
  EXPECT_EQ(box.shell.run("seq 3 | cat").output, "1\n2\n3\n");
  EXPECT_EQ(box.shell.run("ls / | grep -c bin").output, "1\n");
  EXPECT_EQ(box.shell.run("sleep 0.1 && echo slept").output, "slept\n");
  EXPECT_EQ(box.shell.run("echo hi > /tmp/f && cat /tmp/f && rm /tmp/f").output, "hi\n");
  EXPECT_EQ(box.shell.run("sh -c 'exit 7'").exit_code, 7);
  // dmesg needs syslog(2), which the filter refuses.
  EXPECT_NE(box.shell.run("/bin/busybox dmesg >/dev/null 2>&1").exit_code, 0);
}

class seccomp_base_template : public runtime_test {
protected:
  void SetUp() override {
    runtime_test::SetUp();
    if (IsSkipped() || HasFatalFailure())
      return;
    auto base = airlock::worker::test::ensure_base_template();
    if (base.skip_reason)
      GTEST_SKIP() << *base.skip_reason;
    ASSERT_TRUE(base.error.empty()) << "cannot build the base template: " << base.error;
    auto cached = base.root.string();
    copy_ = std::make_unique<temp_dir>("airlock-base");
    // A private copy: the runtime id-maps the rootfs and the sandbox writes.
    // A whole Debian tree copied byte by byte where /tmp cannot reflink: a
    // loaded 2-core CI host has taken over a minute.
    ASSERT_EQ(host_run({"/bin/cp", "-a", "--reflink=auto", cached + "/.", copy_->path()}, 600'000),
              0);
  }

  std::unique_ptr<temp_dir> copy_;
};

TEST_F(seccomp_base_template, python_git_and_curl_work) {
  auto box = start_sandbox_on(unique_id("sc-base"), copy_->path());
  ASSERT_NE(box.runtime, nullptr);
  const std::string python =
    "import os, socket, subprocess, threading; "
    "t = threading.Thread(target=lambda: None); t.start(); t.join(); "
    "a, b = socket.socketpair(); a.sendall(b\"x\"); assert b.recv(1) == b\"x\"; "
    "s = socket.socket(); s.bind((\"127.0.0.1\", 0)); s.listen(); "
    "c = socket.create_connection(s.getsockname()); c.close(); "
    "r = subprocess.run([\"echo\", \"sub\"], capture_output=True, text=True); "
    "print(r.stdout.strip(), len(os.urandom(8)), os.cpu_count() > 0)";
  auto py = box.shell.run(std::string(base_env) + "python3 -c '" + python + "'", 30000);
  EXPECT_EQ(py.exit_code, 0) << py.output;
  EXPECT_EQ(py.output, "sub 8 True\n");

  auto git = box.shell.run(std::string(base_env)
                             + "mkdir /tmp/repo && cd /tmp/repo && git init -q && echo x > f && "
                               "git add f && git -c user.name=t -c user.email=t@example.com "
                               "commit -q -m first && git log --format=%s",
                           30000);
  EXPECT_EQ(git.exit_code, 0) << git.output;
  EXPECT_EQ(git.output, "first\n");

  auto curl = box.shell.run(std::string(base_env) + "curl --version | head -c 5");
  EXPECT_EQ(curl.output, "curl ");
}

TEST_F(seccomp_base_template, refused_and_unknown_syscalls_fail_with_their_errno) {
  auto box = start_sandbox_on(unique_id("sc-errno"), copy_->path());
  ASSERT_NE(box.runtime, nullptr);
  // x86_64 numbers: 1000 none, 238 set_mempolicy (not listed), 103 syslog,
  // 163 acct, 167 swapon, 169 reboot (denied).
  const std::string python = "import ctypes; libc = ctypes.CDLL(None, use_errno=True); "
                             "out = []; "
                             "[(ctypes.set_errno(0), libc.syscall(n, 0, 0, 0, 0), "
                             "out.append(str(ctypes.get_errno()))) "
                             "for n in (1000, 238, 103, 163, 167, 169)]; "
                             "print(\" \".join(out))";
  auto out = box.shell.run(std::string(base_env) + "python3 -c '" + python + "'", 30000);
  EXPECT_EQ(out.exit_code, 0) << out.output;
  EXPECT_EQ(out.output, "38 38 1 1 1 1\n") << "ENOSYS for unknown/unlisted, EPERM for denied";
}

} // namespace
} // namespace airlock::worker::testing
