// End to end, split mode: `airlockd control` and `airlockd worker` as child
// processes (the worker runs sandboxes: root only, skipped otherwise), the
// control plane's API over TLS, a worker's TLS data listener and the CLI that
// trusts each with the right CA.

#include <tuple>

#include "cli/cli.hpp"
#include "cli/http.hpp"
#include "crypto/certificates.hpp"
#include "crypto/cluster_certificates.hpp"
#include "tests/airlockd/e2e_fixture.hpp"

namespace airlock::test {
namespace {

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
