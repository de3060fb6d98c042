// Each sandbox's own /proc/sys/kernel/random/boot_id through the API: not
// the host's, different between sandboxes, the same across pause and
// resume, new after a suspend and restore or a fork (new processes: a new
// boot), and read-only from inside.

#include <regex>
#include <string>

#include "tests/api/api_fixture.hpp"

namespace airlock::test {
namespace {

using nlohmann::json;

using api_boot_id = api_suite;

const std::regex uuid_v4("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}\n");

/// Starts `path` (POST, with `body`) and waits for its operation's state.
std::string run_operation(const api_client& api, const std::string& path, const json& body) {
  auto started = api.post(path, body);
  EXPECT_EQ(started.status, 202) << path << ": " << started.body;
  if (started.status != 202)
    return "";
  auto op = api.wait_operation(started.json["operation_id"]);
  EXPECT_EQ(op.value("state", ""), "succeeded") << op.dump();
  return op.dump();
}

std::string boot_id_of(const api_client& api, const std::string& id) {
  return api.run(id, "cat /proc/sys/kernel/random/boot_id").stdout_bytes;
}

TEST_F(api_boot_id, every_sandbox_has_its_own_boot_id_kept_by_pause_and_new_after_restore) {
  auto api = admin();
  auto one = api.create_running();
  auto two = api.create_running();
  ASSERT_FALSE(one.empty());
  ASSERT_FALSE(two.empty());
  const std::string first = boot_id_of(api, one);
  ASSERT_TRUE(std::regex_match(first, uuid_v4)) << first;
  EXPECT_NE(boot_id_of(api, two), first);
  EXPECT_NE(read_file("/proc/sys/kernel/random/boot_id"), first) << "the host's leaked";
  EXPECT_EQ(boot_id_of(api, one), first) << "read twice, the same";

  auto write = api.run(one, "echo 00000000-0000-4000-8000-000000000000 > "
                            "/proc/sys/kernel/random/boot_id; echo $?");
  EXPECT_NE(write.stdout_bytes, "0\n") << "the boot id is read-only";
  EXPECT_EQ(boot_id_of(api, one), first);

  run_operation(api, "/v1/sandboxes/" + one + "/pause", json::object());
  run_operation(api, "/v1/sandboxes/" + one + "/resume", json::object());
  EXPECT_EQ(boot_id_of(api, one), first) << "pause keeps the processes: the same boot";

  run_operation(api, "/v1/sandboxes/" + one + "/suspend", json::object());
  run_operation(api, "/v1/sandboxes/" + one + "/wake", json::object());
  const std::string restored = boot_id_of(api, one);
  EXPECT_TRUE(std::regex_match(restored, uuid_v4)) << restored;
  EXPECT_NE(restored, first) << "a restore without memory is a new boot";

  auto forked = api.post("/v1/sandboxes/" + one + "/fork", {{"count", 1}});
  ASSERT_EQ(forked.status, 202) << forked.body;
  auto op = api.wait_operation(forked.json["operation_id"]);
  ASSERT_EQ(op.value("state", ""), "succeeded") << op.dump();
  const std::string child = op["result"]["sandbox_ids"][0];
  const std::string child_boot = boot_id_of(api, child);
  EXPECT_TRUE(std::regex_match(child_boot, uuid_v4)) << child_boot;
  EXPECT_NE(child_boot, restored) << "a fork is a new boot";
  EXPECT_EQ(boot_id_of(api, one), restored) << "the fork's source keeps its own";
  for (const auto& id : {one, two, child})
    EXPECT_EQ(api.call("DELETE", "/v1/sandboxes/" + id).status, 202);
}

} // namespace
} // namespace airlock::test
