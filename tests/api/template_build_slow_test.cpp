// A template version built by debootstrap through the API (slow: a Debian
// minbase with a package from the host's mirror, minutes): the package is
// in the version, the run step ran after it, and its sandboxes start.

#include <chrono>
#include <string>

#include "tests/api/api_fixture.hpp"

namespace airlock::test {
namespace {

using nlohmann::json;

using api_template_build = api_suite;

TEST_F(api_template_build, a_debootstrap_recipe_installs_its_packages_then_runs_its_steps) {
  auto api = admin();
  auto posted = api.post(
    "/v1/templates", {{"name", "deb-recipe"},
                      {"from", {{"debootstrap", {{"suite", "bookworm"}, {"packages", {"jq"}}}}}},
                      {"run", {"jq --version > /etc/jq-version"}}});
  ASSERT_EQ(posted.status, 202) << posted.body;
  // debootstrap takes minutes: wait in rounds, bounded.
  json done;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(20);
  do {
    done = api.wait_operation(posted.json["operation_id"]);
  } while ((done.value("state", "") == "running" || done.value("state", "") == "pending")
           && std::chrono::steady_clock::now() < deadline);
  ASSERT_EQ(done["state"], "succeeded") << done.dump();
  auto id = api.create_running({{"template", "deb-recipe"}});
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(api.run(id, "cat /etc/jq-version").stdout_bytes.rfind("jq-", 0), 0u);
  EXPECT_EQ(api.run(id, "echo '{\"a\": 7}' | jq .a").stdout_bytes, "7\n");
  EXPECT_EQ(api.run(id, ". /etc/os-release; echo $VERSION_CODENAME").stdout_bytes, "bookworm\n");
}

} // namespace
} // namespace airlock::test
