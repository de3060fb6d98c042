// The `base` template's E2B account through the API (slow: the first base
// build runs debootstrap from the host's mirror, minutes): `user` is uid and
// gid 1000 with its home and passwordless sudo, and a process started with
// "user": "user" runs as it, with its HOME and in its home.

#include <chrono>
#include <string>

#include "tests/api/api_fixture.hpp"

namespace airlock::test {
namespace {

using nlohmann::json;

using api_base_user = api_suite;

TEST_F(api_base_user, base_has_user_1000_with_its_home_and_passwordless_sudo) {
  auto api = admin();
  auto created = api.create({{"template", "base"}, {"cpu_millis", 1000}, {"memory_mb", 512}});
  ASSERT_EQ(created.status, 202) << created.body;
  // The first build of base takes minutes: wait in rounds, bounded.
  json op;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(20);
  do {
    op = api.wait_operation(created.json.value("operation_id", ""));
  } while ((op.value("state", "") == "running" || op.value("state", "") == "pending")
           && std::chrono::steady_clock::now() < deadline);
  const std::string why = op.dump();
  if (op.value("state", "") == "failed" && why.find("mirror") != std::string::npos)
    GTEST_SKIP() << "base cannot be built without the Debian mirror: " << why;
  ASSERT_EQ(op.value("state", ""), "succeeded") << why;
  const std::string id = created.json.value("sandbox_id", "");

  EXPECT_EQ(api.run(id, "id user").stdout_bytes,
            "uid=1000(user) gid=1000(user) groups=1000(user)\n");
  EXPECT_EQ(api.run(id, "getent passwd user").stdout_bytes,
            "user:x:1000:1000::/home/user:/bin/bash\n");
  EXPECT_EQ(api.run(id, "stat -c '%u:%g %a' /home/user").stdout_bytes, "1000:1000 750\n");
  EXPECT_EQ(api.run(id, "stat -c '%u %a' /etc/sudoers.d/user").stdout_bytes, "0 440\n");
  EXPECT_EQ(api.run(id, "test -f /home/user/.bashrc && echo skeleton").stdout_bytes, "skeleton\n");

  // The account's own processes: ids, HOME, the home as the working directory.
  auto as_user = api.exec(id, {{"cmd", "id -un; id -u; id -g; echo $HOME; pwd"}, {"user", "user"}});
  ASSERT_TRUE(as_user);
  auto output = api.read_output(*as_user);
  EXPECT_EQ(output.stdout_bytes, "user\n1000\n1000\n/home/user\n/home/user\n")
    << output.stderr_bytes;
  // Passwordless sudo, to the sandbox's root.
  auto sudo = api.exec(id, {{"cmd", "sudo -n true && sudo -n id -u"}, {"user", "user"}});
  ASSERT_TRUE(sudo);
  auto elevated = api.read_output(*sudo);
  EXPECT_EQ(elevated.stdout_bytes, "0\n") << elevated.stderr_bytes;
  ASSERT_TRUE(elevated.exit.has_value());
  EXPECT_EQ(elevated.exit->value("exit_code", -1), 0) << elevated.exit->dump();
  // A file the account writes is its own.
  auto wrote = api.exec(id, {{"cmd", "echo mine > note && stat -c %U note"}, {"user", "user"}});
  ASSERT_TRUE(wrote);
  EXPECT_EQ(api.read_output(*wrote).stdout_bytes, "user\n");
  auto stat = api.get("/v1/sandboxes/" + id + "/files/stat?path=/home/user/note");
  EXPECT_EQ(stat.json.value("owner", ""), "user") << stat.body;
  EXPECT_EQ(stat.json.value("group", ""), "user");
  EXPECT_EQ(stat.json.value("uid", -1), 1000);

  auto unknown = api.call("POST", "/v1/sandboxes/" + id + "/processes",
                          json{{"cmd", "true"}, {"user", "nosuchuser"}}.dump());
  EXPECT_EQ(unknown.status, 400) << unknown.body;
  EXPECT_EQ(api.call("DELETE", "/v1/sandboxes/" + id).status, 202);
}

} // namespace
} // namespace airlock::test
