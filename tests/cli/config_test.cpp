// Where the CLI gets its URL and key: flags > environment > config file > default.

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "cli/config.hpp"

namespace airlock::cli {
namespace {

class cli_config : public ::testing::Test {
protected:
  void SetUp() override {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base && *base ? base : "/tmp") + "/cli_config.XXXXXX";
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    env_["HOME"] = dir_;
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  void write(const std::string& path, const std::string& text) {
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    std::ofstream(path) << text;
  }
  std::string home_config() const { return dir_ + "/.config/airlock/config.json"; }

  std::string dir_;
  env_map env_;
};

TEST_F(cli_config, uses_the_default_url_and_no_key_when_nothing_is_set) {
  auto config = resolve_connection({}, env_);
  ASSERT_TRUE(config) << config.error().message;
  EXPECT_EQ(config->url, "http://127.0.0.1:7070");
  EXPECT_TRUE(config->api_key.empty());
  EXPECT_EQ(config->config_path, home_config());
}

TEST_F(cli_config, reads_the_file_airlockd_writes) {
  write(home_config(), R"({"url": "http://10.0.0.1:7070/", "api_key": "ak_file", "other": 1})");
  auto config = resolve_connection({}, env_);
  ASSERT_TRUE(config) << config.error().message;
  EXPECT_EQ(config->url, "http://10.0.0.1:7070");
  EXPECT_EQ(config->api_key, "ak_file");
}

TEST_F(cli_config, prefers_flags_over_environment_over_file) {
  write(home_config(), R"({"url": "http://file:1", "api_key": "ak_file"})");
  env_["AIRLOCK_URL"] = "http://env:2";
  env_["AIRLOCK_API_KEY"] = "ak_env";
  auto from_env = resolve_connection({}, env_);
  ASSERT_TRUE(from_env);
  EXPECT_EQ(from_env->url, "http://env:2");
  EXPECT_EQ(from_env->api_key, "ak_env");

  connection_flags flags;
  flags.url = "http://flag:3";
  auto mixed = resolve_connection(flags, env_);
  ASSERT_TRUE(mixed);
  EXPECT_EQ(mixed->url, "http://flag:3");
  EXPECT_EQ(mixed->api_key, "ak_env"); // each setting on its own

  env_["AIRLOCK_API_KEY"] = ""; // empty counts as unset
  auto empty = resolve_connection(flags, env_);
  ASSERT_TRUE(empty);
  EXPECT_EQ(empty->api_key, "ak_file");
}

TEST_F(cli_config, finds_the_file_by_flag_then_variable_then_xdg_then_home) {
  write(dir_ + "/flag.json", R"({"api_key": "ak_flag"})");
  write(dir_ + "/var.json", R"({"api_key": "ak_var"})");
  write(dir_ + "/xdg/airlock/config.json", R"({"api_key": "ak_xdg"})");
  write(home_config(), R"({"api_key": "ak_home"})");
  EXPECT_EQ(resolve_connection({}, env_)->api_key, "ak_home");
  env_["XDG_CONFIG_HOME"] = dir_ + "/xdg";
  EXPECT_EQ(resolve_connection({}, env_)->api_key, "ak_xdg");
  env_["AIRLOCK_CLI_CONFIG"] = dir_ + "/var.json";
  EXPECT_EQ(resolve_connection({}, env_)->api_key, "ak_var");
  connection_flags flags;
  flags.config_path = dir_ + "/flag.json";
  EXPECT_EQ(resolve_connection(flags, env_)->api_key, "ak_flag");
}

TEST_F(cli_config, rejects_a_bad_file_and_a_named_file_that_is_missing) {
  write(home_config(), "{not json");
  auto bad = resolve_connection({}, env_);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.code(), errc::invalid_argument);
  EXPECT_NE(bad.error().message.find(home_config()), std::string::npos);

  write(home_config(), R"({"api_key": 5})");
  EXPECT_FALSE(resolve_connection({}, env_));

  connection_flags flags;
  flags.config_path = dir_ + "/absent.json";
  auto missing = resolve_connection(flags, env_);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.code(), errc::invalid_argument);
}

} // namespace
} // namespace airlock::cli
