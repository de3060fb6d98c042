#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "guest/files.hpp"

namespace airlock::guest {
namespace {

namespace fs = std::filesystem;

class files : public ::testing::Test {
protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "airlock-files-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return dir_ + "/" + name; }

  static void put(const std::string& file, const std::string& text) { std::ofstream(file) << text; }

  std::string dir_;
};

TEST(check_path, accepts_absolute_paths_and_refuses_the_rest) {
  EXPECT_TRUE(check_path("/", 10).is_ok());
  EXPECT_TRUE(check_path("/a/../b", 10).is_ok()) << "resolved inside the sandbox's own root";
  EXPECT_EQ(check_path("", 10).code, errc::invalid_argument);
  EXPECT_EQ(check_path("a/b", 10).code, errc::invalid_argument);
  EXPECT_EQ(check_path(std::string_view("/a\0b", 4), 10).code, errc::invalid_argument);
  EXPECT_EQ(check_path("/0123456789", 10).code, errc::invalid_argument);
}

TEST_F(files, an_aborted_write_leaves_neither_file_nor_temporary) {
  {
    auto writer = atomic_writer::begin(path("f"), 0600, false, 1);
    ASSERT_TRUE(writer);
    ASSERT_TRUE(writer->write("partial").is_ok());
  } // destroyed without commit
  EXPECT_TRUE(fs::is_empty(dir_));
}

TEST_F(files, a_committed_write_replaces_a_symlink_instead_of_following_it) {
  auto outside = path("outside");
  put(outside, "precious");
  fs::create_symlink(outside, path("link"));
  auto writer = atomic_writer::begin(path("link"), 0644, false, 2);
  ASSERT_TRUE(writer);
  ASSERT_TRUE(writer->write("new").is_ok());
  ASSERT_TRUE(writer->commit().is_ok());
  EXPECT_FALSE(fs::is_symlink(path("link")));
  std::ifstream in(outside);
  std::string text;
  in >> text;
  EXPECT_EQ(text, "precious");
}

TEST_F(files, recursive_remove_does_not_follow_symlinks_out_of_the_tree) {
  fs::create_directories(path("keep"));
  put(path("keep/file"), "x");
  fs::create_directories(path("tree/sub"));
  put(path("tree/sub/f"), "y");
  fs::create_directory_symlink(path("keep"), path("tree/sub/link"));
  ASSERT_TRUE(remove_path(path("tree"), true, 16).is_ok());
  EXPECT_FALSE(fs::exists(path("tree")));
  EXPECT_TRUE(fs::exists(path("keep/file")));
}

TEST_F(files, recursive_remove_stops_at_its_depth_limit) {
  fs::create_directories(path("d/1/2/3/4"));
  EXPECT_EQ(remove_path(path("d"), true, 2).code, errc::resource_exhausted);
  EXPECT_TRUE(remove_path(path("d"), true, 16).is_ok());
}

TEST_F(files, listing_is_sorted_and_truncated_at_its_limit) {
  for (auto name : {"c", "a", "b"})
    put(path(name), name);
  auto all = list_dir(dir_, 10, 1000);
  ASSERT_TRUE(all);
  ASSERT_EQ(all->entries.size(), 3u);
  EXPECT_EQ(all->entries[0].name, "a");
  EXPECT_EQ(all->entries[2].name, "c");
  EXPECT_FALSE(all->truncated);
  auto two = list_dir(dir_, 2, 1000);
  ASSERT_TRUE(two);
  EXPECT_EQ(two->entries.size(), 2u);
  EXPECT_TRUE(two->truncated);
}

TEST_F(files, stat_and_list_name_owners_and_give_symlink_targets_absolute) {
  put(path("file"), "x");
  fs::create_directories(path("dir"));
  fs::create_symlink("file", path("rel"));
  fs::create_symlink(path("dir"), path("abs"));
  fs::create_symlink("rel", path("chain"));
  fs::create_symlink("gone", path("dangling"));
  // Names from this host's /etc/passwd and /etc/group (the agent's own root).
  const auto names = id_names::read();
  auto file = stat_path(path("file"), false);
  ASSERT_TRUE(file);
  EXPECT_EQ(file->owner, names.user(::getuid()));
  EXPECT_EQ(file->group, names.group(::getgid()));
  EXPECT_EQ(file->symlink_target, "");
  EXPECT_EQ(names.user(4'000'000'000u), "4000000000") << "no name: the id as text";
  auto rel = stat_path(path("rel"), false);
  ASSERT_TRUE(rel);
  EXPECT_EQ(rel->type, file_type::symlink);
  // The temp dir may itself sit behind a symlink: compare with the resolved path.
  const std::string real_dir = fs::canonical(dir_).string();
  EXPECT_EQ(rel->symlink_target, real_dir + "/file");
  auto listing = list_dir(dir_, 10, 10'000);
  ASSERT_TRUE(listing);
  std::map<std::string, file_info> by_name;
  for (const auto& entry : listing->entries)
    by_name[entry.name] = entry;
  EXPECT_EQ(by_name["abs"].symlink_target, real_dir + "/dir");
  EXPECT_EQ(by_name["chain"].symlink_target, real_dir + "/file");
  EXPECT_EQ(by_name["dangling"].symlink_target, dir_ + "/gone");
  EXPECT_EQ(by_name["dir"].symlink_target, "");
  EXPECT_FALSE(by_name["dir"].owner.empty());
  // The owner, group and target texts count against the reply budget.
  auto small = list_dir(dir_, 10, 12);
  ASSERT_TRUE(small);
  EXPECT_TRUE(small->truncated);
  EXPECT_LT(small->entries.size(), listing->entries.size());
}

TEST_F(files, mkdir_p_refuses_a_file_in_the_way) {
  put(path("file"), "x");
  EXPECT_EQ(make_dirs(path("file/sub"), 0755, true).code, errc::invalid_argument);
  EXPECT_TRUE(make_dirs(path("a/b/c"), 0700, true).is_ok());
  struct stat st {};
  ASSERT_EQ(::stat(path("a/b/c").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
}

TEST_F(files, reads_are_refused_for_anything_but_regular_files) {
  EXPECT_EQ(open_for_read(dir_).code(), errc::invalid_argument);
  EXPECT_EQ(open_for_read("/dev/zero").code(), errc::invalid_argument);
  EXPECT_EQ(open_for_read(path("missing")).code(), errc::not_found);
}

} // namespace
} // namespace airlock::guest
