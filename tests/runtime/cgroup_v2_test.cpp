// The cgroup v2 driver on a real cgroup2 mount. On this machine's hybrid
// layout the unified hierarchy has no controllers, so limits are left at 0
// here; freeze, thaw, kill and remove are the same code a pure v2 host runs.

#include <gtest/gtest.h>

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include "tests/support/environment.hpp"
#include "worker/runtime/cgroup_driver.hpp"
#include "worker/runtime/sys.hpp"

namespace airlock::worker {
namespace {

namespace fs = std::filesystem;

std::string v2_mount() {
  auto mounts = read_file("/proc/self/mountinfo", 16 << 20);
  return mounts ? parse_cgroup_mounts(*mounts).v2_path : std::string();
}

TEST(cgroup_v2_driver, freezes_thaws_kills_and_removes_a_cgroup) {
  AIRLOCK_REQUIRE_ROOT("creating cgroups");
  std::string root = v2_mount();
  if (root.empty() || !fs::exists(root + "/cgroup.subtree_control"))
    GTEST_SKIP() << "no cgroup2 mount on this host";
  const std::string parent = "airlock-test-v2";
  const std::string id = "v2-" + std::to_string(::getpid());
  auto driver = make_cgroup_v2_driver(root, parent);
  ASSERT_TRUE(driver->create(id, {}));
  ASSERT_EQ(driver->paths(id), std::vector<std::string>{root + "/" + parent + "/" + id});

  int gate[2];
  ASSERT_EQ(::pipe(gate), 0);
  pid_t child = ::fork();
  if (child == 0) {
    char byte;
    (void)!::read(gate[0], &byte, 1); // blocks until killed
    ::_exit(0);
  }
  ::close(gate[0]);
  ASSERT_TRUE(driver->attach(id, child));
  auto frozen = driver->freeze(id, 5000);
  ASSERT_TRUE(frozen) << frozen.message;
  auto usage = driver->usage(id);
  ASSERT_TRUE(usage);
  EXPECT_TRUE(usage->frozen);
  ASSERT_TRUE(driver->thaw(id, 5000));
  EXPECT_FALSE(driver->usage(id)->frozen);
  ASSERT_TRUE(driver->freeze(id, 5000));
  ASSERT_TRUE(driver->kill_all(id)) << "cgroup.kill works on a frozen cgroup";
  int wstatus = 0;
  ASSERT_EQ(::waitpid(child, &wstatus, 0), child);
  EXPECT_TRUE(WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGKILL);
  auto removed = driver->remove(id, 5000);
  EXPECT_TRUE(removed) << removed.message;
  EXPECT_FALSE(fs::exists(root + "/" + parent + "/" + id));
  EXPECT_TRUE(driver->remove(id, 5000)) << "remove is idempotent";
  ::close(gate[1]);
  ::rmdir((root + "/" + parent).c_str());
}

TEST(cgroup_v2_driver, refuses_a_limit_whose_controller_is_missing) {
  AIRLOCK_REQUIRE_ROOT("creating cgroups");
  std::string root = v2_mount();
  if (root.empty())
    GTEST_SKIP() << "no cgroup2 mount on this host";
  auto controllers = read_file(root + "/cgroup.controllers");
  if (!controllers || controllers->find("memory") != std::string::npos)
    GTEST_SKIP() << "memory is available on cgroup2 here";
  auto driver = make_cgroup_v2_driver(root, "airlock-test-v2");
  auto refused = driver->create("v2-limit", {64 << 20, 0, 0, 100000});
  EXPECT_EQ(refused.code, errc::unavailable);
  EXPECT_NE(refused.message.find("memory"), std::string::npos) << refused.message;
  ::rmdir((root + "/airlock-test-v2").c_str());
}

} // namespace
} // namespace airlock::worker
