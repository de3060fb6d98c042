// Density and honest capacity through the API of a real `airlockd serve`:
// sandboxes with default parameters reserve their small requests (not their
// limits), hundreds run at once and all answer; /v1/workers shows requested,
// limited and used figures that match them; a create that cannot be placed is
// refused at admission and leaves nothing; a create that fails on the worker
// ends its record destroyed, not in error.

#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "tests/api/api_fixture.hpp"
#include "tests/support/wait.hpp"

namespace airlock::test {
namespace {

using nlohmann::json;

/// Sandboxes the density test runs at once (the bar on this 2-core host).
constexpr int sandboxes_at_once = 500;
/// Creates sent before their operations are awaited.
constexpr int create_wave = 25;

struct density_config {
  static constexpr const char* lock_path = "/run/airlock-density-e2e.lock";
  static constexpr const char* what = "the density tests run hundreds of sandboxes";
  static serve_process::options options() {
    serve_process::options dense;
    dense.instance = "dense";
    dense.veth_prefix = "dn";
    dense.address_pool = "10.206.0.0/16";
    dense.uid_base = 800'000'000;
    // Sparse; 500 sandboxes' default disk requests need more than the 4 GiB default.
    dense.image_size_mb = 16384;
    // Stopping destroys all 500 one after another: minutes on a loaded host.
    dense.stop_wait = milliseconds(900'000);
    return dense;
  }
};

class density : public serve_suite<density_config> {
protected:
  /// The one worker of this serve, as GET /v1/workers shows it.
  static json the_worker() {
    auto reply = admin().get("/v1/workers");
    if (reply.status != 200 || reply.json["items"].size() != 1)
      return json::object();
    return reply.json["items"][0];
  }

  /// Every sandbox record the admin sees, whatever its state.
  static std::vector<json> all_sandboxes() {
    std::vector<json> out;
    std::string cursor;
    for (int page = 0; page < 100; ++page) {
      auto reply =
        admin().get("/v1/sandboxes?limit=1000" + (cursor.empty() ? "" : "&cursor=" + cursor));
      if (reply.status != 200)
        break;
      for (const auto& item : reply.json["items"])
        out.push_back(item);
      if (!reply.json["next_cursor"].is_string())
        break;
      cursor = reply.json["next_cursor"].get<std::string>();
    }
    return out;
  }
};

std::string first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

TEST_F(density, a_create_no_worker_can_take_is_refused_at_admission_and_leaves_no_record) {
  auto before = all_sandboxes().size();
  // Valid (a request at most its limit) but more CPU than this host has.
  auto refused = admin().create(
    {{"template", "minimal"}, {"cpu_millis", 64'000}, {"cpu_request_millis", 64'000}});
  EXPECT_EQ(refused.status, 503) << refused.body;
  EXPECT_EQ(refused.error_code(), "no_capacity") << refused.body;
  EXPECT_NE(
    refused.json["error"]["message"].get<std::string>().find("the most any worker has free"),
    std::string::npos)
    << refused.body;
  EXPECT_EQ(refused.headers["retry-after"], "5") << "the refusal says when to retry";
  EXPECT_EQ(all_sandboxes().size(), before) << "a refusal stores nothing";

  auto too_big =
    admin().create({{"template", "minimal"}, {"cpu_millis", 100}, {"cpu_request_millis", 200}});
  EXPECT_EQ(too_big.status, 400) << "a request above its limit is the caller's mistake";
}

TEST_F(density, a_create_that_fails_on_the_worker_ends_destroyed_with_the_reason) {
  auto created = admin().create({{"template", "no-such-template"}});
  ASSERT_EQ(created.status, 202) << created.body;
  auto op = admin().wait_operation(created.json["operation_id"].get<std::string>());
  EXPECT_EQ(op.value("state", ""), "failed") << op.dump();
  auto record = admin().get("/v1/sandboxes/" + created.json["sandbox_id"].get<std::string>());
  ASSERT_EQ(record.status, 200) << record.body;
  EXPECT_EQ(record.json["state"], "destroyed") << record.body;
  EXPECT_TRUE(record.json.contains("error")) << "the record keeps why: " << record.body;
  for (const auto& sandbox : all_sandboxes())
    EXPECT_NE(sandbox["state"], "error") << sandbox.dump();
  // The reservation went back: the worker holds nothing for it.
  EXPECT_TRUE(wait_for([] { return the_worker()["reserved"]["sandboxes"] == 0; }));
}

TEST_F(density, five_hundred_default_sandboxes_run_at_once_and_every_one_answers) {
  std::vector<std::string> ids;
  for (int wave = 0; wave < sandboxes_at_once / create_wave; ++wave) {
    std::vector<std::string> operations;
    for (int i = 0; i < create_wave; ++i) {
      // Default parameters: only the template is named.
      auto created = admin().create({{"template", "minimal"}});
      ASSERT_EQ(created.status, 202) << "sandbox " << ids.size() << ": " << created.body;
      operations.push_back(created.json["operation_id"].get<std::string>());
      ids.push_back(created.json["sandbox_id"].get<std::string>());
    }
    for (const auto& operation : operations) {
      auto op = admin().wait_operation(operation);
      ASSERT_EQ(op.value("state", ""), "succeeded") << op.dump() << "\n" << server().log();
    }
  }
  ASSERT_EQ(ids.size(), static_cast<size_t>(sandboxes_at_once));

  // Requests, not limits, were reserved; the heartbeat's figures match.
  json worker;
  EXPECT_TRUE(wait_for(
    [&worker] {
      worker = the_worker();
      return worker["requested"]["sandboxes"] == sandboxes_at_once
             && worker["used"]["sandboxes"] == sandboxes_at_once;
    },
    std::chrono::seconds(30)))
    << worker.dump();
  auto one = admin().get("/v1/sandboxes/" + ids.front()).json;
  const uint32_t cpu_request = one["cpu_request_millis"];
  const uint32_t memory_request = one["memory_request_mb"];
  EXPECT_GT(cpu_request, 0u) << "the record shows the default request it got: " << one.dump();
  EXPECT_EQ(worker["requested"]["cpu_millis"], cpu_request * sandboxes_at_once);
  EXPECT_EQ(worker["requested"]["memory_mb"], memory_request * sandboxes_at_once);
  EXPECT_EQ(worker["limited"]["cpu_millis"], 1000u * sandboxes_at_once) << worker.dump();
  EXPECT_EQ(worker["limited"]["memory_mb"], 512u * sandboxes_at_once);
  EXPECT_GT(worker["limited"]["cpu_millis"], worker["capacity"]["cpu_millis"])
    << "limits add up beyond the host; requests do not";
  EXPECT_LE(worker["requested"]["cpu_millis"], worker["capacity"]["cpu_millis"]);
  EXPECT_GT(worker["used"]["memory_mb"], 0u);
  EXPECT_EQ(worker["memory_pressure"], false) << worker.dump();

  // CPU share follows the request, quota the limit (read back from the cgroup).
  const std::string v1_cpu = "/sys/fs/cgroup/cpu/dense/" + ids.back();
  const auto shares = std::max(2u, cpu_request * 1024 / 1000);
  if (!first_line(v1_cpu + "/cpu.cfs_quota_us").empty()) {
    EXPECT_EQ(first_line(v1_cpu + "/cpu.cfs_quota_us"), "100000");
    EXPECT_EQ(first_line(v1_cpu + "/cpu.shares"), std::to_string(shares));
  } else {
    const std::string v2 = "/sys/fs/cgroup/dense/" + ids.back();
    EXPECT_EQ(first_line(v2 + "/cpu.max"), "100000 100000") << "neither v1 nor v2 files found";
    EXPECT_EQ(first_line(v2 + "/cpu.weight"),
              std::to_string(1 + (shares - 2) * 9999 / (262'144 - 2)));
  }

  // Every one of them answers.
  std::set<std::string> silent;
  for (size_t i = 0; i < ids.size(); ++i) {
    auto out = admin().run(ids[i], "echo answer-" + std::to_string(i));
    if (out.stdout_bytes != "answer-" + std::to_string(i) + "\n")
      silent.insert(ids[i]);
  }
  EXPECT_TRUE(silent.empty()) << silent.size() << " sandboxes did not answer, e.g. "
                              << *silent.begin();
}

} // namespace
} // namespace airlock::test
