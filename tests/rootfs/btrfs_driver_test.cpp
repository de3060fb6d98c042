// The btrfs driver on a loop-mounted image in a scratch directory: templates,
// sandboxes, checkpoints, forks, qgroup limits, nested subvolumes, restart and
// detach. Needs root, btrfs and loop devices; skipped with the reason if not.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "tests/rootfs/test_support.hpp"
#include "worker/rootfs/btrfs_driver.hpp"
#include "worker/rootfs/btrfs_ops.hpp"
#include "worker/rootfs/fs_util.hpp"
#include "worker/rootfs/loop_image.hpp"

namespace airlock::worker {
namespace {

std::string contents(const std::filesystem::path& path) {
  auto text = read_file(path);
  return text ? *text : "<" + text.error().message + ">";
}

// errno of creating a file, 0 on success.
int create_errno(const std::filesystem::path& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    return errno;
  ::close(fd);
  return 0;
}

class btrfs_driver_test : public ::testing::Test {
protected:
  void SetUp() override {
    if (auto reason = test::btrfs_unavailable_reason())
      GTEST_SKIP() << *reason;
    options_.data_dir = scratch_.path() / "data";
    options_.kind = rootfs_kind::btrfs;
    options_.image_size_mb = 512;
    auto opened = btrfs_driver::open(options_);
    ASSERT_TRUE(opened) << opened.error().message;
    driver_ = std::move(*opened);
  }

  void TearDown() override {
    if (!driver_)
      return;
    auto image = driver_->image_path();
    EXPECT_TRUE(driver_->detach()) << "detach failed";
    driver_.reset();
    EXPECT_EQ(find_loop_device(image), std::nullopt) << "the loop device was not detached";
  }

  // A sealed template with /etc/os-release and /data/file.
  void make_template(std::string_view name) {
    auto staging = driver_->create_template(name);
    ASSERT_TRUE(staging) << staging.error().message;
    ASSERT_TRUE(make_dirs(*staging / "etc"));
    ASSERT_TRUE(make_dirs(*staging / "data"));
    ASSERT_TRUE(write_file(*staging / "etc" / "os-release", "template\n"));
    ASSERT_TRUE(write_file(*staging / "data" / "file", "original\n"));
    auto sealed = driver_->seal_template(name);
    ASSERT_TRUE(sealed) << sealed.message;
  }

  test::scratch_dir scratch_;
  rootfs_options options_;
  std::unique_ptr<btrfs_driver> driver_;
};

TEST_F(btrfs_driver_test, creates_a_sparse_image_once_and_mounts_it_on_a_loop_device) {
  EXPECT_TRUE(driver_->uses_image());
  EXPECT_TRUE(driver_->created_image());
  EXPECT_TRUE(driver_->mounted_image());
  EXPECT_TRUE(is_on_btrfs(driver_->root()));
  EXPECT_NE(find_loop_device(driver_->image_path()), std::nullopt);
  struct stat st {};
  ASSERT_EQ(::stat(driver_->image_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 512 << 20);
  EXPECT_LT(st.st_blocks * 512, st.st_size / 4) << "the image should be sparse";
  ASSERT_EQ(::stat(driver_->root().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u) << "other host users must not reach sandbox trees";
}

TEST_F(btrfs_driver_test, a_sealed_template_is_read_only_and_only_then_visible) {
  auto staging = driver_->create_template("t1");
  ASSERT_TRUE(staging) << staging.error().message;
  EXPECT_FALSE(driver_->has_template("t1"));
  EXPECT_TRUE(driver_->list_templates()->empty());
  EXPECT_EQ(driver_->create_sandbox("s1", "t1", 0).code(), errc::not_found);
  ASSERT_TRUE(write_file(*staging / "file", "x"));
  ASSERT_TRUE(driver_->seal_template("t1"));
  EXPECT_TRUE(driver_->has_template("t1"));
  EXPECT_EQ(*driver_->list_templates(), std::vector<std::string>{"t1"});
  auto path = driver_->template_path("t1");
  ASSERT_TRUE(path);
  EXPECT_EQ(create_errno(*path / "new"), EROFS);
  EXPECT_EQ(create_errno(*path / "file"), EROFS);
  EXPECT_EQ(driver_->create_template("t1").code(), errc::already_exists);
  EXPECT_EQ(driver_->seal_template("t1").code, errc::not_found);
}

TEST_F(btrfs_driver_test, a_new_build_discards_a_leftover_staging_tree) {
  auto first = driver_->create_template("t1");
  ASSERT_TRUE(first);
  ASSERT_TRUE(write_file(*first / "half-done", "x"));
  auto second = driver_->create_template("t1");
  ASSERT_TRUE(second) << second.error().message;
  EXPECT_FALSE(path_exists(*second / "half-done"));
  ASSERT_TRUE(driver_->delete_template("t1"));
  EXPECT_TRUE(list_dir(driver_->templates_dir())->empty());
}

TEST_F(btrfs_driver_test, sandboxes_are_writable_and_independent_of_the_template_and_each_other) {
  make_template("t1");
  auto a = driver_->create_sandbox("a", "t1", 0);
  auto b = driver_->create_sandbox("b", "t1", 0);
  ASSERT_TRUE(a) << a.error().message;
  ASSERT_TRUE(b) << b.error().message;
  EXPECT_TRUE(is_btrfs_subvolume(*a));
  ASSERT_TRUE(write_file(*a / "data" / "file", "changed in a\n"));
  ASSERT_TRUE(write_file(*a / "only-in-a", "a\n"));
  EXPECT_EQ(contents(*b / "data" / "file"), "original\n");
  EXPECT_FALSE(path_exists(*b / "only-in-a"));
  EXPECT_EQ(contents(*driver_->template_path("t1") / "data" / "file"), "original\n");
  EXPECT_EQ(driver_->create_sandbox("a", "t1", 0).code(), errc::already_exists);
  EXPECT_EQ(driver_->create_sandbox("c", "missing", 0).code(), errc::not_found);
  EXPECT_EQ(driver_->create_sandbox("../c", "t1", 0).code(), errc::invalid_argument);
  EXPECT_EQ(*driver_->list_sandboxes(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(*driver_->sandbox_path("a"), *a);
}

TEST_F(btrfs_driver_test, a_checkpoint_is_read_only_and_keeps_the_state_of_its_moment) {
  make_template("t1");
  auto sandbox = driver_->create_sandbox("s1", "t1", 0);
  ASSERT_TRUE(sandbox);
  ASSERT_TRUE(write_file(*sandbox / "data" / "file", "at checkpoint\n"));
  ASSERT_TRUE(write_file(*sandbox / "data" / "blob", std::string(3u << 20, 'x')));
  auto size = driver_->checkpoint("s1", "c1");
  ASSERT_TRUE(size) << size.error().message;
  // Its size is what the sandbox wrote beyond the template: the 3 MiB blob,
  // not the template's files and not a rounding of nothing.
  EXPECT_GE(*size, uint64_t{3} << 20);
  EXPECT_LT(*size, uint64_t{8} << 20);
  ASSERT_TRUE(write_file(*sandbox / "data" / "file", "after checkpoint\n"));
  auto checkpoint = driver_->checkpoint_path("c1");
  ASSERT_TRUE(checkpoint);
  EXPECT_EQ(contents(*checkpoint / "data" / "file"), "at checkpoint\n");
  EXPECT_EQ(create_errno(*checkpoint / "new"), EROFS);
  EXPECT_EQ(driver_->checkpoint("s1", "c1").code(), errc::already_exists);
  EXPECT_EQ(driver_->checkpoint("missing", "c2").code(), errc::not_found);
  EXPECT_EQ(*driver_->list_checkpoints(), std::vector<std::string>{"c1"});
}

TEST_F(btrfs_driver_test, a_fork_starts_from_the_checkpoint_and_diverges) {
  make_template("t1");
  auto sandbox = driver_->create_sandbox("s1", "t1", 0);
  ASSERT_TRUE(sandbox);
  ASSERT_TRUE(write_file(*sandbox / "data" / "file", "at checkpoint\n"));
  ASSERT_TRUE(driver_->checkpoint("s1", "c1"));
  ASSERT_TRUE(write_file(*sandbox / "data" / "file", "parent moved on\n"));
  auto fork1 = driver_->fork("c1", "f1", 0);
  auto fork2 = driver_->fork("c1", "f2", 0);
  ASSERT_TRUE(fork1) << fork1.error().message;
  ASSERT_TRUE(fork2) << fork2.error().message;
  EXPECT_EQ(contents(*fork1 / "data" / "file"), "at checkpoint\n");
  ASSERT_TRUE(write_file(*fork1 / "data" / "file", "fork 1\n"));
  EXPECT_EQ(contents(*fork2 / "data" / "file"), "at checkpoint\n");
  EXPECT_EQ(contents(*driver_->checkpoint_path("c1") / "data" / "file"), "at checkpoint\n");
  EXPECT_EQ(contents(*sandbox / "data" / "file"), "parent moved on\n");
  EXPECT_EQ(driver_->fork("missing", "f3", 0).code(), errc::not_found);
  // A checkpoint outlives the sandbox it came from, and its forks outlive it.
  ASSERT_TRUE(driver_->delete_sandbox("s1"));
  ASSERT_TRUE(driver_->delete_checkpoint("c1"));
  EXPECT_EQ(contents(*fork2 / "data" / "file"), "at checkpoint\n");
}

TEST_F(btrfs_driver_test, writing_past_the_disk_limit_fails_with_edquot) {
  make_template("t1");
  auto sandbox = driver_->create_sandbox("s1", "t1", 32);
  ASSERT_TRUE(sandbox) << sandbox.error().message;
  int fd = ::open((*sandbox / "fill").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  std::vector<char> block(1 << 20, 'x');
  int error = 0;
  size_t written_mb = 0;
  for (; written_mb < 128 && error == 0; ++written_mb) {
    // Near the limit a write is cut short; the next one reports why.
    for (size_t done = 0; done < block.size() && error == 0;) {
      auto n = ::write(fd, block.data() + done, block.size() - done);
      if (n < 0)
        error = errno;
      else
        done += static_cast<size_t>(n);
    }
    if (error == 0 && written_mb % 8 == 7 && ::fsync(fd) != 0)
      error = errno;
  }
  if (error == 0 && ::fsync(fd) != 0)
    error = errno;
  ::close(fd);
  EXPECT_EQ(error, EDQUOT) << "wrote " << written_mb << " MiB into a 32 MiB sandbox";
  EXPECT_LE(written_mb, 40u);
  auto usage = driver_->usage("s1");
  ASSERT_TRUE(usage) << usage.error().message;
  EXPECT_EQ(usage->limit_bytes, 32u << 20);
  EXPECT_GT(usage->referenced_bytes, 16u << 20);
  EXPECT_LE(usage->referenced_bytes, 33u << 20);
  // Another sandbox from the same template still has its own room.
  auto other = driver_->create_sandbox("s2", "t1", 32);
  ASSERT_TRUE(other);
  EXPECT_TRUE(write_file(*other / "small", std::string(1 << 20, 'y')));
  auto room = driver_->usage("s2");
  ASSERT_TRUE(room);
  EXPECT_LT(room->referenced_bytes, 8u << 20);
}

TEST_F(btrfs_driver_test, delete_removes_sandboxes_with_nested_and_read_only_subvolumes) {
  make_template("t1");
  auto sandbox = driver_->create_sandbox("s1", "t1", 0);
  ASSERT_TRUE(sandbox);
  // What a sandbox's root can do on its own: create subvolumes, snapshot them.
  ASSERT_TRUE(btrfs_create_subvolume(*sandbox / "data", "inner"));
  ASSERT_TRUE(btrfs_create_subvolume(*sandbox / "data" / "inner", "deeper"));
  ASSERT_TRUE(write_file(*sandbox / "data" / "inner" / "deeper" / "f", "x"));
  // A read-only subvolume with one nested inside must be made writable to empty it.
  ASSERT_TRUE(btrfs_set_read_only(*sandbox / "data" / "inner", true));
  ASSERT_TRUE(btrfs_snapshot(*sandbox / "data" / "inner", *sandbox, "frozen", true));
  ASSERT_TRUE(driver_->checkpoint("s1", "c1"));
  auto deleted = driver_->delete_sandbox("s1");
  ASSERT_TRUE(deleted) << deleted.message;
  EXPECT_FALSE(path_exists(*sandbox));
  EXPECT_TRUE(driver_->list_sandboxes()->empty());
  EXPECT_TRUE(driver_->delete_sandbox("s1")) << "delete is idempotent";
  ASSERT_TRUE(driver_->delete_checkpoint("c1"));
  EXPECT_TRUE(driver_->list_checkpoints()->empty());
  ASSERT_TRUE(driver_->delete_template("t1"));
  EXPECT_FALSE(driver_->has_template("t1"));
}

TEST_F(btrfs_driver_test, a_restarted_driver_reuses_the_image_and_finds_leftover_sandboxes) {
  make_template("t1");
  auto sandbox = driver_->create_sandbox("left_behind", "t1", 0);
  ASSERT_TRUE(sandbox);
  ASSERT_TRUE(write_file(*sandbox / "marker", "still here\n"));
  // A worker restart: a new driver while the image is still mounted.
  auto again = btrfs_driver::open(options_);
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_FALSE((*again)->created_image());
  EXPECT_FALSE((*again)->mounted_image());
  EXPECT_EQ(*(*again)->list_sandboxes(), std::vector<std::string>{"left_behind"});
  // A host reboot: nothing mounted; the same image comes back, not a new one.
  ASSERT_TRUE((*again)->detach());
  EXPECT_EQ(find_loop_device(driver_->image_path()), std::nullopt);
  auto rebooted = btrfs_driver::open(options_);
  ASSERT_TRUE(rebooted) << rebooted.error().message;
  EXPECT_FALSE((*rebooted)->created_image());
  EXPECT_TRUE((*rebooted)->mounted_image());
  EXPECT_EQ(contents(*(*rebooted)->sandbox_path("left_behind") / "marker"), "still here\n");
  EXPECT_TRUE((*rebooted)->has_template("t1"));
  driver_ = std::move(*rebooted);
}

TEST_F(btrfs_driver_test, detach_unmounts_and_frees_the_loop_device) {
  auto device = find_loop_device(driver_->image_path());
  ASSERT_NE(device, std::nullopt);
  ASSERT_TRUE(driver_->detach());
  EXPECT_FALSE(is_on_btrfs(driver_->root()));
  EXPECT_EQ(find_loop_device(driver_->image_path()), std::nullopt);
  auto name = device->substr(std::string("/dev/").size());
  EXPECT_FALSE(path_exists("/sys/block/" + name + "/loop/backing_file"))
    << *device << " still has a backing file";
  EXPECT_TRUE(driver_->detach()) << "detach is idempotent";
}

TEST_F(btrfs_driver_test, make_rootfs_driver_picks_btrfs_by_default) {
  rootfs_options options = options_;
  options.kind = rootfs_kind::automatic;
  auto driver = make_rootfs_driver(options);
  ASSERT_TRUE(driver) << driver.error().message;
  EXPECT_EQ((*driver)->kind(), "btrfs");
}

TEST_F(btrfs_driver_test, a_data_dir_already_on_btrfs_is_used_natively_without_an_image) {
  rootfs_options native = options_;
  native.data_dir = driver_->root() / "native";
  auto opened = btrfs_driver::open(native);
  ASSERT_TRUE(opened) << opened.error().message;
  auto& driver = **opened;
  EXPECT_FALSE(driver.uses_image());
  EXPECT_FALSE(path_exists(native.data_dir / "rootfs.img"));
  auto staging = driver.create_template("t1");
  ASSERT_TRUE(staging) << staging.error().message;
  ASSERT_TRUE(driver.seal_template("t1"));
  auto sandbox = driver.create_sandbox("s1", "t1", 16);
  ASSERT_TRUE(sandbox) << sandbox.error().message;
  EXPECT_TRUE(is_btrfs_subvolume(*sandbox));
  auto usage = driver.usage("s1");
  ASSERT_TRUE(usage) << usage.error().message;
  EXPECT_EQ(usage->limit_bytes, 16u << 20);
  EXPECT_TRUE(driver.detach()) << "nothing to detach on native btrfs";
  ASSERT_TRUE(driver.delete_sandbox("s1"));
  ASSERT_TRUE(driver.delete_template("t1"));
}

TEST(make_rootfs_driver, falls_back_to_overlay_when_btrfs_cannot_be_had) {
  if (auto reason = test::overlay_unavailable_reason())
    GTEST_SKIP() << *reason;
  test::scratch_dir scratch;
  rootfs_options options;
  options.data_dir = scratch.path() / "data";
  options.mkfs_btrfs = "/nonexistent/mkfs.btrfs"; // as on a host without btrfs-progs
  options.image_size_mb = 512;
  options.kind = rootfs_kind::btrfs;
  auto forced = make_rootfs_driver(options);
  ASSERT_FALSE(forced);
  EXPECT_EQ(forced.code(), errc::unavailable) << forced.error().message;
  EXPECT_FALSE(path_exists(options.data_dir / "rootfs.img"));
  options.kind = rootfs_kind::automatic;
  auto driver = make_rootfs_driver(options);
  ASSERT_TRUE(driver) << driver.error().message;
  EXPECT_EQ((*driver)->kind(), "overlay");
}

} // namespace
} // namespace airlock::worker
