// Argument parsing of `airlock`: everything a usage error can be is caught
// before the network.

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cli/args.hpp"

namespace airlock::cli {
namespace {

result<invocation> parse(std::vector<std::string> args) { return parse_args(args); }

TEST(cli_args, parses_exec_with_flags_and_the_argv_after_dashes) {
  auto inv = parse({"exec", "sb_1", "-t", "--env", "A=1", "--env=B=2=3", "--cwd", "/work", "--",
                    "python3", "-c", "print(1)"});
  ASSERT_TRUE(inv) << inv.error().message;
  EXPECT_EQ(inv->command, "exec");
  EXPECT_EQ(inv->positionals, std::vector<std::string>{"sb_1"});
  EXPECT_EQ(inv->argv, (std::vector<std::string>{"python3", "-c", "print(1)"}));
  EXPECT_TRUE(inv->has("tty"));
  EXPECT_FALSE(inv->has("stdin"));
  auto env = inv->pairs("env");
  EXPECT_EQ(env.at("A"), "1");
  EXPECT_EQ(env.at("B"), "2=3");
  EXPECT_EQ(inv->value("cwd"), "/work");
}

TEST(cli_args, accepts_global_flags_before_and_after_the_command) {
  auto inv = parse({"--url", "http://h:1", "get", "sb_1", "--json", "--api-key=ak_x"});
  ASSERT_TRUE(inv) << inv.error().message;
  EXPECT_EQ(inv->connection.url, "http://h:1");
  EXPECT_EQ(inv->connection.api_key, "ak_x");
  EXPECT_TRUE(inv->json);
  EXPECT_EQ(inv->positionals[0], "sb_1");
}

TEST(cli_args, parses_numbers_and_repeated_pairs_of_create) {
  auto inv = parse({"create", "--cpu", "500", "--memory", "256", "--metadata", "team=a",
                    "--metadata", "owner=b", "--wait"});
  ASSERT_TRUE(inv) << inv.error().message;
  EXPECT_EQ(inv->number("cpu"), 500u);
  EXPECT_EQ(inv->number("memory"), 256u);
  EXPECT_FALSE(inv->number("disk").has_value());
  EXPECT_EQ(inv->pairs("metadata").size(), 2u);
  EXPECT_TRUE(inv->has("wait"));
}

TEST(cli_args, takes_a_lone_dash_as_an_argument) {
  auto inv = parse({"cp", "-", "sb_1:/tmp/x"});
  ASSERT_TRUE(inv) << inv.error().message;
  EXPECT_EQ(inv->positionals, (std::vector<std::string>{"-", "sb_1:/tmp/x"}));
}

TEST(cli_args, rejects_usage_errors_with_invalid_argument) {
  const std::vector<std::vector<std::string>> bad = {
    {},                              // no command
    {"frobnicate"},                  // unknown command
    {"ls", "--colour"},              // unknown flag
    {"get"},                         // missing id
    {"get", "a", "b"},               // one too many
    {"create", "--cpu", "lots"},     // not a number
    {"create", "--cpu", "-5"},       // negative
    {"create", "--memory"},          // missing value
    {"create", "--env", "NOEQUALS"}, // not K=V
    {"create", "--env", "=v"},       // empty key
    {"create", "--wait=yes"},        // a toggle with a value
    {"exec", "sb_1"},                // no command to run
    {"exec", "sb_1", "--"},          // still none
    {"exec", "sb_1", "ls"},          // argv without --
    {"ls", "-tx"},                   // bundled short flags
    {"cp", "a"},                     // one argument
  };
  for (const auto& args : bad) {
    auto inv = parse(args);
    ASSERT_FALSE(inv) << (args.empty() ? "(empty)" : args[0]);
    EXPECT_EQ(inv.code(), errc::invalid_argument);
    EXPECT_FALSE(inv.error().message.empty());
  }
}

TEST(cli_args, recognises_every_form_of_help) {
  auto top = parse({"--help"});
  ASSERT_TRUE(top);
  EXPECT_TRUE(top->help);
  EXPECT_TRUE(top->command.empty());
  for (const auto& args : std::vector<std::vector<std::string>>{
         {"exec", "--help"}, {"help", "exec"}, {"exec", "-h"}}) {
    auto inv = parse(args);
    ASSERT_TRUE(inv) << args[0];
    EXPECT_TRUE(inv->help);
    EXPECT_EQ(inv->command, "exec");
  }
  auto bare = parse({"help"});
  ASSERT_TRUE(bare);
  EXPECT_TRUE(bare->help);
  EXPECT_TRUE(bare->command.empty());
}

TEST(cli_args, help_texts_name_every_command_and_flag) {
  auto text = usage_text();
  for (const auto& spec : command_specs()) {
    EXPECT_NE(text.find("  " + std::string(spec.name)), std::string::npos) << spec.name;
    auto help = command_help(spec);
    for (const auto& flag : spec.flags)
      EXPECT_NE(help.find("--" + std::string(flag.name)), std::string::npos) << flag.name;
  }
}

} // namespace
} // namespace airlock::cli
