// The overlay driver in a scratch directory: templates, sandboxes as overlay
// mounts, checkpoints as copies of the upper directory, forks layered on them,
// shared-layer protection, restart and detach. Needs root and overlayfs.

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/rootfs/test_support.hpp"
#include "worker/rootfs/fs_util.hpp"
#include "worker/rootfs/overlay_driver.hpp"

namespace airlock::worker {
namespace {

std::string contents(const std::filesystem::path& path) {
  auto text = read_file(path);
  return text ? *text : "<" + text.error().message + ">";
}

bool is_mount_point(const std::filesystem::path& path) {
  auto mounts = read_mounts();
  if (!mounts)
    return false;
  for (const auto& mount : *mounts)
    if (mount.mount_point == path.string())
      return true;
  return false;
}

class overlay_driver_test : public ::testing::Test {
protected:
  void SetUp() override {
    if (auto reason = test::overlay_unavailable_reason())
      GTEST_SKIP() << *reason;
    options_.data_dir = scratch_.path() / "data";
    options_.kind = rootfs_kind::overlay;
    auto opened = overlay_driver::open(options_);
    ASSERT_TRUE(opened) << opened.error().message;
    driver_ = std::move(*opened);
    auto staging = driver_->create_template("t1");
    ASSERT_TRUE(staging) << staging.error().message;
    ASSERT_TRUE(make_dirs(*staging / "data"));
    ASSERT_TRUE(write_file(*staging / "data" / "file", "original\n"));
    ASSERT_TRUE(write_file(*staging / "data" / "doomed", "delete me\n"));
    ASSERT_TRUE(driver_->seal_template("t1"));
  }

  void TearDown() override {
    if (driver_) {
      EXPECT_TRUE(driver_->detach());
    }
  }

  test::scratch_dir scratch_;
  rootfs_options options_;
  std::unique_ptr<overlay_driver> driver_;
};

TEST_F(overlay_driver_test, a_template_is_visible_only_once_sealed) {
  auto staging = driver_->create_template("t2");
  ASSERT_TRUE(staging);
  EXPECT_FALSE(driver_->has_template("t2"));
  EXPECT_EQ(*driver_->list_templates(), std::vector<std::string>{"t1"});
  ASSERT_TRUE(driver_->seal_template("t2"));
  EXPECT_TRUE(driver_->has_template("t2"));
  EXPECT_EQ(driver_->create_template("t2").code(), errc::already_exists);
  struct stat st {};
  ASSERT_EQ(::stat(driver_->root().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

TEST_F(overlay_driver_test, sandboxes_are_overlays_independent_of_the_template_and_each_other) {
  auto a = driver_->create_sandbox("a", "t1", 0);
  auto b = driver_->create_sandbox("b", "t1", 0);
  ASSERT_TRUE(a) << a.error().message;
  ASSERT_TRUE(b) << b.error().message;
  EXPECT_TRUE(is_mount_point(*a));
  ASSERT_TRUE(write_file(*a / "data" / "file", "changed in a\n"));
  ASSERT_EQ(::unlink((*a / "data" / "doomed").c_str()), 0);
  EXPECT_EQ(contents(*b / "data" / "file"), "original\n");
  EXPECT_TRUE(path_exists(*b / "data" / "doomed"));
  EXPECT_EQ(contents(*driver_->template_path("t1") / "data" / "file"), "original\n");
  EXPECT_EQ(driver_->create_sandbox("a", "t1", 0).code(), errc::already_exists);
  EXPECT_EQ(driver_->create_sandbox("c", "missing", 0).code(), errc::not_found);
  EXPECT_EQ(*driver_->list_sandboxes(), (std::vector<std::string>{"a", "b"}));
  auto usage = driver_->usage("a");
  ASSERT_TRUE(usage);
  EXPECT_GT(usage->referenced_bytes, 0u);
  EXPECT_EQ(usage->limit_bytes, 0u);
}

TEST_F(overlay_driver_test, refuses_a_disk_limit_it_cannot_enforce_unless_told_to_ignore_it) {
  auto limited = driver_->create_sandbox("s1", "t1", 1024);
  ASSERT_FALSE(limited);
  EXPECT_EQ(limited.code(), errc::invalid_argument);
  EXPECT_NE(limited.error().message.find("cannot enforce a disk limit"), std::string::npos);
  EXPECT_TRUE(driver_->list_sandboxes()->empty());
  options_.overlay_ignore_disk_limit = true;
  auto lenient = overlay_driver::open(options_);
  ASSERT_TRUE(lenient);
  EXPECT_TRUE((*lenient)->create_sandbox("s1", "t1", 1024));
}

TEST_F(overlay_driver_test, a_checkpoint_keeps_the_state_of_its_moment_and_forks_diverge) {
  auto sandbox = driver_->create_sandbox("s1", "t1", 0);
  ASSERT_TRUE(sandbox);
  ASSERT_TRUE(write_file(*sandbox / "data" / "file", "at checkpoint\n"));
  ASSERT_EQ(::unlink((*sandbox / "data" / "doomed").c_str()), 0);
  auto checkpointed = driver_->checkpoint("s1", "c1");
  ASSERT_TRUE(checkpointed) << checkpointed.error().message;
  EXPECT_GT(*checkpointed, 0u) << "the changed file takes blocks in the checkpoint";
  ASSERT_TRUE(write_file(*sandbox / "data" / "file", "after checkpoint\n"));
  EXPECT_EQ(contents(*driver_->checkpoint_path("c1") / "data" / "file"), "at checkpoint\n");
  auto fork1 = driver_->fork("c1", "f1", 0);
  auto fork2 = driver_->fork("c1", "f2", 0);
  ASSERT_TRUE(fork1) << fork1.error().message;
  ASSERT_TRUE(fork2) << fork2.error().message;
  EXPECT_EQ(contents(*fork1 / "data" / "file"), "at checkpoint\n");
  EXPECT_FALSE(path_exists(*fork1 / "data" / "doomed")) << "the whiteout was not copied";
  ASSERT_TRUE(write_file(*fork1 / "data" / "file", "fork 1\n"));
  EXPECT_EQ(contents(*fork2 / "data" / "file"), "at checkpoint\n");
  EXPECT_EQ(contents(*sandbox / "data" / "file"), "after checkpoint\n");
  // A checkpoint of a fork stacks on the first one.
  ASSERT_TRUE(driver_->checkpoint("f1", "c2"));
  auto grandchild = driver_->fork("c2", "g1", 0);
  ASSERT_TRUE(grandchild) << grandchild.error().message;
  EXPECT_EQ(contents(*grandchild / "data" / "file"), "fork 1\n");
  EXPECT_FALSE(path_exists(*grandchild / "data" / "doomed"));
  EXPECT_EQ(driver_->checkpoint("s1", "c1").code(), errc::already_exists);
}

TEST_F(overlay_driver_test, shared_layers_cannot_be_deleted_while_in_use) {
  ASSERT_TRUE(driver_->create_sandbox("s1", "t1", 0));
  ASSERT_TRUE(driver_->checkpoint("s1", "c1"));
  ASSERT_TRUE(driver_->fork("c1", "f1", 0));
  EXPECT_EQ(driver_->delete_template("t1").code, errc::wrong_state);
  auto in_use = driver_->delete_checkpoint("c1");
  EXPECT_EQ(in_use.code, errc::wrong_state);
  EXPECT_NE(in_use.message.find("f1"), std::string::npos) << in_use.message;
  ASSERT_TRUE(driver_->delete_sandbox("f1"));
  ASSERT_TRUE(driver_->delete_checkpoint("c1"));
  ASSERT_TRUE(driver_->delete_sandbox("s1"));
  EXPECT_TRUE(driver_->delete_sandbox("s1")) << "delete is idempotent";
  ASSERT_TRUE(driver_->delete_template("t1"));
  EXPECT_TRUE(driver_->list_sandboxes()->empty());
  EXPECT_TRUE(driver_->list_checkpoints()->empty());
  EXPECT_TRUE(list_dir(driver_->templates_dir())->empty());
}

TEST_F(overlay_driver_test, a_restarted_driver_finds_sandboxes_and_remounts_them) {
  auto sandbox = driver_->create_sandbox("left_behind", "t1", 0);
  ASSERT_TRUE(sandbox);
  ASSERT_TRUE(write_file(*sandbox / "marker", "still here\n"));
  ASSERT_TRUE(driver_->detach());
  EXPECT_FALSE(is_mount_point(*sandbox));
  auto again = overlay_driver::open(options_);
  ASSERT_TRUE(again);
  EXPECT_EQ(*(*again)->list_sandboxes(), std::vector<std::string>{"left_behind"});
  auto path = (*again)->sandbox_path("left_behind");
  ASSERT_TRUE(path) << path.error().message;
  EXPECT_TRUE(is_mount_point(*path));
  EXPECT_EQ(contents(*path / "marker"), "still here\n");
  EXPECT_EQ(contents(*path / "data" / "file"), "original\n");
  EXPECT_EQ((*again)->sandbox_path("missing").code(), errc::not_found);
}

TEST_F(overlay_driver_test, make_rootfs_driver_stays_with_existing_overlay_data) {
  rootfs_options options = options_;
  options.kind = rootfs_kind::automatic;
  auto driver = make_rootfs_driver(options);
  ASSERT_TRUE(driver) << driver.error().message;
  EXPECT_EQ((*driver)->kind(), "overlay");
  EXPECT_TRUE((*driver)->has_template("t1"));
}

} // namespace
} // namespace airlock::worker
