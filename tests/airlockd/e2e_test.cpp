// End to end: the real airlockd binary as a child process, in a temporary data
// directory, listening on port 0 and reporting the port it got (the fixture:
// e2e_fixture.hpp; control and worker: e2e_cluster_test.cpp). `serve` and
// `worker` run sandboxes, so those tests need root (they skip otherwise) and
// run with this test's own sandbox host options (instance, veth prefix,
// address pool, uid base), never meeting another airlockd on the host; the
// btrfs image they mount under the temporary directory is unmounted at
// teardown.

#include <gtest/gtest.h>

#include <csignal>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "storage/kv_store.hpp"
#include "storage/operation_store.hpp"
#include "tests/airlockd/e2e_fixture.hpp"

namespace airlock::test {
namespace {

TEST_F(airlockd_host_e2e, first_start_prints_one_admin_key_and_writes_a_private_cli_config) {
  auto daemon = serve_default();
  ASSERT_TRUE(daemon.process);
  ASSERT_NE(daemon.bound.port, 0);
  ASSERT_EQ(count_admin_key_lines(daemon.lines), 1u);
  std::string key = daemon.lines.at(0).substr(std::string("admin key: ").size());
  EXPECT_TRUE(is_api_key(key)) << key;

  struct stat st {};
  ASSERT_EQ(::stat(cli_config().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto config = nlohmann::json::parse(read_file(cli_config()));
  EXPECT_EQ(config["api_key"], key);
  EXPECT_EQ(config["url"], "http://127.0.0.1:" + std::to_string(daemon.bound.port));

  ASSERT_EQ(::stat(data_dir().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_TRUE(std::filesystem::is_directory(data_dir() + "/state"));

  EXPECT_EQ(stop(daemon), 0);
  EXPECT_EQ(count_admin_key_lines(daemon.process->read_remaining_lines()), 0u);
}

TEST_F(airlockd_host_e2e, serves_healthz_readyz_and_json_errors) {
  auto daemon = serve_default();
  ASSERT_TRUE(daemon.process);
  auto health = http_get(daemon.bound.host, daemon.bound.port, "/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(health->headers["content-type"], "application/json");
  EXPECT_EQ(nlohmann::json::parse(health->body), (nlohmann::json{{"status", "ok"}}));

  auto ready = http_get(daemon.bound.host, daemon.bound.port, "/readyz");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 200);

  auto missing = http_get(daemon.bound.host, daemon.bound.port, "/x");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  auto body = nlohmann::json::parse(missing->body);
  EXPECT_EQ(body["error"]["code"], "not_found");
  EXPECT_EQ(body["error"]["message"], "no route GET /x; see /v1/openapi.json");
  EXPECT_EQ(stop(daemon), 0);
}

TEST_F(airlockd_host_e2e, sigterm_and_sigint_stop_it_with_exit_status_0) {
  auto daemon = serve_default();
  ASSERT_TRUE(daemon.process);
  EXPECT_EQ(stop(daemon), 0);
  // The listener is gone with it.
  EXPECT_FALSE(http_get(daemon.bound.host, daemon.bound.port, "/healthz"));
  // So are the btrfs image's mount and its loop device.
  EXPECT_EQ(read_file("/proc/self/mountinfo").find(data_dir()), std::string::npos)
    << "something under " << data_dir() << " is still mounted";
  for (const auto& device : std::filesystem::directory_iterator("/sys/block")) {
    auto backing = device.path() / "loop" / "backing_file";
    if (std::filesystem::exists(backing)) {
      EXPECT_EQ(read_file(backing.string()).find(data_dir()), std::string::npos)
        << device.path().filename() << " still backs the image";
    }
  }

  auto again = serve_default();
  ASSERT_TRUE(again.process);
  again.process->send_signal(SIGINT);
  EXPECT_EQ(again.process->wait_exit(), 0);
}

TEST_F(airlockd_host_e2e, a_second_start_on_the_same_data_dir_prints_no_admin_key) {
  auto first = serve_default();
  ASSERT_TRUE(first.process);
  ASSERT_EQ(count_admin_key_lines(first.lines), 1u);
  ASSERT_EQ(stop(first), 0);
  std::string config_after_first = read_file(cli_config());

  auto second = serve_default();
  ASSERT_TRUE(second.process);
  EXPECT_EQ(count_admin_key_lines(second.lines), 0u);
  EXPECT_TRUE(second.lines.empty()) << second.lines.front();
  EXPECT_EQ(stop(second), 0);
  EXPECT_EQ(count_admin_key_lines(second.process->read_remaining_lines()), 0u);
  EXPECT_EQ(read_file(cli_config()), config_after_first);
}

TEST_F(airlockd_host_e2e, the_environment_sets_options_and_flags_beat_it) {
  auto from_env =
    serve({"serve"}, {"AIRLOCK_DATA_DIR=" + data_dir(), "AIRLOCK_LISTEN=127.0.0.2:0"});
  ASSERT_TRUE(from_env.process);
  EXPECT_EQ(from_env.bound.host, "127.0.0.2");
  EXPECT_TRUE(std::filesystem::is_directory(data_dir() + "/state"));
  ASSERT_EQ(stop(from_env), 0);

  auto from_flag = serve({"serve", "--listen", "127.0.0.3:0"},
                         {"AIRLOCK_DATA_DIR=" + data_dir(), "AIRLOCK_LISTEN=127.0.0.2:0"});
  ASSERT_TRUE(from_flag.process);
  EXPECT_EQ(from_flag.bound.host, "127.0.0.3");
  auto health = http_get("127.0.0.3", from_flag.bound.port, "/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(stop(from_flag), 0);
}

TEST_F(airlockd_host_e2e, config_file_values_apply_and_the_environment_beats_them) {
  std::string config = dir_.path() + "/airlockd.json";
  std::string config_data_dir = dir_.path() + "/from-config";
  write_file(config,
             nlohmann::json{{"listen", "127.0.0.4:0"}, {"data_dir", config_data_dir}}.dump());
  auto from_file = serve({"serve", "--config", config});
  ASSERT_TRUE(from_file.process);
  EXPECT_EQ(from_file.bound.host, "127.0.0.4");
  EXPECT_TRUE(std::filesystem::is_directory(config_data_dir + "/state"));
  ASSERT_EQ(stop(from_file), 0);

  auto env_wins = serve({"serve"}, {"AIRLOCK_CONFIG=" + config, "AIRLOCK_LISTEN=127.0.0.2:0"});
  ASSERT_TRUE(env_wins.process);
  EXPECT_EQ(env_wins.bound.host, "127.0.0.2");
  EXPECT_EQ(count_admin_key_lines(env_wins.lines), 0u) << "same data dir as the first start";
  EXPECT_EQ(stop(env_wins), 0);
}

TEST_F(airlockd_e2e, a_bad_flag_or_value_exits_2_with_a_message_and_usage) {
  auto bogus = spawn({"serve", "--bogus"}, environment());
  ASSERT_TRUE(bogus);
  EXPECT_EQ(bogus->wait_exit(), exit_usage);
  std::string err = read_file(bogus->stderr_path());
  EXPECT_NE(err.find("unknown flag --bogus"), std::string::npos) << err;
  EXPECT_NE(err.find("usage: airlockd serve"), std::string::npos) << err;

  auto bad_value = spawn({"serve", "--listen", "nowhere"}, environment());
  ASSERT_TRUE(bad_value);
  EXPECT_EQ(bad_value->wait_exit(), exit_usage);
  EXPECT_NE(read_file(bad_value->stderr_path()).find("--listen"), std::string::npos);

  auto bad_env = spawn({"serve"}, environment({"AIRLOCK_LOG_LEVEL=chatty"}));
  ASSERT_TRUE(bad_env);
  EXPECT_EQ(bad_env->wait_exit(), exit_usage);
  EXPECT_NE(read_file(bad_env->stderr_path()).find("AIRLOCK_LOG_LEVEL"), std::string::npos);

  auto no_command = spawn({"frobnicate"}, environment());
  ASSERT_TRUE(no_command);
  EXPECT_EQ(no_command->wait_exit(), exit_usage);
}

// serve's worker joins its control plane in-process: no cluster port that a
// local user could connect to and ask for credentials or nodes.
TEST_F(airlockd_host_e2e, serve_listens_on_its_http_port_and_nothing_else) {
  auto daemon = serve_default();
  ASSERT_TRUE(daemon.process);
  ASSERT_NE(daemon.bound.port, 0);
  // Joined (ready) before anything is checked: the join is what used a port.
  auto ready = http_get(daemon.bound.host, daemon.bound.port, "/readyz");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 200) << ready->body;
  // Besides HTTP only the egress proxy and its resolver listen (sandboxes'
  // traffic is redirected to them); their ports are in the log.
  std::vector<uint16_t> expected{daemon.bound.port};
  std::istringstream log(read_file(daemon.process->stderr_path()));
  for (std::string line; std::getline(log, line);) {
    auto entry = nlohmann::json::parse(line, nullptr, false);
    if (entry.is_object() && entry.value("msg", "") == "egress proxy listening") {
      expected.push_back(entry.value("proxy_port", uint16_t{0}));
      expected.push_back(entry.value("dns_port", uint16_t{0}));
    }
  }
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(test::listening_tcp_ports(daemon.process->pid()), expected)
    << "airlockd serve listens on a port that is neither HTTP nor egress (a cluster port?)";
  EXPECT_EQ(stop(daemon), 0);
}

TEST_F(airlockd_host_e2e, a_second_concurrent_serve_on_the_same_data_dir_fails_clearly) {
  auto first = serve_default();
  ASSERT_TRUE(first.process);
  std::vector<std::string> args{"serve", "--data-dir", data_dir(), "--listen", "127.0.0.1:0"};
  args.insert(args.end(), sandbox_host_flags.begin(), sandbox_host_flags.end());
  auto second = spawn(args, environment());
  ASSERT_TRUE(second);
  auto status = second->wait_exit();
  ASSERT_TRUE(status.has_value());
  EXPECT_NE(*status, 0);
  EXPECT_TRUE(second->read_remaining_lines().empty()) << "it must not claim to listen";
  std::string err = read_file(second->stderr_path());
  EXPECT_NE(err.find("data directory " + data_dir()), std::string::npos) << err;
  // It names the process that holds the lock, and what to do.
  EXPECT_NE(err.find("held by pid " + std::to_string(first.process->pid()) + " (airlockd)"),
            std::string::npos)
    << err;
  EXPECT_NE(err.find("kill " + std::to_string(first.process->pid())), std::string::npos) << err;
  // The first one is unaffected.
  auto health = http_get(first.bound.host, first.bound.port, "/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(stop(first), 0);
}

TEST_F(airlockd_e2e, version_prints_the_version_and_commit) {
  auto version = spawn({"version"}, environment());
  ASSERT_TRUE(version);
  auto line = version->read_line();
  ASSERT_TRUE(line);
  // "airlockd 0.1.0 (commit 0123456789ab)", or "(commit unknown)" outside git.
  EXPECT_EQ(line->rfind(std::string("airlockd ") + AIRLOCK_VERSION + " (commit ", 0), 0u) << *line;
  EXPECT_EQ(line->back(), ')') << *line;
  EXPECT_EQ(version->wait_exit(), 0);
}

} // namespace
} // namespace airlock::test

namespace airlock::test {
namespace {

/// Stores operations as an earlier airlockd would have left them after a crash.
void leave_unfinished_operations(const std::string& state_dir) {
  auto store = storage::open_rocksdb_store(state_dir);
  ASSERT_TRUE(store) << store.error().message;
  storage::write_batch batch;
  for (int i = 0; i < 3; ++i) {
    schema::operation_record record;
    record.id = "op_left" + std::to_string(i);
    record.kind = "retired.kind"; // no procedure in this build: must end as failed
    record.state = i == 0 ? schema::operation_state::pending : schema::operation_state::running;
    record.step_started = i != 0;
    record.sequence = 1;
    storage::operation_store::stage_put(batch, record);
  }
  ASSERT_TRUE((*store)->write(batch));
}

size_t unfinished(const std::string& state_dir) {
  auto store = storage::open_rocksdb_store(state_dir);
  EXPECT_TRUE(store) << store.error().message;
  if (!store)
    return 0;
  auto active = storage::operation_store{**store}.load_active();
  EXPECT_TRUE(active);
  return active ? active->size() : 0;
}

TEST_F(airlockd_host_e2e, serve_recovers_unfinished_operations_and_drives_each_to_an_end) {
  auto first = serve_default();
  ASSERT_TRUE(first.process);
  ASSERT_EQ(stop(first), 0);
  auto state_dir = data_dir() + "/state";
  leave_unfinished_operations(state_dir);
  ASSERT_EQ(unfinished(state_dir), 3u);
  // Recovery runs before the listener starts; the failure transitions follow
  // within moments. A stop may cut them short, and the next start resumes
  // them, so a few starts at most must end them all.
  size_t left = 3;
  for (int start = 0; start < 5 && left > 0; ++start) {
    auto daemon = serve_default();
    ASSERT_TRUE(daemon.process);
    ASSERT_EQ(stop(daemon), 0);
    left = unfinished(state_dir);
  }
  EXPECT_EQ(left, 0u);
  auto store = storage::open_rocksdb_store(state_dir);
  ASSERT_TRUE(store);
  for (int i = 0; i < 3; ++i) {
    auto record = storage::operation_store{**store}.get("op_left" + std::to_string(i));
    ASSERT_TRUE(record && *record);
    EXPECT_EQ((*record)->state, schema::operation_state::failed);
    ASSERT_TRUE((*record)->error);
    EXPECT_EQ((*record)->error->code, "unknown_kind");
  }
}

} // namespace
} // namespace airlock::test
