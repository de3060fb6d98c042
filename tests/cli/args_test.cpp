// Argument parsing of `airlock`: everything a usage error can be is caught
// before the network.

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cli/args.hpp"

namespace airlock::cli {
namespace {

result<invocation> parse(std::vector<std::string> args) { return parse_args(args); }

/// Each command line fails to parse, with invalid_argument and a message.
void expect_usage_errors(const std::vector<std::vector<std::string>>& bad) {
  for (const auto& args : bad) {
    std::string line = args.empty() ? "(empty)" : "";
    for (const auto& arg : args)
      line += arg + " ";
    auto inv = parse(args);
    ASSERT_FALSE(inv) << line;
    EXPECT_EQ(inv.code(), errc::invalid_argument) << line;
    EXPECT_FALSE(inv.error().message.empty()) << line;
  }
}

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

TEST(cli_args, parses_fork_count_in_its_short_and_long_forms) {
  auto short_form = parse({"fork", "sb_1", "-n", "3", "--wait"});
  ASSERT_TRUE(short_form) << short_form.error().message;
  EXPECT_EQ(short_form->command, "fork");
  EXPECT_EQ(short_form->positionals, std::vector<std::string>{"sb_1"});
  EXPECT_EQ(short_form->number("count"), 3u);
  EXPECT_TRUE(short_form->has("wait"));
  auto long_form = parse({"fork", "--count=64", "sb_1"});
  ASSERT_TRUE(long_form) << long_form.error().message;
  EXPECT_EQ(long_form->number("count"), 64u);
  EXPECT_FALSE(long_form->has("wait"));
  auto smallest = parse({"fork", "sb_1", "--count", "1"});
  ASSERT_TRUE(smallest) << smallest.error().message;
  EXPECT_EQ(smallest->number("count"), 1u);
}

TEST(cli_args, parses_the_snapshot_verbs_and_their_flags) {
  auto restore = parse({"restore", "sb_1", "--checkpoint", "ckpt_1", "--wait"});
  ASSERT_TRUE(restore) << restore.error().message;
  EXPECT_EQ(restore->value("checkpoint"), "ckpt_1");
  EXPECT_TRUE(restore->has("wait"));
  auto plain_restore = parse({"restore", "sb_1"});
  ASSERT_TRUE(plain_restore) << plain_restore.error().message;
  EXPECT_FALSE(plain_restore->has("checkpoint"));

  auto checkpoint = parse({"checkpoint", "sb_1", "--label", "before upgrade"});
  ASSERT_TRUE(checkpoint) << checkpoint.error().message;
  EXPECT_EQ(checkpoint->value("label"), "before upgrade");
  EXPECT_FALSE(checkpoint->has("wait"));

  for (const char* verb : {"suspend", "wake", "rm-checkpoint"}) {
    auto inv = parse({verb, "x_1", "--wait"});
    ASSERT_TRUE(inv) << verb << ": " << inv.error().message;
    EXPECT_EQ(inv->command, verb);
    EXPECT_EQ(inv->positionals, std::vector<std::string>{"x_1"});
    EXPECT_TRUE(inv->has("wait"));
  }
  auto listing = parse({"checkpoints", "sb_1", "--json"});
  ASSERT_TRUE(listing) << listing.error().message;
  EXPECT_TRUE(listing->json);
}

TEST(cli_args, rejects_a_fork_count_outside_1_to_64_naming_the_range) {
  for (const auto& args : std::vector<std::vector<std::string>>{{"fork", "sb_1", "-n", "0"},
                                                                {"fork", "sb_1", "-n", "65"},
                                                                {"fork", "sb_1", "--count=0"}}) {
    auto inv = parse(args);
    ASSERT_FALSE(inv) << args.back();
    EXPECT_EQ(inv.code(), errc::invalid_argument);
    EXPECT_NE(inv.error().message.find("-n/--count takes an integer from 1 to 64"),
              std::string::npos)
      << inv.error().message;
  }
  auto missing = parse({"fork", "sb_1"});
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.code(), errc::invalid_argument);
  EXPECT_NE(missing.error().message.find("missing -n/--count N"), std::string::npos)
    << missing.error().message;
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
  expect_usage_errors(bad);
}

TEST(cli_args, rejects_bad_arguments_of_the_snapshot_verbs) {
  expect_usage_errors({
    {"suspend"},                         // missing id
    {"suspend", "a", "b"},               // one too many
    {"wake"},                            // missing id
    {"restore"},                         // missing id
    {"restore", "sb_1", "--checkpoint"}, // missing value
    {"checkpoint"},                      // missing id
    {"checkpoint", "sb_1", "--label"},   // missing value
    {"checkpoints"},                     // missing id
    {"checkpoints", "sb_1", "--wait"},   // a listing has nothing to wait for
    {"rm-checkpoint"},                   // missing id
    {"fork", "-n", "2"},                 // missing id
    {"fork", "sb_1"},                    // missing count
    {"fork", "sb_1", "-n", "0"},         // too few
    {"fork", "sb_1", "-n", "65"},        // too many
    {"fork", "sb_1", "-n", "-1"},        // negative
    {"fork", "sb_1", "-n", "two"},       // not a number
    {"fork", "sb_1", "-n"},              // missing value
  });
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

TEST(cli_args, lists_the_snapshot_verbs_in_the_help) {
  auto text = usage_text();
  for (const char* verb :
       {"suspend", "wake", "restore", "checkpoint", "checkpoints", "rm-checkpoint", "fork"})
    EXPECT_NE(text.find(std::string("\n  ") + verb + " "), std::string::npos) << verb;
  const command_spec* fork = find_command("fork");
  ASSERT_NE(fork, nullptr);
  EXPECT_NE(command_help(*fork).find("-n, --count N"), std::string::npos);
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
