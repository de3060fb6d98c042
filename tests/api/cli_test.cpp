// The `airlock` CLI binary, run as a child process against a real
// `airlockd serve`: create --wait, exec with an exit code, cp both ways,
// ls --json, pause/resume/rm --wait.

#include <cstdlib>
#include <filesystem>

#include "tests/api/api_fixture.hpp"

namespace airlock::test {
namespace {

using nlohmann::json;

constexpr const char* cli_path = AIRLOCK_CLI_PATH;

/// What one run of the CLI printed and returned.
struct cli_run {
  std::optional<int> status;
  std::vector<std::string> lines; ///< stdout
  std::string err;
  std::string out() const {
    std::string all;
    for (const auto& line : lines)
      all += line + "\n";
    return all;
  }
};

class api_cli : public api_suite {
protected:
  /// Runs `airlock ARGS...` with the server's URL and admin key in the
  /// environment and nothing else of ours.
  cli_run airlock(const std::vector<std::string>& args) {
    std::vector<std::string> argv{cli_path};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<std::string> env{"PATH=/usr/bin:/bin", "HOME=" + dir_.path(),
                                 "AIRLOCK_URL=" + server().url(),
                                 "AIRLOCK_API_KEY=" + server().admin_key()};
    std::string err_path = dir_.path() + "/stderr." + std::to_string(++runs_);
    cli_run run;
    auto process = child_process::spawn(argv, env, err_path);
    if (!process) {
      ADD_FAILURE() << "cannot start " << cli_path;
      return run;
    }
    run.lines = process->read_remaining_lines(operation_wait_max);
    run.status = process->wait_exit(operation_wait_max);
    run.err = read_file(err_path);
    return run;
  }

  temp_dir dir_;
  int runs_ = 0;
};

TEST_F(api_cli, create_exec_cp_ls_pause_resume_and_rm_against_a_real_server) {
  auto created =
    airlock({"create", "--template", "minimal", "--cpu", "100", "--memory", "128", "--wait"});
  ASSERT_EQ(created.status, 0) << created.err;
  ASSERT_EQ(created.lines.size(), 1u) << created.out();
  std::string id = created.lines[0];
  ASSERT_EQ(id.rfind("sb_", 0), 0u) << id;
  auto api = admin();
  EXPECT_EQ(api.get("/v1/sandboxes/" + id).json["state"], "running");

  auto exec = airlock({"exec", id, "--", "sh", "-c", "echo hi; exit 7"});
  EXPECT_EQ(exec.status, 7) << exec.err;
  EXPECT_EQ(exec.out(), "hi\n");

  std::string local = dir_.path() + "/up.bin";
  std::string content("cli bytes\n\x01\x02\xff", 13);
  write_file(local, content);
  auto up = airlock({"cp", local, id + ":/tmp/up.bin"});
  EXPECT_EQ(up.status, 0) << up.err;
  EXPECT_EQ(api.get("/v1/sandboxes/" + id + "/files?path=/tmp/up.bin").body, content);
  std::string back = dir_.path() + "/down.bin";
  auto down = airlock({"cp", id + ":/tmp/up.bin", back});
  EXPECT_EQ(down.status, 0) << down.err;
  EXPECT_EQ(read_file(back), content);
  auto missing = airlock({"cp", id + ":/no/such", dir_.path() + "/none"});
  EXPECT_EQ(missing.status, 1);
  EXPECT_FALSE(std::filesystem::exists(dir_.path() + "/none"));

  auto listed = airlock({"ls", "--json"});
  ASSERT_EQ(listed.status, 0) << listed.err;
  auto items = json::parse(listed.out(), nullptr, false);
  ASSERT_TRUE(items.is_object()) << listed.out();
  bool found = false;
  for (const auto& item : items["items"])
    found = found || (item["id"] == id && item["state"] == "running");
  EXPECT_TRUE(found) << listed.out();

  EXPECT_EQ(airlock({"pause", id, "--wait"}).status, 0);
  EXPECT_EQ(api.get("/v1/sandboxes/" + id).json["state"], "paused");
  auto twice = airlock({"pause", id});
  EXPECT_EQ(twice.status, 1) << "pausing a paused sandbox is a 409";
  EXPECT_NE(twice.err.find("409"), std::string::npos) << twice.err;
  EXPECT_EQ(airlock({"resume", id, "--wait"}).status, 0);
  EXPECT_EQ(api.get("/v1/sandboxes/" + id).json["state"], "running");
  EXPECT_EQ(airlock({"exec", id, "--", "true"}).status, 0);
  EXPECT_EQ(airlock({"rm", id, "--wait"}).status, 0);
  EXPECT_EQ(api.get("/v1/sandboxes/" + id).json["state"], "destroyed");
}

TEST_F(api_cli, template_push_ls_get_and_rm) {
  const std::string image = dir_.path() + "/image.tar";
  const std::string make = "python3 " + std::string(AIRLOCK_MAKE_IMAGE) + " oci " + image;
  ASSERT_EQ(std::system(make.c_str()), 0);
  auto pushed = airlock({"template", "push", "cli-tpl", image, "--format", "oci", "--wait"});
  ASSERT_EQ(pushed.status, 0) << pushed.err << pushed.out();
  ASSERT_GE(pushed.lines.size(), 1u);
  EXPECT_EQ(pushed.lines[0].rfind("op_", 0), 0u) << pushed.out();
  auto listed = airlock({"template", "ls"});
  ASSERT_EQ(listed.status, 0) << listed.err;
  EXPECT_NE(listed.out().find("cli-tpl"), std::string::npos) << listed.out();
  EXPECT_NE(listed.out().find("minimal"), std::string::npos) << listed.out();
  auto shown = airlock({"template", "get", "cli-tpl"});
  ASSERT_EQ(shown.status, 0) << shown.err;
  auto record = json::parse(shown.out(), nullptr, false);
  EXPECT_EQ(record.value("version", 0), 1) << shown.out();
  auto no_format = airlock({"template", "push", "cli-tpl", image});
  EXPECT_EQ(no_format.status, 2) << "a usage error";
  auto bad_verb = airlock({"template", "frobnicate"});
  EXPECT_EQ(bad_verb.status, 2);
  EXPECT_EQ(airlock({"template", "rm", "cli-tpl", "--wait"}).status, 0);
  EXPECT_EQ(admin().get("/v1/templates/cli-tpl").status, 404);
}

TEST_F(api_cli, template_pool_sets_and_shows_a_pool) {
  auto set = airlock({"template", "pool", "minimal", "1", "--cpu", "100", "--memory", "128"});
  ASSERT_EQ(set.status, 0) << set.err;
  EXPECT_EQ(set.out().rfind("size 1 ready ", 0), 0u) << set.out();
  auto pool = admin().get("/v1/templates/minimal/pool");
  EXPECT_EQ(pool.json["size"], 1);
  EXPECT_EQ(pool.json["memory_mb"], 128);
  auto shown = airlock({"template", "pool", "minimal", "--json"});
  ASSERT_EQ(shown.status, 0) << shown.err;
  EXPECT_EQ(json::parse(shown.out(), nullptr, false).value("cpu_millis", 0), 100) << shown.out();
  EXPECT_EQ(airlock({"template", "pool", "minimal", "many"}).status, 2);
  EXPECT_NE(airlock({"template", "pool", "no-such", "1"}).status, 0);
  EXPECT_EQ(airlock({"template", "pool", "minimal", "0"}).status, 0);
}

} // namespace
} // namespace airlock::test
