// Option parsing of the airlockd subcommands: defaults, precedence
// (default < config file < environment < flag), and clear errors.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "airlockd/options.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/host.hpp"
#include "tests/support/http_client.hpp"

namespace airlock::airlockd {
namespace {

using args = std::vector<std::string>;

process_env user_env(std::map<std::string, std::string, std::less<>> vars = {}) {
  process_env env;
  env.variables = std::move(vars);
  env.variables.emplace("HOME", "/home/ada");
  env.hostname = "host-1";
  return env;
}

serve_options serve_ok(const args& given, const process_env& env) {
  auto parsed = parse_serve(given, env);
  EXPECT_TRUE(parsed.has_value()) << (parsed ? "" : parsed.error().message);
  return parsed ? parsed->options : serve_options{};
}

std::string serve_error(const args& given, const process_env& env) {
  auto parsed = parse_serve(given, env);
  EXPECT_FALSE(parsed.has_value());
  if (parsed)
    return "";
  EXPECT_EQ(parsed.code(), errc::invalid_argument);
  return parsed.error().message;
}

TEST(serve_options, defaults_follow_the_api_contract_for_a_user) {
  auto options = serve_ok({}, user_env());
  EXPECT_EQ(options.data_dir, "/home/ada/.local/share/airlock");
  EXPECT_EQ(options.listen, (gateway::endpoint{"127.0.0.1", 7070}));
  EXPECT_EQ(options.cli_config, "/home/ada/.config/airlock/config.json");
  EXPECT_EQ(options.log_level, actors::log_level::info);
  EXPECT_EQ(options.http.header_bytes_max, 8u * 1024);
  EXPECT_EQ(options.http.body_bytes_max, 1024u * 1024);
}

TEST(serve_options, defaults_to_var_lib_airlock_as_root) {
  auto env = user_env();
  env.is_root = true;
  EXPECT_EQ(serve_ok({}, env).data_dir, "/var/lib/airlock");
}

TEST(serve_options, cli_config_follows_xdg_config_home) {
  auto options = serve_ok({}, user_env({{"XDG_CONFIG_HOME", "/xdg"}}));
  EXPECT_EQ(options.cli_config, "/xdg/airlock/config.json");
}

TEST(serve_options, config_file_beats_defaults) {
  test::temp_dir dir;
  std::string config = dir.path() + "/airlockd.json";
  test::write_file(config, R"({"listen": "127.0.0.4:0", "data_dir": "/srv/a", "http_threads": 3,
                               "http_keep_alive": false, "log_level": "debug"})");
  auto parsed = parse_serve(args{"--config", config}, user_env());
  ASSERT_TRUE(parsed.has_value()) << parsed.error().message;
  EXPECT_EQ(parsed->config_file, config);
  EXPECT_EQ(parsed->options.listen, (gateway::endpoint{"127.0.0.4", 0}));
  EXPECT_EQ(parsed->options.data_dir, "/srv/a");
  EXPECT_EQ(parsed->options.http.threads, 3u);
  EXPECT_FALSE(parsed->options.http.keep_alive);
  EXPECT_EQ(parsed->options.log_level, actors::log_level::debug);
}

TEST(serve_options, environment_beats_the_config_file) {
  test::temp_dir dir;
  std::string config = dir.path() + "/airlockd.json";
  test::write_file(config, R"({"listen": "127.0.0.4:0", "data_dir": "/srv/a"})");
  auto options = serve_ok({}, user_env({{"AIRLOCK_CONFIG", config},
                                        {"AIRLOCK_LISTEN", "127.0.0.2:0"},
                                        {"AIRLOCK_LOG_LEVEL", "warn"}}));
  EXPECT_EQ(options.listen, (gateway::endpoint{"127.0.0.2", 0}));
  EXPECT_EQ(options.data_dir, "/srv/a"); // not set in the environment: the file's value
  EXPECT_EQ(options.log_level, actors::log_level::warn);
}

TEST(serve_options, flags_beat_the_environment) {
  auto options = serve_ok({"--listen", "127.0.0.3:0", "--data-dir=/srv/flag"},
                          user_env({{"AIRLOCK_LISTEN", "127.0.0.2:0"},
                                    {"AIRLOCK_DATA_DIR", "/srv/env"},
                                    {"AIRLOCK_CLI_CONFIG", "/tmp/cli.json"}}));
  EXPECT_EQ(options.listen, (gateway::endpoint{"127.0.0.3", 0}));
  EXPECT_EQ(options.data_dir, "/srv/flag");
  EXPECT_EQ(options.cli_config, "/tmp/cli.json");
}

TEST(serve_options, config_flag_beats_the_config_variable) {
  test::temp_dir dir;
  test::write_file(dir.path() + "/a.json", R"({"listen": "127.0.0.5:1"})");
  test::write_file(dir.path() + "/b.json", R"({"listen": "127.0.0.6:2"})");
  auto options = serve_ok({"--config", dir.path() + "/b.json"},
                          user_env({{"AIRLOCK_CONFIG", dir.path() + "/a.json"}}));
  EXPECT_EQ(options.listen, (gateway::endpoint{"127.0.0.6", 2}));
}

TEST(serve_options, an_empty_variable_counts_as_unset) {
  auto options = serve_ok({}, user_env({{"AIRLOCK_LISTEN", ""}}));
  EXPECT_EQ(options.listen, (gateway::endpoint{"127.0.0.1", 7070}));
}

TEST(serve_options, the_last_of_a_repeated_flag_wins) {
  auto options = serve_ok({"--listen", "127.0.0.1:1", "--listen", "127.0.0.1:2"}, user_env());
  EXPECT_EQ(options.listen.port, 2);
}

TEST(serve_options, help_is_a_request_not_an_error) {
  auto parsed = parse_serve(args{"--bogus-is-ignored-after-help", "--help"}, user_env());
  // An unknown flag is still an error, even next to --help: say what is wrong.
  EXPECT_FALSE(parsed.has_value());
  parsed = parse_serve(args{"--listen", "127.0.0.1:1", "-h"}, user_env());
  ASSERT_TRUE(parsed.has_value());
  EXPECT_TRUE(parsed->help);
}

TEST(serve_options, unknown_flags_are_named_in_the_error) {
  EXPECT_NE(serve_error({"--bogus"}, user_env()).find("--bogus"), std::string::npos);
  EXPECT_NE(serve_error({"stray"}, user_env()).find("stray"), std::string::npos);
}

TEST(serve_options, bad_values_name_their_source) {
  EXPECT_NE(serve_error({"--listen", "nope"}, user_env()).find("--listen"), std::string::npos);
  EXPECT_NE(serve_error({"--listen"}, user_env()).find("needs a value"), std::string::npos);
  EXPECT_NE(serve_error({"--listen", "127.0.0.1:70000"}, user_env()).find("0..65535"),
            std::string::npos);
  EXPECT_NE(serve_error({}, user_env({{"AIRLOCK_LOG_LEVEL", "loud"}})).find("AIRLOCK_LOG_LEVEL"),
            std::string::npos);
  EXPECT_NE(serve_error({"--http-threads", "0"}, user_env()).find("1..256"), std::string::npos);
  EXPECT_NE(serve_error({"--stop-timeout-s", "0"}, user_env()).find("1..3600"), std::string::npos);
  EXPECT_EQ(serve_ok({"--stop-timeout-s", "5"}, user_env()).sandboxes.stop_timeout_s, 5u);
  EXPECT_EQ(serve_ok({}, user_env()).sandboxes.stop_timeout_s, 30u);
  EXPECT_NE(serve_error({"--http-keep-alive", "maybe"}, user_env()).find("true or false"),
            std::string::npos);
}

TEST(serve_options, config_file_errors_name_the_file_and_key) {
  test::temp_dir dir;
  std::string config = dir.path() + "/c.json";
  test::write_file(config, R"({"lisen": "127.0.0.1:1"})");
  std::string message = serve_error({"--config", config}, user_env());
  EXPECT_NE(message.find(config), std::string::npos);
  EXPECT_NE(message.find("lisen"), std::string::npos);

  test::write_file(config, R"({"listen": ["a"]})");
  EXPECT_NE(serve_error({"--config", config}, user_env()).find("listen"), std::string::npos);
  test::write_file(config, "{not json");
  EXPECT_NE(serve_error({"--config", config}, user_env()).find("not valid JSON"),
            std::string::npos);
  EXPECT_NE(
    serve_error({"--config", dir.path() + "/missing.json"}, user_env()).find("cannot be read"),
    std::string::npos);
}

TEST(worker_options, join_is_required) {
  auto parsed = parse_worker(args{}, user_env());
  ASSERT_FALSE(parsed.has_value());
  EXPECT_NE(parsed.error().message.find("--join"), std::string::npos);
}

TEST(worker_options, name_defaults_to_the_host_name) {
  auto parsed = parse_worker(args{"--join", "10.0.0.1:7071"}, user_env());
  ASSERT_TRUE(parsed.has_value()) << parsed.error().message;
  EXPECT_EQ(parsed->options.name, "host-1");
  EXPECT_EQ(parsed->options.join, (gateway::endpoint{"10.0.0.1", 7071}));
  EXPECT_EQ(parsed->options.data_listen, (gateway::endpoint{"127.0.0.1", 7072}));
}

TEST(worker_options, join_can_come_from_the_environment) {
  auto parsed = parse_worker(args{"--name", "w-2"}, user_env({{"AIRLOCK_JOIN", "[::1]:7071"}}));
  ASSERT_TRUE(parsed.has_value()) << parsed.error().message;
  EXPECT_EQ(parsed->options.join, (gateway::endpoint{"::1", 7071}));
  EXPECT_EQ(parsed->options.name, "w-2");
}

TEST(control_options, cluster_listen_has_its_own_flag_and_default) {
  auto parsed = parse_control(args{}, user_env());
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->options.cluster_listen, (gateway::endpoint{"127.0.0.1", 7071}));
  parsed = parse_control(args{"--cluster-listen", "0.0.0.0:9000"}, user_env());
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->options.cluster_listen, (gateway::endpoint{"0.0.0.0", 9000}));
}

TEST(options, every_option_has_a_variable_a_key_and_a_line_in_the_docs) {
  std::string docs = test::read_file(std::string(AIRLOCK_SOURCE_DIR) + "/docs/configuration.md");
  ASSERT_FALSE(docs.empty());
  for (const char* command : {"serve", "control", "worker"}) {
    auto options = describe_options(command);
    ASSERT_FALSE(options.empty());
    for (const auto& option : options) {
      EXPECT_EQ(option.env.rfind("AIRLOCK_", 0), 0u) << option.flag;
      EXPECT_NE(docs.find("`" + option.flag + "`"), std::string::npos)
        << option.flag << " is missing from docs/configuration.md";
      EXPECT_NE(docs.find("`" + option.env + "`"), std::string::npos)
        << option.env << " is missing from docs/configuration.md";
      EXPECT_NE(command_usage(command).find(option.flag), std::string::npos);
    }
  }
}

TEST(endpoint, parses_host_port_and_bracketed_ipv6) {
  EXPECT_EQ(*gateway::parse_endpoint("127.0.0.1:7070"), (gateway::endpoint{"127.0.0.1", 7070}));
  EXPECT_EQ(*gateway::parse_endpoint("localhost:0"), (gateway::endpoint{"localhost", 0}));
  EXPECT_EQ(*gateway::parse_endpoint("[::1]:80"), (gateway::endpoint{"::1", 80}));
  EXPECT_EQ(gateway::to_string({"::1", 80}), "[::1]:80");
  for (const char* bad : {"", "7070", ":7070", "host:", "host:x", "::1:80", "[::1]80", "h:-1"})
    EXPECT_FALSE(gateway::parse_endpoint(bad).has_value()) << bad;
}

TEST(endpoint, a_wildcard_listener_is_dialled_on_loopback) {
  EXPECT_EQ(gateway::dialable({"0.0.0.0", 1}), (gateway::endpoint{"127.0.0.1", 1}));
  EXPECT_EQ(gateway::dialable({"::", 1}), (gateway::endpoint{"::1", 1}));
  EXPECT_EQ(gateway::dialable({"10.1.2.3", 1}), (gateway::endpoint{"10.1.2.3", 1}));
}

TEST(split_list, keeps_the_non_empty_items_between_separators) {
  EXPECT_EQ(split_list("a,,b,", ','), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(split_list("", ';'), std::vector<std::string>{});
  EXPECT_EQ(split_list("10.1.0.0/16", ','), std::vector<std::string>{"10.1.0.0/16"});
}

TEST(template_egress, parses_profiles_and_allow_lists_per_template) {
  auto parsed =
    parse_template_egress("base=open;tools=allowlist:pypi.org,*.pythonhosted.org;x=none");
  ASSERT_TRUE(parsed) << parsed.error().message;
  ASSERT_EQ(parsed->size(), 3U);
  EXPECT_EQ(parsed->at("base").profile, schema::egress_profile::open);
  EXPECT_EQ(parsed->at("tools").profile, schema::egress_profile::allowlist);
  EXPECT_EQ(parsed->at("tools").allow,
            (std::vector<std::string>{"pypi.org", "*.pythonhosted.org"}));
  EXPECT_EQ(parsed->at("x").profile, schema::egress_profile::none);
  EXPECT_TRUE(parse_template_egress("") && parse_template_egress("")->empty());
}

TEST(template_egress, refuses_bad_profiles_names_and_rules_with_a_sentence) {
  EXPECT_FALSE(parse_template_egress("base=sometimes"));
  EXPECT_FALSE(parse_template_egress("=open"));
  EXPECT_FALSE(parse_template_egress("base"));
  auto bad_rule = parse_template_egress("base=allowlist:10.0.0.1");
  ASSERT_FALSE(bad_rule);
  EXPECT_NE(bad_rule.error().message.find("base"), std::string::npos) << bad_rule.error().message;
  EXPECT_NE(serve_error({"--template-egress", "base=maybe"}, user_env()), "");
}

TEST(template_egress, serve_and_control_take_the_option_and_audit_retention) {
  auto options =
    serve_ok({"--template-egress", "base=open", "--audit-retention-hours", "48"}, user_env());
  EXPECT_EQ(options.control.template_egress, "base=open");
  EXPECT_EQ(options.control.audit_retention_hours, 48U);
  auto control = parse_control(args{"--template-egress", "minimal=none"}, user_env());
  ASSERT_TRUE(control) << control.error().message;
  EXPECT_EQ(control->options.control.template_egress, "minimal=none");
}

} // namespace
} // namespace airlock::airlockd
