// End to end: the real airlockd binary as a child process, in a temporary data
// directory, listening on port 0 and reporting the port it got. `serve` and
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
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/cli.hpp"
#include "cli/http.hpp"
#include "crypto/certificates.hpp"
#include "crypto/cluster_certificates.hpp"
#include "storage/kv_store.hpp"
#include "storage/operation_store.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/environment.hpp"
#include "tests/support/host.hpp"
#include "tests/support/http_client.hpp"

namespace airlock::test {
namespace {

constexpr const char* airlockd_path = AIRLOCK_AIRLOCKD_PATH;
constexpr int exit_usage = 2;

/// The sandbox host options of every serve and worker this test starts.
const std::vector<std::string> sandbox_host_flags{
  "--instance", "airlockde2e", "--veth-prefix",   "ad",  "--address-pool", "10.206.0.0/16",
  "--uid-base", "900000000",   "--image-size-mb", "1024"};

struct address {
  std::string host;
  uint16_t port = 0;
};

/// A started airlockd and what it printed before "listening on".
struct running {
  std::unique_ptr<child_process> process;
  std::vector<std::string> lines; ///< stdout lines before "listening on"
  address bound;
};

class airlockd_e2e : public ::testing::Test {
protected:
  void TearDown() override {
    // Every child has been stopped (or killed) by now; their btrfs images
    // stay mounted by design until the test unmounts them.
    auto left = unmount_below(dir_.path());
    EXPECT_TRUE(left.empty()) << "still mounted: " << left.front();
    if (test::running_as_root()) {
      auto leftovers = remove_instance_leftovers("airlockde2e");
      EXPECT_TRUE(leftovers.empty()) << "cannot remove " << leftovers.front();
    }
  }

  std::string data_dir() const { return dir_.path() + "/data"; }
  std::string cli_config() const { return dir_.path() + "/cli/config.json"; }

  /// A minimal, explicit environment: nothing from the test runner's own
  /// AIRLOCK_* variables leaks in.
  std::vector<std::string> environment(const std::vector<std::string>& extra = {}) const {
    std::vector<std::string> env{"PATH=/usr/bin:/bin", "HOME=" + dir_.path() + "/home",
                                 "AIRLOCK_CLI_CONFIG=" + cli_config()};
    env.insert(env.end(), extra.begin(), extra.end());
    return env;
  }

  std::unique_ptr<child_process> spawn(const std::vector<std::string>& args,
                                       const std::vector<std::string>& env) {
    std::vector<std::string> argv{airlockd_path};
    argv.insert(argv.end(), args.begin(), args.end());
    std::string stderr_path = dir_.path() + "/stderr." + std::to_string(++spawned_);
    auto process = child_process::spawn(argv, env, stderr_path);
    EXPECT_TRUE(process) << "cannot start " << airlockd_path;
    return process;
  }

  /// Starts `airlockd serve` (with the sandbox host flags) and reads stdout
  /// up to "listening on HOST:PORT".
  running serve(const std::vector<std::string>& args,
                const std::vector<std::string>& extra_env = {}) {
    running out;
    std::vector<std::string> all = args;
    all.insert(all.end(), sandbox_host_flags.begin(), sandbox_host_flags.end());
    out.process = spawn(all, environment(extra_env));
    if (!out.process)
      return out;
    while (auto line = out.process->read_line()) {
      if (auto bound = parse_listening(*line)) {
        out.bound = {bound->first, bound->second};
        return out;
      }
      out.lines.push_back(*line);
    }
    ADD_FAILURE() << "airlockd did not report listening; stderr:\n"
                  << read_file(out.process->stderr_path());
    return out;
  }

  /// The usual first start: fresh data dir, port 0.
  running serve_default() {
    return serve({"serve", "--data-dir", data_dir(), "--listen", "127.0.0.1:0"});
  }

  static int stop(running& daemon) {
    daemon.process->send_signal(SIGTERM);
    auto status = daemon.process->wait_exit();
    EXPECT_TRUE(status.has_value()) << "airlockd did not exit after SIGTERM";
    return status.value_or(-1);
  }

  static size_t count_admin_key_lines(const std::vector<std::string>& lines) {
    size_t n = 0;
    for (const auto& line : lines)
      n += line.rfind("admin key: ", 0) == 0 ? 1 : 0;
    return n;
  }

  temp_dir dir_;
  int spawned_ = 0;
};

/// Tests that run serve or worker, which run sandboxes: root only.
class airlockd_host_e2e : public airlockd_e2e {
protected:
  void SetUp() override {
    AIRLOCK_REQUIRE_ROOT("serve and worker run sandboxes");
    // One at a time on this host: they share the airlockde2e instance.
    lock_ = std::make_unique<test::host_lock>("/run/airlock-airlockd-e2e.lock");
    ASSERT_TRUE(lock_->held());
  }

private:
  std::unique_ptr<test::host_lock> lock_;
};

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

/// The address of a "PREFIX HOST:PORT" line such as "cluster listening on ...".
std::optional<address> parse_address_line(std::string_view line, std::string_view prefix) {
  if (!line.starts_with(prefix))
    return std::nullopt;
  auto bound = parse_listening("listening on " + std::string(line.substr(prefix.size())));
  if (!bound)
    return std::nullopt;
  return address{bound->first, bound->second};
}

/// Reads stdout lines up to "listening on HOST:PORT" (kept in `lines`
/// before it); nullopt when the process ends or the wait times out first.
std::optional<address> read_until_listening(child_process& process,
                                            std::vector<std::string>* lines = nullptr) {
  while (auto line = process.read_line()) {
    if (auto bound = parse_listening(*line))
      return address{bound->first, bound->second};
    if (lines != nullptr)
      lines->push_back(*line);
  }
  return std::nullopt;
}

/// GET /readyz until it answers `status` (bounded by wait_max); the last status.
/// GET `path` over TLS from a listener whose certificate chains to `ca_pem`
/// and names its address (a worker's data listener); nullopt when nothing
/// trusted answers.
std::optional<cli::http_response> https_get(const address& at, const std::string& path,
                                            const std::string& ca_pem,
                                            const std::string& bearer = {}) {
  cli::http_client_options options;
  options.ca_pem = ca_pem;
  options.connect_timeout_ms = 5'000;
  options.io_timeout_ms = 10'000;
  cli::http_request request;
  request.url = "https://" + at.host + ":" + std::to_string(at.port) + path;
  if (!bearer.empty())
    request.headers.emplace_back("Authorization", "Bearer " + bearer);
  auto answer = cli::http_send(request, options);
  if (!answer)
    return std::nullopt;
  return std::move(*answer);
}

/// Polls /readyz until it answers `status`; over TLS with `ca_pem` when given.
int poll_readyz(const address& at, int status, const std::string& ca_pem = {}) {
  int last = 0;
  wait_for(
    [&] {
      if (!ca_pem.empty()) {
        auto ready = https_get(at, "/readyz", ca_pem);
        last = ready ? ready->status : 0;
      } else {
        auto ready = http_get(at.host, at.port, "/readyz");
        last = ready ? ready->status : 0;
      }
      return last == status;
    },
    wait_max, milliseconds(50));
  return last;
}

TEST_F(airlockd_e2e, control_serves_its_api_over_tls_and_the_cli_needs_the_ca_to_trust_it) {
  // An operator's CA and a certificate for the listener's address.
  auto ca = crypto::create_root_ca("operator CA", 2);
  ASSERT_TRUE(ca) << ca.error().message;
  auto key = crypto::generate_key_pem();
  auto csr = crypto::create_csr(*key, "control");
  auto cert = crypto::issue_member_certificate(*ca, *csr, "control", 1, {"127.0.0.1"});
  ASSERT_TRUE(cert) << cert.error().message;
  const std::string tls_dir = dir_.path() + "/tls";
  std::filesystem::create_directories(tls_dir);
  write_file(tls_dir + "/api.crt", *cert);
  write_file(tls_dir + "/api.key", *key);
  write_file(tls_dir + "/ca.crt", ca->cert_pem);

  // Half of the pair is a usage error that says what goes with it.
  auto half = spawn({"control", "--tls-cert", tls_dir + "/api.crt"}, environment());
  ASSERT_TRUE(half);
  EXPECT_EQ(half->wait_exit(), exit_usage);
  EXPECT_NE(read_file(half->stderr_path()).find("--tls-key"), std::string::npos);

  auto control =
    spawn({"control", "--data-dir", dir_.path() + "/control", "--listen", "127.0.0.1:0",
           "--cluster-listen", "127.0.0.1:0", "--tls-cert", tls_dir + "/api.crt", "--tls-key",
           tls_dir + "/api.key", "--cli-config", cli_config()},
          environment());
  ASSERT_TRUE(control);
  auto http = read_until_listening(*control);
  ASSERT_TRUE(http) << read_file(control->stderr_path());
  auto health = https_get(*http, "/healthz", ca->cert_pem);
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_FALSE(http_get(http->host, http->port, "/healthz")) << "plain HTTP was answered";

  // The CLI config the first start wrote names the https URL; the CLI
  // trusts the listener with the CA file, and without it says what to give.
  auto written = nlohmann::json::parse(read_file(cli_config()));
  EXPECT_EQ(written["url"], "https://127.0.0.1:" + std::to_string(http->port));
  auto run = [&](std::vector<std::string> args) {
    std::istringstream in;
    std::ostringstream out, err;
    cli::env_map env{{"AIRLOCK_CLI_CONFIG", cli_config()}, {"HOME", dir_.path() + "/home"}};
    int code = cli::run_cli(args, env, cli::cli_io{in, out, err}, cli::cli_options{});
    return std::tuple{code, out.str(), err.str()};
  };
  auto [trusted, listed, trusted_err] = run({"--ca-file", tls_dir + "/ca.crt", "ls", "--json"});
  EXPECT_EQ(trusted, 0) << trusted_err;
  EXPECT_NE(listed.find("items"), std::string::npos) << listed;
  auto [untrusted, nothing, why] = run({"ls"});
  EXPECT_NE(untrusted, 0);
  EXPECT_NE(why.find("not trusted"), std::string::npos) << why;
  EXPECT_NE(why.find("--ca-file"), std::string::npos) << why;
  control->send_signal(SIGTERM);
  EXPECT_EQ(control->wait_exit(), 0);
}

TEST_F(airlockd_e2e, worker_without_join_exits_2) {
  auto worker = spawn({"worker", "--data-dir", data_dir()}, environment());
  ASSERT_TRUE(worker);
  EXPECT_EQ(worker->wait_exit(), exit_usage);
  EXPECT_NE(read_file(worker->stderr_path()).find("--join"), std::string::npos);
}

TEST_F(airlockd_host_e2e, a_worker_joins_control_and_is_ready_only_while_control_is_reachable) {
  auto control = spawn({"control", "--data-dir", dir_.path() + "/control", "--listen",
                        "127.0.0.1:0", "--cluster-listen", "127.0.0.1:0"},
                       environment());
  ASSERT_TRUE(control);
  std::vector<std::string> lines;
  auto http = read_until_listening(*control, &lines);
  ASSERT_TRUE(http) << read_file(control->stderr_path());
  std::string key;
  std::optional<address> cluster;
  for (const auto& line : lines) {
    if (line.rfind("admin key: ", 0) == 0)
      key = line.substr(11);
    if (!cluster)
      cluster = parse_address_line(line, "cluster listening on ");
  }
  ASSERT_TRUE(is_api_key(key)) << key;
  ASSERT_TRUE(cluster) << "control printed no cluster address";
  EXPECT_EQ(http_get(http->host, http->port, "/healthz")->status, 200);

  std::vector<std::string> worker_args{"worker",
                                       "--join",
                                       cluster->host + ":" + std::to_string(cluster->port),
                                       "--data-dir",
                                       dir_.path() + "/worker",
                                       "--data-listen",
                                       "127.0.0.1:0",
                                       "--name",
                                       "e2e-worker"};
  worker_args.insert(worker_args.end(), sandbox_host_flags.begin(), sandbox_host_flags.end());

  // Without a certificate or a token the worker cannot join, and says how.
  auto stranger = spawn(worker_args, environment());
  ASSERT_TRUE(stranger);
  EXPECT_EQ(stranger->wait_exit(), 1);
  EXPECT_NE(read_file(stranger->stderr_path()).find("airlockd token create"), std::string::npos)
    << read_file(stranger->stderr_path());

  http_request token_request{
    "POST", "/v1/cluster/tokens", {{"Authorization", "Bearer " + key}}, R"({"name":"e2e"})"};
  auto token = http_call(http->host, http->port, token_request);
  ASSERT_TRUE(token);
  ASSERT_EQ(token->status, 201) << token->body;
  worker_args.insert(worker_args.end(),
                     {"--token", nlohmann::json::parse(token->body)["token"].get<std::string>(),
                      "--control-url", "http://" + http->host + ":" + std::to_string(http->port)});
  auto worker = spawn(worker_args, environment());
  ASSERT_TRUE(worker);
  auto data = read_until_listening(*worker);
  ASSERT_TRUE(data) << read_file(worker->stderr_path());
  // The data listener serves TLS with the certificate the join got, from the
  // worker CA that GET /v1/cluster/ca gives clients.
  http_request ca_request{"GET", "/v1/cluster/ca", {{"Authorization", "Bearer " + key}}, ""};
  auto ca = http_call(http->host, http->port, ca_request);
  ASSERT_TRUE(ca);
  ASSERT_EQ(ca->status, 200) << ca->body;
  const std::string worker_ca = ca->body;
  EXPECT_EQ(poll_readyz(*data, 200, worker_ca), 200) << "the worker did not join";
  EXPECT_FALSE(http_get(data->host, data->port, "/healthz")) << "plain HTTP was answered";

  // The control plane lists it; its data plane takes tokens, not API keys.
  http_request list{"GET", "/v1/workers", {{"Authorization", "Bearer " + key}}, ""};
  auto workers = http_call(http->host, http->port, list);
  ASSERT_TRUE(workers);
  ASSERT_EQ(workers->status, 200) << workers->body;
  auto items = nlohmann::json::parse(workers->body)["items"];
  ASSERT_EQ(items.size(), 1u) << workers->body;
  EXPECT_EQ(items[0]["name"], "e2e-worker");
  EXPECT_EQ(items[0]["state"], "ready");
  EXPECT_EQ(items[0]["data_url"], "https://" + data->host + ":" + std::to_string(data->port));
  auto refused = https_get(*data, "/v1/sandboxes/sb_x/files?path=/", worker_ca, key);
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 401);

  worker->send_signal(SIGTERM);
  EXPECT_EQ(worker->wait_exit(), 0);
  control->send_signal(SIGTERM);
  EXPECT_EQ(control->wait_exit(), 0);

  // With its control plane gone, a worker listens but is not ready.
  auto orphan = spawn(worker_args, environment());
  ASSERT_TRUE(orphan);
  auto orphan_data = read_until_listening(*orphan);
  ASSERT_TRUE(orphan_data) << read_file(orphan->stderr_path());
  auto ready = https_get(*orphan_data, "/readyz", worker_ca);
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 503) << ready->body;
  EXPECT_EQ(https_get(*orphan_data, "/healthz", worker_ca)->status, 200);
  orphan->send_signal(SIGTERM);
  EXPECT_EQ(orphan->wait_exit(), 0);
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
