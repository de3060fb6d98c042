// The `base` template (Debian 12 by debootstrap from the host's mirror). Slow
// (about 40 s and 400 MB) and needs the network, so it has its own executable
// labelled `slow`. The template is cached in /var/tmp/airlock-test-cache/base
// (AIRLOCK_TEST_CACHE overrides) and reused while its manifest is valid.

#include <gtest/gtest.h>
#include <unistd.h>

#include <iostream>

#include "tests/rootfs/test_support.hpp"
#include "worker/rootfs/apt_sources.hpp"
#include "worker/rootfs/fs_util.hpp"
#include "worker/rootfs/overlay_driver.hpp"
#include "worker/rootfs/templates.hpp"

namespace airlock::worker {
namespace {

TEST(base_template, builds_debian_with_python_git_curl_and_bash_once_and_caches_it) {
  if (auto reason = test::overlay_unavailable_reason())
    GTEST_SKIP() << *reason;
  template_options templates;
  auto mirror = find_host_mirror(templates.apt_dir, templates.suite);
  if (!mirror)
    GTEST_SKIP() << mirror.error().message;
  if (auto reachable = probe_mirror(*mirror, templates.suite, 5'000); !reachable)
    GTEST_SKIP() << reachable.message;
  test::base_template_lock lock;
  test::scratch_dir scratch;
  rootfs_options options;
  options.data_dir = test::base_template_cache_dir();
  auto driver = overlay_driver::open(options);
  ASSERT_TRUE(driver) << driver.error().message;
  template_builder builder(**driver, templates);
  std::vector<std::string> phases;
  int last_percent = -1;
  bool monotonic = true;
  build_control control;
  control.progress = [&](std::string_view phase, int percent, std::string_view line) {
    if (phases.empty() || phases.back() != phase) {
      phases.emplace_back(phase);
      std::cout << "[" << percent << "%] " << phase << ": " << line << std::endl;
    }
    monotonic = monotonic && percent >= last_percent;
    last_percent = percent;
  };
  auto manifest = builder.ensure("base", control);
  ASSERT_TRUE(manifest) << manifest.error().message;
  EXPECT_TRUE(monotonic);
  EXPECT_EQ(last_percent, 100);
  if (phases != std::vector<std::string>{"cached"}) {
    for (const char* phase : {"download", "unpack", "configure", "done"})
      EXPECT_NE(std::find(phases.begin(), phases.end(), phase), phases.end()) << phase;
  }
  EXPECT_GT(manifest->size_bytes, 100u << 20);
  EXPECT_NE(manifest->source.find("debootstrap"), std::string::npos);

  auto root = (*driver)->template_path("base");
  ASSERT_TRUE(root);
  for (const char* program : {"usr/bin/python3", "usr/bin/git", "usr/bin/curl", "usr/bin/bash"})
    EXPECT_TRUE(path_exists(*root / program)) << program;
  EXPECT_EQ(test::run_in_chroot(*root, {"python3", "-c", "print(1)"}), "1");

  // A sandbox of it works and leaves the cached template untouched.
  auto sandbox = (*driver)->create_sandbox("base_check", "base", 0);
  ASSERT_TRUE(sandbox) << sandbox.error().message;
  EXPECT_EQ(test::run_in_chroot(*sandbox, {"bash", "-c", "echo hi > /root/x && cat /root/x"}),
            "hi");
  // What an agent's first commands reach for: a virtual environment with
  // pip (ensurepip needs python3-venv), and sudo.
  EXPECT_EQ(test::run_in_chroot(*sandbox, {"bash", "-c",
                                           "python3 -m venv /root/venv && /root/venv/bin/pip "
                                           "--version > /root/pip-version && echo venv"}),
            "venv");
  EXPECT_TRUE(path_exists(*sandbox / "usr/bin/sudo"));
  EXPECT_TRUE((*driver)->delete_sandbox("base_check"));
  EXPECT_FALSE(path_exists(*root / "root" / "x"));
  EXPECT_TRUE((*driver)->detach());
}

} // namespace
} // namespace airlock::worker
