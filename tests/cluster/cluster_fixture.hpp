#pragma once
// The split-mode fixture: `airlockd control` and `airlockd worker` as child
// processes, each on a "host" of its own (a network namespace with its own
// address on a bridge: host_network.hpp), one cluster test at a time on this
// machine. The test itself is a client on the bridge.

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tests/cluster/cluster_support.hpp"
#include "tests/support/environment.hpp"

namespace airlock::test::cluster {

using namespace std::chrono_literals;

constexpr const char* airlockd_path = AIRLOCK_AIRLOCKD_PATH;
/// The scheduler's heartbeat_timeout_ms (5 s) plus generous slack.
constexpr milliseconds lost_within = 20s;
/// A create or another lifecycle operation on an idle machine takes well
/// under a second; CI hosts are slow and the first create builds a template.
constexpr milliseconds operation_bound = 120s;
/// Reconnect backoff doubles up to 30 s; a rejoin may wait for one of those.
constexpr milliseconds rejoin_bound = 60s;
/// The control plane's host and up to three workers' hosts.
constexpr int cluster_hosts = 4;
/// Names of the hosts' namespaces and devices (alct-h0, alctp0, alctbr).
constexpr const char* network_prefix = "alct";

class cluster_e2e : public ::testing::Test {
protected:
  void SetUp() override {
    AIRLOCK_REQUIRE_ROOT("workers create namespaces, btrfs images and nftables rules");
    // One cluster test at a time on this host: they share the clue2e
    // instance (nftables table, cgroup parent, veth prefix, address pool).
    lock_fd_ = ::open("/run/airlock-cluster-e2e.lock", O_CREAT | O_RDWR | O_CLOEXEC, 0600);
    ASSERT_GE(lock_fd_, 0);
    ASSERT_EQ(::flock(lock_fd_, LOCK_EX), 0);
    paths_.airlockd = airlockd_path;
    paths_.scratch = dir_.path();
    network_ = std::make_unique<host_network>(network_prefix, cluster_hosts);
    ASSERT_EQ(network_->error(), "") << "cannot make the test's hosts";
  }

  void TearDown() override {
    for (auto& worker : workers_) {
      if (worker.process)
        stop_process(*worker.process);
      unmount_worker_rootfs(worker.data_dir);
    }
    if (control_ && control_->process)
      stop_process(*control_->process);
    // Every worker of this test has exited: its table and cgroups can go.
    for (int n = 0; n + 1 < cluster_hosts; ++n)
      for (const auto& failure : remove_instance_leftovers(worker_instance(n)))
        ADD_FAILURE() << "cleanup: " << failure;
    network_.reset();
    for (const auto& left : host_network::leftovers(network_prefix, cluster_hosts))
      ADD_FAILURE() << "cleanup: " << left << " is left";
    if (lock_fd_ >= 0)
      ::close(lock_fd_); // drops the flock
  }

  std::string control_dir() const { return dir_.path() + "/control"; }
  std::string worker_dir(int n = 0) const { return dir_.path() + "/worker" + std::to_string(n); }

  /// Starts the control plane; remembers the admin key of the first start.
  void start_control(uint16_t cluster_port = 0) {
    control_ = cluster::start_control(paths_, control_dir(), cluster_port, network_->host(0));
    ASSERT_TRUE(control_);
    if (!control_->admin_key.empty())
      key_ = control_->admin_key;
    ASSERT_FALSE(key_.empty()) << "the first start prints the admin key";
  }

  /// Starts a worker joining the current control plane (or `join_port`).
  /// A worker without a certificate yet gets a join token first.
  worker_daemon& start_worker(int n = 0, uint16_t join_port = 0,
                              std::vector<std::string> extra = {}) {
    auto port = join_port != 0 ? join_port : control_->cluster_port;
    const bool has_token = std::find(extra.begin(), extra.end(), "--token") != extra.end();
    if (!has_token && !std::filesystem::exists(worker_dir(n) + "/cluster/worker.crt")) {
      auto token = call("POST", control_->url() + "/v1/cluster/tokens", key_,
                        json{{"name", "clue2e-" + std::to_string(n)}}.dump());
      EXPECT_EQ(token.status, 201) << token.raw;
      extra.insert(extra.end(),
                   {"--token", token.body.value("token", ""), "--control-url", control_->url()});
    }
    auto started = cluster::start_worker(paths_, worker_dir(n), port, "clue2e-" + std::to_string(n),
                                         extra, place_of(n));
    EXPECT_TRUE(started);
    workers_.push_back(started ? std::move(*started) : worker_daemon{});
    workers_.back().data_dir = worker_dir(n);
    return workers_.back();
  }

  host_address control_host() const { return network_->host(0); }

  /// Worker `n`'s host, joining the control plane's.
  worker_place place_of(int n) const { return {network_->host(1 + n), network_->host(0).ip}; }

  /// Workers as GET /v1/workers lists them, by name.
  std::map<std::string, json> workers() {
    auto answer = call("GET", control_->url() + "/v1/workers", key_);
    std::map<std::string, json> out;
    if (answer.status != 200)
      return out;
    for (const auto& item : answer.body["items"])
      out[item.value("name", "")] = item;
    return out;
  }

  bool worker_in_state(const std::string& name, const std::string& state) {
    auto all = workers();
    auto found = all.find(name);
    return found != all.end() && found->second["state"] == state;
  }

  /// POST /v1/sandboxes for `minimal` (with `extra` fields); the (sandbox
  /// id, operation id).
  std::pair<std::string, std::string> post_create(const json& extra = json::object()) {
    json body{{"template", "minimal"},
              {"cpu_millis", 100}, // the host may have only 2 CPUs
              {"memory_mb", 256},
              {"disk_mb", 512}};
    body.update(extra);
    auto answer = call("POST", control_->url() + "/v1/sandboxes", key_, body.dump());
    EXPECT_EQ(answer.status, 202) << answer.raw;
    if (answer.status != 202)
      return {};
    return {answer.body["sandbox_id"], answer.body["operation_id"]};
  }

  /// Creates a sandbox and waits until it runs; its id.
  std::string create_running(const json& extra = json::object()) {
    auto [sandbox, operation] = post_create(extra);
    auto done = wait_operation(control_->url(), key_, operation, operation_bound);
    EXPECT_EQ(done["state"], "succeeded") << done.dump();
    return sandbox;
  }

  json sandbox(const std::string& id) {
    return call("GET", control_->url() + "/v1/sandboxes/" + id, key_).body;
  }

  /// POST a lifecycle verb (or DELETE); the operation id.
  std::string post_verb(const std::string& id, const std::string& verb) {
    auto answer =
      verb == "delete"
        ? call("DELETE", control_->url() + "/v1/sandboxes/" + id, key_)
        : call("POST", control_->url() + "/v1/sandboxes/" + id + "/" + verb, key_, "{}");
    EXPECT_EQ(answer.status, 202) << verb << " " << id << ": " << answer.raw;
    return answer.status == 202 ? answer.body["operation_id"].get<std::string>() : "";
  }

  /// Starts `cmd` at `base` (a worker's or the control plane's URL) with
  /// `bearer`; the 201 body.
  json exec(const std::string& base, const std::string& sandbox_id, const std::string& bearer,
            const std::string& cmd) {
    auto answer = call("POST", base + "/v1/sandboxes/" + sandbox_id + "/processes", bearer,
                       json{{"cmd", cmd}}.dump());
    EXPECT_EQ(answer.status, 201) << answer.raw;
    return answer.body;
  }

  temp_dir dir_;
  cluster_paths paths_;
  int lock_fd_ = -1;
  std::unique_ptr<host_network> network_; ///< made in SetUp, under the lock
  std::optional<control_daemon> control_;
  std::vector<worker_daemon> workers_;
  std::string key_;
};

} // namespace airlock::test::cluster
