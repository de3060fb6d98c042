// Exit codes, error mapping, URLs and remote paths: the CLI's small rules.

#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cli/api.hpp"
#include "cli/cli.hpp"
#include "cli/commands.hpp"
#include "cli/http.hpp"

namespace airlock::cli {
namespace {

TEST(cli_exit_code, follows_the_shell_convention) {
  EXPECT_EQ(exit_code_of(0, std::nullopt), 0);
  EXPECT_EQ(exit_code_of(3, std::nullopt), 3);
  EXPECT_EQ(exit_code_of(std::nullopt, 9), 137);
  EXPECT_EQ(exit_code_of(0, 15), 143);
  EXPECT_EQ(exit_code_of(std::nullopt, std::nullopt), 1);
  EXPECT_EQ(exit_code_of(300, std::nullopt), 255);
  EXPECT_EQ(exit_code_of(-1, std::nullopt), 0);
}

TEST(cli_errors, names_the_server_code_and_message_and_gives_a_hint) {
  auto unauthorised =
    api_failure(401, R"({"error":{"code":"unauthenticated","message":"bad key"}})");
  EXPECT_EQ(unauthorised.code, errc::unauthenticated);
  EXPECT_NE(unauthorised.message.find("unauthenticated: bad key"), std::string::npos);
  EXPECT_NE(unauthorised.message.find("AIRLOCK_API_KEY"), std::string::npos);

  auto missing = api_failure(404, R"({"error":{"code":"not_found","message":"no sandbox sb_x"}})");
  EXPECT_EQ(missing.code, errc::not_found);
  EXPECT_NE(missing.message.find("hint:"), std::string::npos);

  EXPECT_EQ(api_failure(409, "{}").code, errc::wrong_state);
  auto proxy = api_failure(502, "<html>bad gateway</html>");
  EXPECT_EQ(proxy.code, errc::internal);
  EXPECT_NE(proxy.message.find("http_502"), std::string::npos);
}

TEST(cli_errors, hints_at_a_stopped_daemon_when_nothing_answers) {
  auto refused = connection_failure(make_status(errc::unavailable, "connection refused"),
                                    "http://127.0.0.1:7070");
  EXPECT_NE(refused.message.find("is airlockd running at http://127.0.0.1:7070?"),
            std::string::npos);
  auto other = connection_failure(make_status(errc::invalid_argument, "bad URL"), "x");
  EXPECT_EQ(other.message, "bad URL");
}

TEST(cli_url, takes_apart_http_urls) {
  auto plain = parse_url("http://example.com");
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->host, "example.com");
  EXPECT_EQ(plain->port, "80");
  EXPECT_EQ(plain->target, "/");
  auto full = parse_url("http://127.0.0.1:7070/v1/x?wait=1");
  ASSERT_TRUE(full);
  EXPECT_EQ(full->port, "7070");
  EXPECT_EQ(full->target, "/v1/x?wait=1");
  auto v6 = parse_url("http://[::1]:80?q");
  ASSERT_TRUE(v6);
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->target, "/?q");
  auto secure = parse_url("https://10.0.0.2/v1");
  ASSERT_TRUE(secure);
  EXPECT_EQ(secure->scheme, "https");
  EXPECT_EQ(secure->port, "443");
  EXPECT_EQ(secure->target, "/v1");
  for (const char* bad : {"ftp://h", "https://", "http://", "http://h:99999", "http://h:x",
                          "http://[::1", "127.0.0.1:7070"})
    EXPECT_EQ(parse_url(bad).code(), errc::invalid_argument) << bad;
  EXPECT_EQ(url_encode("/a b/ü&=?"), "/a%20b/%C3%BC%26%3D%3F");
}

TEST(cli_cp, tells_sandbox_paths_from_local_ones) {
  auto remote = parse_remote("sb_1:/work/a.txt");
  ASSERT_TRUE(remote);
  EXPECT_EQ(remote->sandbox_id, "sb_1");
  EXPECT_EQ(remote->path, "/work/a.txt");
  EXPECT_FALSE(parse_remote("./dir:with/colon"));
  EXPECT_FALSE(parse_remote("/abs/path"));
  EXPECT_FALSE(parse_remote(":/x"));
  EXPECT_FALSE(parse_remote("-"));
  EXPECT_TRUE(parse_remote("sb_1:relative")); // remote, refused later as not absolute
}

/// run_cli on strings: usage errors exit 2 without any network.
struct run_result {
  int code;
  std::string out;
  std::string err;
};
run_result run(std::vector<std::string> args, env_map env = {}) {
  std::istringstream in;
  std::ostringstream out, err;
  env.emplace("HOME", "/nonexistent-home");
  int code = run_cli(args, env, cli_io{in, out, err});
  return {code, out.str(), err.str()};
}

TEST(cli_run, exits_2_for_usage_and_configuration_errors) {
  EXPECT_EQ(run({"bogus"}).code, 2);
  EXPECT_EQ(run({"get"}).code, 2);
  auto no_key = run({"ls"});
  EXPECT_EQ(no_key.code, 2);
  EXPECT_NE(no_key.err.find("AIRLOCK_API_KEY"), std::string::npos);
  auto both_local = run({"cp", "a", "b"}, {{"AIRLOCK_API_KEY", "ak_x"}});
  EXPECT_EQ(both_local.code, 2);
  auto relative = run({"cp", "a", "sb_1:b"}, {{"AIRLOCK_API_KEY", "ak_x"}});
  EXPECT_EQ(relative.code, 2);
}

TEST(cli_run, refuses_a_fork_count_outside_1_to_64_before_any_request) {
  // The URL would refuse a connection (exit 1); a usage error exits 2 first.
  env_map env{{"AIRLOCK_API_KEY", "ak_x"}, {"AIRLOCK_URL", "http://127.0.0.1:1"}};
  for (const char* count : {"0", "65"}) {
    auto result = run({"fork", "sb_1", "-n", count}, env);
    EXPECT_EQ(result.code, 2) << count;
    EXPECT_NE(result.err.find("takes an integer from 1 to 64, not '" + std::string(count) + "'"),
              std::string::npos)
      << result.err;
    EXPECT_TRUE(result.out.empty());
  }
  auto missing = run({"fork", "sb_1"}, env);
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.err.find("missing -n/--count N"), std::string::npos) << missing.err;
}

TEST(cli_run, prints_help_and_exits_0) {
  auto top = run({"--help"});
  EXPECT_EQ(top.code, 0);
  EXPECT_NE(top.out.find("usage: airlock"), std::string::npos);
  auto exec = run({"exec", "--help"});
  EXPECT_EQ(exec.code, 0);
  EXPECT_NE(exec.out.find("--stdin"), std::string::npos);
}

} // namespace
} // namespace airlock::cli
