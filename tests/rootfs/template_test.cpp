// Building the minimal template into both drivers and running busybox inside
// it; failed and cancelled builds leave nothing behind. Needs root (mount,
// chroot).

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>

#include "tests/rootfs/test_support.hpp"
#include "worker/rootfs/btrfs_driver.hpp"
#include "worker/rootfs/fs_util.hpp"
#include "worker/rootfs/overlay_driver.hpp"
#include "worker/rootfs/templates.hpp"

namespace airlock::worker {
namespace {

struct progress_log {
  std::vector<std::string> phases;
  std::vector<int> percents;

  build_control control() {
    build_control out;
    out.progress = [this](std::string_view phase, int percent, std::string_view) {
      phases.emplace_back(phase);
      percents.push_back(percent);
    };
    return out;
  }
};

mode_t mode_of(const std::filesystem::path& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 ? st.st_mode : 0;
}

class minimal_template_test : public ::testing::Test {
protected:
  void SetUp() override {
    if (auto reason = test::overlay_unavailable_reason())
      GTEST_SKIP() << *reason;
    options_.data_dir = scratch_.path() / "data";
    auto opened = overlay_driver::open(options_);
    ASSERT_TRUE(opened) << opened.error().message;
    driver_ = std::move(*opened);
  }

  void TearDown() override {
    if (driver_) {
      EXPECT_TRUE(driver_->detach());
    }
  }

  test::scratch_dir scratch_;
  rootfs_options options_;
  template_options templates_;
  std::unique_ptr<overlay_driver> driver_;
};

TEST_F(minimal_template_test, builds_busybox_with_the_guest_and_runs_a_shell_in_it) {
  template_builder builder(*driver_, templates_);
  progress_log log;
  auto started = std::chrono::steady_clock::now();
  auto manifest = builder.ensure("minimal", log.control());
  auto took = std::chrono::steady_clock::now() - started;
  ASSERT_TRUE(manifest) << manifest.error().message;
  EXPECT_LT(took, std::chrono::seconds(5));
  std::cout << "minimal template built in "
            << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms\n";
  EXPECT_EQ(manifest->name, "minimal");
  EXPECT_GT(manifest->size_bytes, 1u << 20);
  EXPECT_NE(manifest->source.find("busybox"), std::string::npos);
  ASSERT_FALSE(log.percents.empty());
  EXPECT_TRUE(std::is_sorted(log.percents.begin(), log.percents.end()));
  EXPECT_EQ(log.percents.back(), 100);
  EXPECT_EQ(log.phases.back(), "done");

  auto root = driver_->template_path("minimal");
  ASSERT_TRUE(root);
  EXPECT_EQ(test::run_in_chroot(*root, {"/bin/sh", "-c", "echo ok"}), "ok");
  EXPECT_EQ(test::run_in_chroot(*root, {"/bin/sh", "-c", "cat /etc/hostname; id -u nobody"}),
            "airlock\n65534");
  EXPECT_EQ(mode_of(*root / "tmp") & 07777, 01777u);
  EXPECT_EQ(mode_of(*root / "root") & 07777, 0700u);
  for (const char* dir : {"proc", "sys", "dev"})
    EXPECT_TRUE(S_ISDIR(mode_of(*root / dir))) << dir;
  EXPECT_FALSE(path_exists(*root / "sbin" / "airlock-guest"))
    << "the agent is the host's file, run by the worker, never a copy in a template";
  EXPECT_TRUE(S_ISLNK(mode_of(*root / "usr" / "bin" / "awk")));
  auto stored = read_file(manifest_path(driver_->templates_dir(), "minimal"));
  ASSERT_TRUE(stored);
  EXPECT_TRUE(parse_manifest(*stored));
}

TEST_F(minimal_template_test, a_second_ensure_uses_the_cached_template) {
  template_builder builder(*driver_, templates_);
  auto first = builder.ensure("minimal");
  ASSERT_TRUE(first) << first.error().message;
  progress_log log;
  auto second = builder.ensure("minimal", log.control());
  ASSERT_TRUE(second);
  EXPECT_EQ(second->created_unix_s, first->created_unix_s);
  EXPECT_EQ(log.phases, std::vector<std::string>{"cached"});
  // A template whose manifest went missing counts as incomplete: rebuilt.
  ASSERT_EQ(::unlink(manifest_path(driver_->templates_dir(), "minimal").c_str()), 0);
  progress_log rebuilt;
  ASSERT_TRUE(builder.ensure("minimal", rebuilt.control()));
  EXPECT_EQ(rebuilt.phases.back(), "done");
}

TEST_F(minimal_template_test, a_cancelled_build_leaves_no_half_template) {
  template_builder builder(*driver_, templates_);
  std::atomic<bool> cancel{false};
  build_control control;
  control.cancel = &cancel;
  control.progress = [&cancel](std::string_view phase, int, std::string_view) {
    if (phase == "applets")
      cancel = true;
  };
  auto built = builder.ensure("minimal", control);
  ASSERT_FALSE(built);
  EXPECT_EQ(built.code(), errc::cancelled);
  EXPECT_FALSE(driver_->has_template("minimal"));
  EXPECT_TRUE(list_dir(driver_->templates_dir())->empty());
}

TEST_F(minimal_template_test, an_unreachable_mirror_fails_the_base_build_fast_and_leaves_nothing) {
  templates_.mirror = "http://127.0.0.1:9/debian"; // discard port: refused at once
  template_builder builder(*driver_, templates_);
  auto started = std::chrono::steady_clock::now();
  auto built = builder.ensure("base");
  ASSERT_FALSE(built);
  EXPECT_EQ(built.code(), errc::unavailable) << built.error().message;
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(10));
  EXPECT_TRUE(list_dir(driver_->templates_dir())->empty());
  EXPECT_EQ(builder.ensure("nonesuch").code(), errc::invalid_argument);
}

TEST(minimal_template_on_btrfs, sandboxes_of_it_run_busybox_and_snapshot_in_milliseconds) {
  if (auto reason = test::btrfs_unavailable_reason())
    GTEST_SKIP() << *reason;
  test::scratch_dir scratch;
  rootfs_options options;
  options.data_dir = scratch.path() / "data";
  options.image_size_mb = 512;
  auto driver = btrfs_driver::open(options);
  ASSERT_TRUE(driver) << driver.error().message;
  template_options templates;
  template_builder builder(**driver, templates);
  auto manifest = builder.ensure("minimal");
  ASSERT_TRUE(manifest) << manifest.error().message;
  auto started = std::chrono::steady_clock::now();
  auto sandbox = (*driver)->create_sandbox("s1", "minimal", 64);
  auto took = std::chrono::steady_clock::now() - started;
  ASSERT_TRUE(sandbox) << sandbox.error().message;
  std::cout << "sandbox snapshot with a disk limit took "
            << std::chrono::duration_cast<std::chrono::microseconds>(took).count() << " us\n";
  EXPECT_EQ(test::run_in_chroot(*sandbox, {"/bin/sh", "-c", "echo ok > /root/f; cat /root/f"}),
            "ok");
  EXPECT_FALSE(path_exists(*(*driver)->template_path("minimal") / "root" / "f"));
  ASSERT_TRUE((*driver)->delete_sandbox("s1"));
  EXPECT_TRUE((*driver)->detach());
}

} // namespace
} // namespace airlock::worker

namespace airlock::worker {
namespace {

/// A Debian-like /etc and skeleton, as debootstrap leaves them.
void write_debian_etc(const std::filesystem::path& root) {
  ASSERT_TRUE(make_dirs(root / "etc" / "skel"));
  ASSERT_TRUE(write_file(root / "etc" / "passwd", "root:x:0:0:root:/root:/bin/bash\n"
                                                  "nobody:x:65534:65534:nobody:/nonexistent:"
                                                  "/usr/sbin/nologin\n"));
  ASSERT_TRUE(write_file(root / "etc" / "group", "root:x:0:\nsudo:x:27:\n"));
  ASSERT_TRUE(write_file(root / "etc" / "shadow", "root:*:19000:0:99999:7:::\n", 0640));
  ASSERT_TRUE(write_file(root / "etc" / "gshadow", "root:*::\n", 0640));
  ASSERT_TRUE(write_file(root / "etc" / "skel" / ".bashrc", "# bashrc\n"));
  ASSERT_TRUE(write_file(root / "etc" / "skel" / ".profile", "# profile\n"));
}

uid_t owner_of(const std::filesystem::path& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 ? st.st_uid : static_cast<uid_t>(-1);
}

TEST(base_user_account, adds_user_1000_with_its_home_skeleton_and_passwordless_sudo_once) {
  if (::geteuid() != 0)
    GTEST_SKIP() << "giving files to uid 1000 needs root";
  test::scratch_dir scratch;
  const auto root = scratch.path();
  write_debian_etc(root);
  user_account account;
  ASSERT_TRUE(add_user_account(root, account));
  ASSERT_TRUE(add_user_account(root, account)) << "a second run is a no-op";
  auto passwd = read_file(root / "etc" / "passwd");
  ASSERT_TRUE(passwd);
  EXPECT_EQ(*passwd, "root:x:0:0:root:/root:/bin/bash\n"
                     "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
                     "user:x:1000:1000::/home/user:/bin/bash\n");
  EXPECT_EQ(*read_file(root / "etc" / "group"), "root:x:0:\nsudo:x:27:\nuser:x:1000:\n");
  EXPECT_EQ(*read_file(root / "etc" / "shadow"),
            "root:*:19000:0:99999:7:::\nuser:!:19000:0:99999:7:::\n");
  EXPECT_EQ(mode_of(root / "etc" / "shadow") & 07777, 0640u) << "appending keeps the mode";
  EXPECT_EQ(*read_file(root / "etc" / "gshadow"), "root:*::\nuser:!::\n");
  const auto home = root / "home" / "user";
  EXPECT_EQ(owner_of(home), 1000u);
  EXPECT_EQ(mode_of(home) & 07777, 0750u);
  EXPECT_EQ(*read_file(home / ".bashrc"), "# bashrc\n");
  EXPECT_EQ(owner_of(home / ".bashrc"), 1000u);
  EXPECT_EQ(owner_of(home / ".profile"), 1000u);
  const auto sudoers = root / "etc" / "sudoers.d" / "user";
  EXPECT_EQ(*read_file(sudoers), "user ALL=(ALL:ALL) NOPASSWD: ALL\n");
  EXPECT_EQ(mode_of(sudoers) & 07777, 0440u);
  EXPECT_EQ(owner_of(sudoers), 0u);
}

TEST(base_user_account, refuses_a_uid_another_name_holds) {
  test::scratch_dir scratch;
  const auto root = scratch.path();
  write_debian_etc(root);
  ASSERT_TRUE(write_file(root / "etc" / "passwd", "root:x:0:0::/root:/bin/sh\n"
                                                  "someone:x:1000:1000::/home/x:/bin/sh\n"));
  auto added = add_user_account(root, user_account{});
  EXPECT_EQ(added.code, errc::invalid_argument);
  EXPECT_NE(added.message.find("someone"), std::string::npos) << added.message;
  EXPECT_FALSE(path_exists(root / "home" / "user"));
}

} // namespace
} // namespace airlock::worker
