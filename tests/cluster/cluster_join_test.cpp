// Joining with a token, end to end: `airlockd token create` against a running
// control plane, a worker that redeems the token for a certificate naming its
// id and keeps it across restarts, and the refusals: a spent token, a token
// pinning another control plane's CA, forged and malformed join requests.
// The join request is also made by hand here, as a hostile client would.

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <future>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "actors/join_tokens.hpp"
#include "cli/cli.hpp"
#include "crypto/cluster_certificates.hpp"
#include "tests/cluster/cluster_fixture.hpp"
#include "tests/support/http_client.hpp"

namespace airlock::test::cluster {
namespace {

/// POST /v1/cluster/tokens with the admin key; the token's text.
std::string create_token(const std::string& control_url, const std::string& key,
                         const json& body = json::object()) {
  auto answer = call("POST", control_url + "/v1/cluster/tokens", key, body.dump());
  EXPECT_EQ(answer.status, 201) << answer.raw;
  return answer.status == 201 ? answer.body.value("token", "") : "";
}

/// The value of a metric series in /metrics text; -1 when it is absent.
double metric(const std::string& control_url, const std::string& key, const std::string& series) {
  auto text = call("GET", control_url + "/metrics", key).raw;
  for (size_t at = text.find(series + " "); at != std::string::npos;
       at = text.find(series + " ", at + 1))
    if (at == 0 || text[at - 1] == '\n')
      return std::stod(text.substr(at + series.size() + 1));
  return -1;
}

/// A join request for `token` as a worker makes it, MAC and all.
json join_body(const actors::join_token& token, const std::string& csr,
               const std::string& name = "by-hand") {
  return {{"token_id", token.token_id},
          {"csr", csr},
          {"name", name},
          {"mac", actors::join_request_mac(token.mac_key(), token.token_id, csr, name)}};
}

std::string make_csr() {
  return *crypto::create_csr(*crypto::generate_key_pem(), "joining-worker");
}

TEST_F(cluster_e2e, a_worker_with_a_token_joins_as_the_id_its_certificate_names_and_keeps_it) {
  start_control();
  auto created = run_airlockd(paths_, {"token", "create", "--ttl", "10m", "--name", "rack-1"});
  ASSERT_EQ(created.exit_code, 0) << created.err;
  const std::string token = created.out.substr(0, created.out.find('\n'));
  ASSERT_TRUE(actors::parse_join_token(token)) << created.out;
  EXPECT_NE(created.err.find("--token TOKEN"), std::string::npos) << created.err;

  start_worker(0, 0, {"--token", token, "--control-url", control_->url()});
  ASSERT_TRUE(eventually([&] { return worker_in_state("clue2e-0", "ready"); }, rejoin_bound));
  const std::string cluster_dir = worker_dir(0) + "/cluster";
  const std::string cert = read_file(cluster_dir + "/worker.crt");
  const std::string ca = read_file(cluster_dir + "/worker-ca.crt");
  auto member = crypto::verify_member_certificate(ca, cert, std::time(nullptr));
  ASSERT_TRUE(member) << member.error().message;
  EXPECT_EQ(workers().at("clue2e-0")["id"], member->name);
  struct stat key_file {};
  ASSERT_EQ(::stat((cluster_dir + "/worker.key").c_str(), &key_file), 0);
  EXPECT_EQ(key_file.st_mode & 0777, 0600u);
  // The control plane's copy of the CA is what GET /v1/cluster/ca serves.
  auto served = call("GET", control_->url() + "/v1/cluster/ca", key_);
  EXPECT_EQ(served.status, 200);
  EXPECT_EQ(served.raw, ca);
  EXPECT_EQ(metric(control_->url(), key_, "airlock_cluster_joins_refused_total"), -1);

  // Restarted without the (spent) token, it is the same member.
  ASSERT_TRUE(stop_process(*workers_.back().process));
  workers_.pop_back();
  start_worker(0);
  ASSERT_TRUE(eventually(
    [&] {
      auto all = workers();
      return all.count("clue2e-0") == 1 && all["clue2e-0"]["state"] == "ready"
             && all["clue2e-0"]["id"] == member->name;
    },
    rejoin_bound));
}

TEST_F(cluster_e2e, a_spent_token_and_a_token_pinning_another_ca_keep_a_worker_out) {
  start_control();
  const std::string token = create_token(control_->url(), key_);
  ASSERT_FALSE(token.empty());
  // Same secret, another CA pinned: the answer's MAC checks, the CA does not.
  auto parsed = *actors::parse_join_token(token);
  parsed.ca_sha256 = std::string(64, parsed.ca_sha256[0] == 'a' ? 'b' : 'a');
  auto pinned = run_airlockd(
    paths_,
    worker_args(worker_dir(0), control_->cluster_port, "clue2e-0",
                {"--token", parsed.text(), "--control-url", control_->url()}, place_of(0)),
    milliseconds(60'000), place_of(0).host.netns);
  ASSERT_TRUE(pinned.exit_code.has_value());
  EXPECT_NE(*pinned.exit_code, 0);
  EXPECT_NE(pinned.err.find("the token was made for another control plane"), std::string::npos)
    << pinned.err;
  EXPECT_FALSE(std::filesystem::exists(worker_dir(0) + "/cluster/worker.crt"));
  // That join spent the token on the control plane's side: a second worker
  // with the genuine token is refused and told why.
  auto spent =
    run_airlockd(paths_,
                 worker_args(worker_dir(1), control_->cluster_port, "clue2e-1",
                             {"--token", token, "--control-url", control_->url()}, place_of(1)),
                 milliseconds(60'000), place_of(1).host.netns);
  ASSERT_TRUE(spent.exit_code.has_value());
  EXPECT_NE(*spent.exit_code, 0);
  EXPECT_NE(spent.err.find("used already"), std::string::npos) << spent.err;
  EXPECT_EQ(
    metric(control_->url(), key_, "airlock_cluster_joins_refused_total{reason=\"token_used\"}"), 1);
  EXPECT_TRUE(workers().empty());
}

TEST_F(cluster_e2e, forged_and_malformed_joins_are_refused_counted_and_spend_nothing) {
  start_control();
  auto token = *actors::parse_join_token(create_token(control_->url(), key_));
  const std::string join_url = control_->url() + "/v1/cluster/join";
  const std::string csr = make_csr();

  // A MAC made without the secret.
  auto forged = join_body(token, csr);
  forged["mac"] = actors::join_request_mac("guessed", token.token_id, csr, "by-hand");
  auto refused = call("POST", join_url, "", forged.dump());
  EXPECT_EQ(refused.status, 401) << refused.raw;
  EXPECT_EQ(refused.body["error"]["code"], "unauthenticated");
  // A request whose CSR was swapped after it was signed.
  auto swapped = join_body(token, csr);
  swapped["csr"] = make_csr();
  EXPECT_EQ(call("POST", join_url, "", swapped.dump()).status, 401);
  // Malformed CSRs, bodies and fields: 400 naming the problem.
  for (const std::string& bad_csr : {std::string("not a csr"),
                                     std::string("-----BEGIN CERTIFICATE REQUEST-----\nAA==\n"
                                                 "-----END CERTIFICATE REQUEST-----\n"),
                                     csr + csr}) {
    auto answer = call("POST", join_url, "", join_body(token, bad_csr).dump());
    EXPECT_EQ(answer.status, 400) << answer.raw;
    EXPECT_EQ(answer.body["error"]["code"], "invalid_argument");
  }
  for (const std::string& body : {std::string("{"), std::string("[]"), json{{"token_id", 7}}.dump(),
                                  json{{"token_id", token.token_id}, {"csr", csr}}.dump()})
    EXPECT_EQ(call("POST", join_url, "", body).status, 400) << body;
  auto oversized = join_body(token, csr);
  oversized["name"] = std::string(64 * 1024, 'n');
  EXPECT_EQ(call("POST", join_url, "", oversized.dump()).status, 413);
  EXPECT_EQ(
    metric(control_->url(), key_, "airlock_cluster_joins_refused_total{reason=\"bad_csr\"}"), 3);
  EXPECT_EQ(
    metric(control_->url(), key_, "airlock_cluster_joins_refused_total{reason=\"token_invalid\"}"),
    2);

  // None of that spent the token: the rightful request gets a certificate.
  auto admitted = call("POST", join_url, "", join_body(token, csr).dump());
  ASSERT_EQ(admitted.status, 201) << admitted.raw;
  const std::string worker_id = admitted.body["worker_id"];
  EXPECT_EQ(admitted.body["mac"],
            actors::join_answer_mac(token.mac_key(), worker_id,
                                    admitted.body["certificate"].get<std::string>(),
                                    admitted.body["worker_ca"].get<std::string>(),
                                    admitted.body["control_ca"].get<std::string>(),
                                    admitted.body["cluster_port"].get<uint16_t>()));
  EXPECT_EQ("sha256:" + token.ca_sha256,
            *crypto::public_key_fingerprint(admitted.body["control_ca"].get<std::string>()));
  // And only once.
  EXPECT_EQ(call("POST", join_url, "", join_body(token, csr).dump()).status, 403);
  EXPECT_EQ(call("GET", control_->url() + "/healthz", "").status, 200);
}

TEST_F(cluster_e2e, tokens_are_for_admins_with_bounded_lifetimes_and_the_ca_for_any_key) {
  start_control();
  const std::string tokens = control_->url() + "/v1/cluster/tokens";
  EXPECT_EQ(call("POST", tokens, "", "{}").status, 401);
  auto tenant =
    call("POST", control_->url() + "/v1/api-keys", key_, json{{"tenant_id", "t1"}}.dump());
  ASSERT_EQ(tenant.status, 201) << tenant.raw;
  const std::string tenant_key = tenant.body["api_key"];
  EXPECT_EQ(call("POST", tokens, tenant_key, "{}").status, 403);
  for (const json& bad : {json{{"ttl_s", 1}}, json{{"ttl_s", 30 * 86400}}, json{{"ttl_s", "1h"}},
                          json{{"name", 7}}, json{{"name", std::string(65, 'n')}}}) {
    auto answer = call("POST", tokens, key_, bad.dump());
    EXPECT_EQ(answer.status, 400) << bad.dump() << ": " << answer.raw;
    EXPECT_EQ(answer.body["error"]["code"], "invalid_argument");
  }
  auto made = call("POST", tokens, key_, json{{"ttl_s", 120}, {"name", "ci"}}.dump());
  ASSERT_EQ(made.status, 201) << made.raw;
  EXPECT_EQ(made.body["name"], "ci");
  EXPECT_TRUE(made.body.contains("expires_at"));
  auto ca = call("GET", control_->url() + "/v1/cluster/ca", tenant_key);
  EXPECT_EQ(ca.status, 200);
  EXPECT_EQ(ca.raw.rfind("-----BEGIN CERTIFICATE-----", 0), 0u) << ca.raw;
  EXPECT_EQ(call("GET", control_->url() + "/v1/cluster/ca", "").status, 401);
  auto usage = run_airlockd(paths_, {"token", "create", "--ttl", "soon"});
  EXPECT_EQ(usage.exit_code, 2);
  EXPECT_NE(usage.err.find("--ttl"), std::string::npos) << usage.err;
}

} // namespace
} // namespace airlock::test::cluster

namespace airlock::test::cluster {
namespace {

TEST_F(cluster_e2e, a_removed_worker_s_certificate_is_revoked_and_its_next_connection_refused) {
  start_control();
  auto& worker = start_worker(0);
  ASSERT_TRUE(eventually([&] { return worker_in_state("clue2e-0", "ready"); }, rejoin_bound));
  const std::string id = workers()["clue2e-0"]["id"];

  // A ready worker is not removed; only an admin removes; unknown ids are 404.
  auto early = run_airlockd(paths_, {"worker", "remove", id});
  EXPECT_EQ(early.exit_code, 1);
  EXPECT_NE(early.err.find("stop it"), std::string::npos) << early.err;
  auto tenant =
    call("POST", control_->url() + "/v1/api-keys", key_, json{{"tenant_id", "t1"}}.dump());
  EXPECT_EQ(
    call("DELETE", control_->url() + "/v1/workers/" + id, tenant.body.value("api_key", "")).status,
    403);
  EXPECT_EQ(call("DELETE", control_->url() + "/v1/workers/wk_unknown", key_).status, 404);
  EXPECT_EQ(run_airlockd(paths_, {"worker", "remove"}).exit_code, 2);

  ASSERT_TRUE(stop_process(*worker.process));
  workers_.pop_back();
  ASSERT_TRUE(eventually(
    [&] {
      auto removed = run_airlockd(paths_, {"worker", "remove", id});
      return removed.exit_code == 0 && removed.out.find("revoked") != std::string::npos;
    },
    lost_within));
  EXPECT_EQ(workers().count("clue2e-0"), 0u);

  // Its certificate still chains to the CA, but the control plane refuses it.
  auto& again = start_worker(0);
  ASSERT_TRUE(eventually(
    [&] {
      return metric(control_->url(), key_,
                    "airlock_cluster_registrations_refused_total{reason=\"revoked\"}")
             >= 1;
    },
    rejoin_bound));
  EXPECT_EQ(call("GET", again.url() + "/readyz", "").status, 503);
  EXPECT_EQ(workers().count("clue2e-0"), 0u);
}

} // namespace
} // namespace airlock::test::cluster

namespace airlock::test::cluster {
namespace {

/// The serial of the certificate in `path`; empty when it does not verify.
std::string serial_of(const std::string& path, const std::string& ca_path) {
  auto member =
    crypto::verify_member_certificate(read_file(ca_path), read_file(path), std::time(nullptr));
  return member ? member->serial_hex : std::string{};
}

TEST_F(cluster_e2e, certificates_rotate_under_a_streaming_process_and_nothing_drops) {
  start_control();
  // Renewed at every check, once a second: rotation many times over.
  start_worker(0, 0, {"--cert-renew-before-days", "3650", "--cert-check-interval-s", "1"});
  ASSERT_TRUE(eventually([&] { return worker_in_state("clue2e-0", "ready"); }, rejoin_bound));
  const std::string id = create_running();
  const std::string cert = worker_dir(0) + "/cluster/worker.crt";
  const std::string ca = worker_dir(0) + "/cluster/worker-ca.crt";

  // A process that streams for a while, read through the control plane's
  // relay: its chunks cross the cluster link while the certificate turns.
  auto started =
    exec(control_->url(), id, key_, "for i in $(seq 1 40); do echo line-$i; sleep 0.2; done");
  const std::string attach_url = started["attach_url"];
  const std::string relayed = control_->url() + attach_url.substr(attach_url.find("/v1/"));
  auto stream =
    std::async(std::launch::async, [&] { return read_events(relayed + "/output", key_); });
  // And straight from the worker's TLS data listener, whose certificate is
  // the one that turns.
  const std::string attach_token = started["attach_token"];
  auto direct = std::async(std::launch::async,
                           [&] { return read_events(attach_url + "/output", attach_token); });
  std::set<std::string> serials{serial_of(cert, ca)};
  EXPECT_TRUE(eventually(
    [&] {
      serials.insert(serial_of(cert, ca));
      return serials.size() >= 3;
    },
    rejoin_bound))
    << "the certificate was not renewed twice";
  auto output = stream.get();
  EXPECT_TRUE(output.exited);
  std::string expected;
  for (int i = 1; i <= 40; ++i)
    expected += "line-" + std::to_string(i) + "\n";
  EXPECT_EQ(output_text(output.events), expected);
  auto direct_output = direct.get();
  EXPECT_TRUE(direct_output.exited);
  EXPECT_EQ(output_text(direct_output.events), expected);
  // A new TLS connection to the data listener gets a renewed certificate
  // that still verifies and names the listener's address.
  EXPECT_EQ(call("GET", attach_url, attach_token).status, 200);
  EXPECT_EQ(serials.count(""), 0u) << "a certificate on disk did not verify";
  EXPECT_EQ(sandbox(id)["state"], "running");
  EXPECT_TRUE(worker_in_state("clue2e-0", "ready"));
  // A new connection after the rotation uses the new files: the worker
  // restarts and rejoins with its renewed certificate.
  ASSERT_TRUE(stop_process(*workers_.back().process));
  workers_.pop_back();
  start_worker(0);
  EXPECT_TRUE(eventually([&] { return worker_in_state("clue2e-0", "ready"); }, rejoin_bound));
  EXPECT_EQ(sandbox(id)["state"], "running");
}

TEST_F(cluster_e2e, the_data_plane_speaks_only_tls_and_the_cli_trusts_the_cluster_ca_for_it) {
  start_control();
  auto& worker = start_worker(0);
  ASSERT_TRUE(eventually([&] { return worker_in_state("clue2e-0", "ready"); }, rejoin_bound));
  const std::string id = create_running();

  // The worker's URL is https, and plain HTTP gets no answer from it.
  auto listed = call("GET", control_->url() + "/v1/workers", key_);
  ASSERT_EQ(listed.status, 200) << listed.raw;
  EXPECT_EQ(listed.body["items"][0]["data_url"], worker.url());
  EXPECT_EQ(worker.url().rfind("https://", 0), 0u) << worker.url();
  EXPECT_FALSE(test::http_get(worker.host, worker.port, "/healthz"));

  // A client that trusts another CA (the control plane's own) is refused by
  // its TLS check: the worker's certificate is from the worker CA only.
  cli::http_client_options wrong_trust;
  wrong_trust.ca_pem = read_file(worker_dir(0) + "/cluster/control-ca.crt");
  cli::http_request health{"GET", worker.url() + "/healthz", {}, {}};
  auto untrusted = cli::http_send(health, wrong_trust);
  ASSERT_FALSE(untrusted);
  EXPECT_NE(untrusted.error().message.find("not trusted"), std::string::npos)
    << untrusted.error().message;

  // The CLI is given only the control plane's URL and key: it follows the
  // https attach URL to the worker, trusting the CA from GET /v1/cluster/ca.
  std::istringstream in;
  std::ostringstream out, err;
  cli::env_map env{{"AIRLOCK_URL", control_->url()},
                   {"AIRLOCK_API_KEY", key_},
                   {"HOME", dir_.path() + "/cli-home"}};
  cli::cli_options options;
  options.http.connect_timeout_ms = 5'000;
  options.http.io_timeout_ms = 30'000;
  const std::vector<std::string> args{"exec", id, "--", "sh", "-c", "echo through-tls; exit 3"};
  int code = cli::run_cli(args, env, cli::cli_io{in, out, err}, options);
  EXPECT_EQ(code, 3) << err.str();
  EXPECT_EQ(out.str(), "through-tls\n") << err.str();
}

} // namespace
} // namespace airlock::test::cluster
