#include "crypto/sealed_box.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sys/stat.h>

namespace airlock::crypto {
namespace {

const std::string key_a(32, 'a');
const std::string key_b(32, 'b');

TEST(sealed_box, opens_what_it_sealed_and_never_shows_the_plaintext) {
  auto sealed = seal(key_a, "sk-secret", "cred_1");
  ASSERT_TRUE(sealed) << sealed.error().message;
  EXPECT_EQ(sealed->size(), sealed_nonce_bytes + 9 + sealed_tag_bytes);
  EXPECT_EQ(sealed->find("sk-secret"), std::string::npos);
  auto opened = open(key_a, *sealed, "cred_1");
  ASSERT_TRUE(opened) << opened.error().message;
  EXPECT_EQ(*opened, "sk-secret");
}

TEST(sealed_box, two_seals_of_one_secret_differ_by_their_nonce) {
  EXPECT_NE(*seal(key_a, "same", ""), *seal(key_a, "same", ""));
}

TEST(sealed_box, refuses_a_tampered_value_another_key_or_other_associated_data) {
  auto sealed = *seal(key_a, "sk-secret", "cred_1");
  for (size_t at : {size_t{0}, sealed_nonce_bytes, sealed.size() - 1}) {
    auto flipped = sealed;
    flipped[at] = static_cast<char>(flipped[at] ^ 1);
    EXPECT_EQ(open(key_a, flipped, "cred_1").code(), errc::corrupt_record) << at;
  }
  EXPECT_EQ(open(key_b, sealed, "cred_1").code(), errc::corrupt_record);
  EXPECT_EQ(open(key_a, sealed, "cred_2").code(), errc::corrupt_record);
  EXPECT_EQ(open(key_a, sealed.substr(0, 20), "cred_1").code(), errc::corrupt_record);
  EXPECT_EQ(seal("short", "x", "").code(), errc::invalid_argument);
}

class key_file_test : public ::testing::Test {
protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir())
           / ("sealed_box_" + std::to_string(::getpid()) + "_"
              + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "credentials.key").string();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::filesystem::path dir_;
  std::string path_;
};

TEST_F(key_file_test, creates_a_0600_key_once_and_loads_the_same_key_later) {
  auto first = load_or_create_key_file(path_);
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_EQ(first->size(), sealed_key_bytes);
  struct stat info {};
  ASSERT_EQ(::stat(path_.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
  auto again = load_or_create_key_file(path_);
  ASSERT_TRUE(again);
  EXPECT_EQ(*again, *first);
  EXPECT_FALSE(std::filesystem::exists(path_ + ".tmp"));
}

TEST_F(key_file_test, refuses_a_key_file_others_may_read) {
  ASSERT_TRUE(load_or_create_key_file(path_));
  ASSERT_EQ(::chmod(path_.c_str(), 0644), 0);
  EXPECT_EQ(load_or_create_key_file(path_).code(), errc::permission_denied);
}

TEST_F(key_file_test, refuses_a_key_file_of_the_wrong_size) {
  {
    std::ofstream out(path_);
    out << "too short";
  }
  ASSERT_EQ(::chmod(path_.c_str(), 0600), 0);
  EXPECT_EQ(load_or_create_key_file(path_).code(), errc::corrupt_record);
}

} // namespace
} // namespace airlock::crypto
