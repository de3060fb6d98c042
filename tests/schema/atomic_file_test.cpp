// write_file_atomically (schema/atomic_file.hpp): the bytes and the mode of
// the file it leaves, replacing or keeping an existing file, and that a
// failure leaves neither a temporary file nor a damaged old file.
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "schema/atomic_file.hpp"

namespace airlock {
namespace {

class atomic_file_test : public ::testing::Test {
protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir())
           / ("atomic_file_" + std::to_string(::getpid()) + "_"
              + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "file").string();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  static std::string content_of(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
  }

  static mode_t mode_of(const std::string& path) {
    struct stat info {};
    EXPECT_EQ(::stat(path.c_str(), &info), 0);
    return info.st_mode & 07777;
  }

  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& entry : std::filesystem::directory_iterator(dir_))
      out.push_back(entry.path().filename().string());
    return out;
  }

  std::filesystem::path dir_;
  std::string path_;
};

/// Sets the umask for one test and restores it.
class umask_guard {
public:
  explicit umask_guard(mode_t mask) : old_(::umask(mask)) {}
  ~umask_guard() { ::umask(old_); }
  umask_guard(const umask_guard&) = delete;
  umask_guard& operator=(const umask_guard&) = delete;

private:
  mode_t old_;
};

/// Limits the size of files this process may write (root included), so that a
/// write fails with EFBIG; restores the limit and SIGXFSZ afterwards.
class file_size_limit {
public:
  explicit file_size_limit(rlim_t bytes) {
    ::getrlimit(RLIMIT_FSIZE, &old_);
    old_handler_ = ::signal(SIGXFSZ, SIG_IGN);
    rlimit limit = old_;
    limit.rlim_cur = bytes;
    ::setrlimit(RLIMIT_FSIZE, &limit);
  }
  ~file_size_limit() {
    ::setrlimit(RLIMIT_FSIZE, &old_);
    ::signal(SIGXFSZ, old_handler_);
  }
  file_size_limit(const file_size_limit&) = delete;
  file_size_limit& operator=(const file_size_limit&) = delete;

private:
  rlimit old_{};
  sighandler_t old_handler_ = SIG_DFL;
};

TEST_F(atomic_file_test, writes_the_bytes_with_the_mode_and_leaves_no_temporary_file) {
  umask_guard mask(0);
  std::string bytes("binary\0bytes\n", 13);
  auto written = write_file_atomically(path_, bytes, 0640);
  ASSERT_TRUE(written) << written.message;
  EXPECT_EQ(content_of(path_), bytes);
  EXPECT_EQ(mode_of(path_), 0640u);
  EXPECT_EQ(names(), std::vector<std::string>{"file"});
}

TEST_F(atomic_file_test, a_private_file_is_never_readable_by_others_whatever_the_umask) {
  // With umask 0 a file created with open(..., 0666) and chmod-ed afterwards
  // would be world-readable for a moment; the temporary file starts at 0600
  // and gets its mode before it has the final name.
  umask_guard mask(0);
  ASSERT_TRUE(write_file_atomically(path_, "secret", 0600));
  EXPECT_EQ(mode_of(path_), 0600u);
  EXPECT_EQ(names(), std::vector<std::string>{"file"});
}

TEST_F(atomic_file_test, the_mode_is_exact_even_under_a_strict_umask) {
  umask_guard mask(077);
  ASSERT_TRUE(write_file_atomically(path_, "public", 0644));
  EXPECT_EQ(mode_of(path_), 0644u);
}

TEST_F(atomic_file_test, replaces_an_existing_file_and_its_mode) {
  { std::ofstream(path_) << "old content that is longer"; }
  ASSERT_EQ(::chmod(path_.c_str(), 0644), 0);
  auto written = write_file_atomically(path_, "new", 0600);
  ASSERT_TRUE(written) << written.message;
  EXPECT_EQ(content_of(path_), "new");
  EXPECT_EQ(mode_of(path_), 0600u);
  EXPECT_EQ(names(), std::vector<std::string>{"file"});
}

TEST_F(atomic_file_test, keep_leaves_an_existing_file_and_says_already_exists) {
  { std::ofstream(path_) << "first"; }
  auto written = write_file_atomically(path_, "second", 0600, existing_file::keep);
  EXPECT_EQ(written.code, errc::already_exists);
  EXPECT_EQ(content_of(path_), "first");
  EXPECT_EQ(names(), std::vector<std::string>{"file"});
}

TEST_F(atomic_file_test, keep_creates_a_missing_file) {
  ASSERT_TRUE(write_file_atomically(path_, "only", 0600, existing_file::keep));
  EXPECT_EQ(content_of(path_), "only");
  EXPECT_EQ(mode_of(path_), 0600u);
  EXPECT_EQ(names(), std::vector<std::string>{"file"});
}

TEST_F(atomic_file_test, a_failed_write_leaves_the_old_content_and_no_temporary_file) {
  { std::ofstream(path_) << "old"; }
  status written;
  {
    file_size_limit limit(4); // the new bytes stop after 4: a short write, then EFBIG
    written = write_file_atomically(path_, "much longer new content", 0600);
  }
  EXPECT_FALSE(written);
  EXPECT_EQ(written.code, errc::io_error);
  EXPECT_EQ(content_of(path_), "old");
  EXPECT_EQ(names(), std::vector<std::string>{"file"});
}

TEST_F(atomic_file_test, a_path_that_is_a_directory_fails_and_leaves_no_temporary_file) {
  std::filesystem::create_directory(path_);
  { std::ofstream(path_ + "/inside") << "kept"; }
  auto written = write_file_atomically(path_, "x", 0600);
  EXPECT_FALSE(written);
  EXPECT_TRUE(std::filesystem::is_directory(path_));
  EXPECT_EQ(content_of(path_ + "/inside"), "kept");
  EXPECT_EQ(names(), std::vector<std::string>{"file"});
}

TEST_F(atomic_file_test, a_missing_directory_fails_without_creating_anything) {
  auto written = write_file_atomically((dir_ / "missing" / "file").string(), "x", 0600);
  EXPECT_FALSE(written);
  EXPECT_TRUE(names().empty());
}

TEST_F(atomic_file_test, make_private_directories_creates_missing_parents_with_mode_0700) {
  umask_guard mask(0);
  auto deep = (dir_ / "a" / "b" / "c").string();
  ASSERT_TRUE(make_private_directories(deep));
  EXPECT_EQ(mode_of((dir_ / "a").string()), 0700u);
  EXPECT_EQ(mode_of(deep), 0700u);
  EXPECT_TRUE(make_private_directories(deep)) << "existing directories are fine";
  EXPECT_TRUE(make_private_directories(""));
}

TEST_F(atomic_file_test, make_private_directories_fails_below_a_file) {
  { std::ofstream(path_) << "x"; }
  auto made = make_private_directories(path_ + "/sub");
  EXPECT_EQ(made.code, errc::io_error);
}

} // namespace
} // namespace airlock
