// The first admin key: its shape, its stored hash, that it is created once,
// and the CLI config file it is written to.

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <string>

#include <nlohmann/json.hpp>

#include "airlockd/admin_key.hpp"
#include "storage/kv_store.hpp"
#include "storage/sandbox_store.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/host.hpp"
#include "tests/support/http_client.hpp"

namespace airlock::airlockd {
namespace {

std::string hex(const std::string& bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 0xf];
  }
  return out;
}

mode_t mode_of(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

TEST(admin_key, has_the_documented_shape_and_differs_each_time) {
  auto first = generate_api_key();
  auto second = generate_api_key();
  ASSERT_TRUE(first.has_value());
  ASSERT_TRUE(second.has_value());
  EXPECT_TRUE(test::is_api_key(first->text())) << first->text();
  EXPECT_NE(first->text(), second->text());
}

TEST(admin_key, sha256_matches_the_standard_test_vector) {
  EXPECT_EQ(hex(sha256("abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(admin_key, bootstrap_creates_one_admin_key_and_stores_only_its_hash) {
  test::temp_dir dir;
  auto store = storage::make_memory_store();
  std::string cli = dir.path() + "/cli/config.json";
  auto created = bootstrap_admin_key(*store, cli, "http://127.0.0.1:7070", 1234);
  ASSERT_TRUE(created.has_value()) << created.error().message;
  ASSERT_TRUE(created->has_value());
  std::string key = **created;

  std::string key_id = key.substr(3, 16);
  auto record = storage::api_key_store(*store).get(key_id);
  ASSERT_TRUE(record.has_value());
  ASSERT_TRUE(record->has_value());
  EXPECT_EQ((*record)->secret_sha256, sha256(key));
  EXPECT_EQ((*record)->role, schema::api_key_role::admin);
  EXPECT_EQ((*record)->tenant_id, "admin");
  EXPECT_EQ((*record)->created_at_ms, 1234);
  EXPECT_FALSE((*record)->revoked);

  auto again = bootstrap_admin_key(*store, cli, "http://127.0.0.1:7070", 5678);
  ASSERT_TRUE(again.has_value());
  EXPECT_FALSE(again->has_value()) << "a second start must not create another key";
  EXPECT_EQ(nlohmann::json::parse(test::read_file(cli))["api_key"], key);
}

TEST(admin_key, cli_config_is_private_and_keeps_other_settings) {
  test::temp_dir dir;
  std::string parent = dir.path() + "/new";
  std::string cli = parent + "/config.json";
  ASSERT_TRUE(write_cli_config(cli, "http://a:1", "ak_1").is_ok());
  EXPECT_EQ(mode_of(parent), 0700u);
  EXPECT_EQ(mode_of(cli), 0600u);

  auto config = nlohmann::json::parse(test::read_file(cli));
  config["editor"] = "vi";
  test::write_file(cli, config.dump());
  ::chmod(cli.c_str(), 0644);
  ASSERT_TRUE(write_cli_config(cli, "http://b:2", "ak_2").is_ok());
  config = nlohmann::json::parse(test::read_file(cli));
  EXPECT_EQ(config["url"], "http://b:2");
  EXPECT_EQ(config["api_key"], "ak_2");
  EXPECT_EQ(config["editor"], "vi");
  EXPECT_EQ(mode_of(cli), 0600u);
}

TEST(admin_key, cli_config_write_failure_is_an_io_error) {
  test::temp_dir dir;
  test::write_file(dir.path() + "/file", "x");
  auto written = write_cli_config(dir.path() + "/file/config.json", "http://a:1", "ak_1");
  EXPECT_EQ(written.code, errc::io_error);
}

} // namespace
} // namespace airlock::airlockd
