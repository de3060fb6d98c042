// From the attacker's side: processes that reach the control plane's cluster
// port and speak CAF, with no certificate, a certificate of another CA, or
// the genuine certificate of another worker (a compromised worker A), and
// try to join, take a live worker's id, act for it, read its sandbox's
// credentials and flood the fleet with registrations. (What a certificate
// holder can still do is listed in docs/cluster.md.)

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <caf/openssl/all.hpp>

#include <chrono>
#include <ctime>
#include <memory>
#include <optional>

#include "actors/cluster_tls.hpp"
#include "actors/errors.hpp"
#include "actors/join_tokens.hpp"
#include "actors/system_config.hpp"
#include "crypto/cluster_certificates.hpp"
#include "schema/atomic_file.hpp"
#include "tests/cluster/cluster_fixture.hpp"
#include "tests/scheduler/stub_node.hpp"

namespace airlock::test::cluster {
namespace {

using std::chrono::seconds;

/// An actor system of the attacker's: plain CAF, or CAF's TLS module with
/// the given files.
struct rogue_system {
  using tls_files = actors::cluster_tls_files;

  explicit rogue_system(const std::optional<tls_files>& tls = std::nullopt)
      : config(actors::actor_system_options{1}) {
    actors::use_middleman(config);
    if (tls)
      actors::use_cluster_tls(config, *tls);
    system = std::make_unique<caf::actor_system>(config);
  }

  /// Connects to the scheduler at `host`:`port` through `connector` (bounded);
  /// the scheduler, or the error that kept it out.
  result<actors::scheduler_actor> connect(const std::string& host, uint16_t port) {
    auto connector = system->has_openssl_manager() ? system->openssl_manager().actor_handle()
                                                   : system->middleman().actor_handle();
    result<actors::scheduler_actor> out = make_status(errc::timeout, "no answer");
    caf::scoped_actor self(*system);
    self->request(connector, seconds(15), caf::connect_atom::value, host, port)
      .receive(
        [&](const caf::node_id&, caf::strong_actor_ptr& remote, std::set<std::string>&) {
          if (remote)
            out = caf::actor_cast<actors::scheduler_actor>(std::move(remote));
          else
            out = make_status(errc::not_found, "nothing published there");
        },
        [&](caf::error& error) { out = to_status(error); });
    return out;
  }

  /// The code of what the scheduler answered `xs...` with (none for a reply
  /// of type Reply).
  template <class Reply, class... Ts>
  errc ask(const actors::scheduler_actor& scheduler, Ts&&... xs) {
    std::optional<status> got;
    caf::scoped_actor self(*system);
    self->request(scheduler, seconds(10), std::forward<Ts>(xs)...)
      .receive([&got](Reply&) { got = status::ok(); },
               [&got](caf::error& error) { got = to_status(error); });
    return got ? got->code : errc::timeout;
  }

  actors::system_config config;
  std::unique_ptr<caf::actor_system> system;
};

/// A registration as a worker would send it, for `id`.
schema::worker_registration registration_for(const std::string& id) {
  schema::worker_registration r;
  r.id = id;
  r.name = "rogue";
  r.cluster_address = "127.0.0.1:0";
  r.data_url = "http://127.0.0.1:9";
  r.capacity = {64'000, 262'144, 1'000'000, 1024};
  r.runtimes = {"namespace"};
  return r;
}

TEST_F(cluster_e2e, hostile_peers_get_no_connection_no_other_id_and_nothing_of_another_worker) {
  start_control();
  start_worker(0);
  ASSERT_TRUE(eventually([&] { return worker_in_state("clue2e-0", "ready"); }, rejoin_bound));
  const std::string sandbox_on_b = create_running();
  ASSERT_FALSE(sandbox_on_b.empty());
  const std::string b = workers()["clue2e-0"].value("id", "");
  ASSERT_FALSE(b.empty());
  const std::string files = dir_.path() + "/rogue";
  ASSERT_TRUE(make_private_directories(files));

  // (a) No certificate: plain CAF gets no connection.
  {
    rogue_system plain;
    auto scheduler = plain.connect(control_->host, control_->cluster_port);
    EXPECT_FALSE(scheduler) << "a peer without TLS reached the scheduler";
  }

  // A compromised worker A: the genuine certificate of a worker admitted
  // with a token (its key made here, as the worker would).
  auto token = *actors::parse_join_token(
    call("POST", control_->url() + "/v1/cluster/tokens", key_, "{}").body.value("token", ""));
  const std::string a_key = *crypto::generate_key_pem();
  const std::string csr = *crypto::create_csr(a_key, "joining-worker");
  auto joined =
    call("POST", control_->url() + "/v1/cluster/join", "",
         json{{"token_id", token.token_id},
              {"csr", csr},
              {"name", "a"},
              {"mac", actors::join_request_mac(token.mac_key(), token.token_id, csr, "a")}}
           .dump());
  ASSERT_EQ(joined.status, 201) << joined.raw;
  const std::string a = joined.body["worker_id"];
  const std::string a_cert = joined.body["certificate"];
  ASSERT_TRUE(write_file_atomically(files + "/a.key", a_key, 0600));
  ASSERT_TRUE(write_file_atomically(files + "/a.crt", a_cert, 0644));
  ASSERT_TRUE(
    write_file_atomically(files + "/control-ca.crt", joined.body["control_ca"].get<std::string>()));

  // (b) A certificate of another CA: the handshake fails.
  {
    auto other_ca = *crypto::create_root_ca("rogue CA", 30);
    auto key = *crypto::generate_key_pem();
    auto cert = *crypto::issue_member_certificate(other_ca, *crypto::create_csr(key, "x"), b, 1);
    ASSERT_TRUE(write_file_atomically(files + "/other.key", key, 0600));
    ASSERT_TRUE(write_file_atomically(files + "/other.crt", cert, 0644));
    rogue_system foreign(rogue_system::tls_files{files + "/other.crt", files + "/other.key",
                                                 files + "/control-ca.crt"});
    EXPECT_FALSE(foreign.connect(control_->host, control_->cluster_port))
      << "a certificate of another CA reached the scheduler";
  }

  // (c) An expired certificate of the fleet's own worker CA (made here with
  // the CA's key from the control plane's data directory, as only a thief
  // of that key could): the handshake fails.
  {
    crypto::key_and_cert worker_ca{read_file(control_dir() + "/cluster/worker-ca.key"),
                                   read_file(control_dir() + "/cluster/worker-ca.crt")};
    const int64_t now = std::time(nullptr);
    auto expired =
      crypto::issue_member_certificate_between(worker_ca, csr, a, now - 3000, now - 60);
    ASSERT_TRUE(expired) << expired.error().message;
    ASSERT_TRUE(write_file_atomically(files + "/expired.crt", *expired, 0644));
    rogue_system stale(
      rogue_system::tls_files{files + "/expired.crt", files + "/a.key", files + "/control-ca.crt"});
    EXPECT_FALSE(stale.connect(control_->host, control_->cluster_port))
      << "an expired certificate reached the scheduler";
  }

  // (e) A's genuine certificate: it connects, and is A and nobody else.
  rogue_system rogue(
    rogue_system::tls_files{files + "/a.crt", files + "/a.key", files + "/control-ca.crt"});
  auto scheduler = rogue.connect(control_->host, control_->cluster_port);
  ASSERT_TRUE(scheduler) << scheduler.error().message;
  auto node =
    testing::spawn_stub_node(*rogue.system, std::make_shared<testing::stub_node_script>());
  const std::string here = caf::to_string(rogue.system->node());
  auto signed_as = [&](const std::string& id, const std::string& certificate) {
    auto r = registration_for(id);
    r.certificate = certificate;
    r.session_secret = std::string(64, 'e');
    r.proof = *crypto::sign_message(a_key, schema::registration_proof_message(id, here));
    return r;
  };
  // As B, with A's certificate; as B with B's own (public) certificate
  // but A's key; with no certificate at all.
  const std::string b_cert = read_file(worker_dir(0) + "/cluster/worker.crt");
  EXPECT_EQ(rogue.ask<actors::registration_ack>(*scheduler, actors::sc_register_atom::value,
                                                signed_as(b, a_cert), node),
            errc::permission_denied);
  EXPECT_EQ(rogue.ask<actors::registration_ack>(*scheduler, actors::sc_register_atom::value,
                                                signed_as(b, b_cert), node),
            errc::permission_denied);
  EXPECT_EQ(rogue.ask<actors::registration_ack>(*scheduler, actors::sc_register_atom::value,
                                                registration_for(b), node),
            errc::permission_denied);
  // Thousands of made-up ids: every one refused, none listed.
  constexpr int flood = 2000;
  int refused = 0;
  for (int i = 0; i < flood; ++i)
    refused +=
      rogue.ask<actors::registration_ack>(*scheduler, actors::sc_register_atom::value,
                                          signed_as("wk_flood" + std::to_string(i), a_cert), node)
      == errc::permission_denied;
  EXPECT_EQ(refused, flood);
  // Oversized: refused on its size, before anything in it is parsed.
  auto huge = signed_as(a, a_cert);
  huge.certificate = std::string(1 << 20, 'C');
  EXPECT_EQ(
    rogue.ask<actors::registration_ack>(*scheduler, actors::sc_register_atom::value, huge, node),
    errc::invalid_argument);
  huge = signed_as(a, a_cert);
  huge.name = std::string(1 << 20, 'n');
  EXPECT_EQ(
    rogue.ask<actors::registration_ack>(*scheduler, actors::sc_register_atom::value, huge, node),
    errc::invalid_argument);

  // A node that the control plane would call without a session secret (so
  // past any gate), or with one of the wrong shape: refused.
  auto ungated = signed_as(a, a_cert);
  ungated.session_secret.clear();
  EXPECT_EQ(
    rogue.ask<actors::registration_ack>(*scheduler, actors::sc_register_atom::value, ungated, node),
    errc::invalid_argument);
  ungated.session_secret = "not hex";
  EXPECT_EQ(
    rogue.ask<actors::registration_ack>(*scheduler, actors::sc_register_atom::value, ungated, node),
    errc::invalid_argument);

  // Registered as itself, it still gets nothing of B's.
  ASSERT_EQ(rogue.ask<actors::registration_ack>(*scheduler, actors::sc_register_atom::value,
                                                signed_as(a, a_cert), node),
            errc::none);
  schema::worker_heartbeat beat;
  beat.worker_id = b;
  beat.sequence = 1'000'000;
  EXPECT_EQ(rogue.ask<bool>(*scheduler, actors::sc_beat_atom::value, beat),
            errc::permission_denied);
  EXPECT_EQ(rogue.ask<std::vector<schema::credential_grant>>(
              *scheduler, actors::sc_creds_atom::value, sandbox_on_b),
            errc::permission_denied);
  schema::audit_record forged;
  forged.sandbox_id = sandbox_on_b;
  forged.kind = "egress";
  forged.decision = "allowed";
  EXPECT_EQ(rogue.ask<bool>(*scheduler, actors::sc_audit_atom::value,
                            std::vector<schema::audit_record>{forged}),
            errc::permission_denied);
  EXPECT_EQ(rogue.ask<std::vector<actors::worker_view>>(*scheduler, actors::sc_workers_atom::value),
            errc::permission_denied);
  EXPECT_EQ(rogue.ask<actors::placement>(*scheduler, actors::sc_node_atom::value, b),
            errc::permission_denied);

  // B keeps its id, its node and its sandbox; the refusals are counted.
  EXPECT_TRUE(worker_in_state("clue2e-0", "ready"));
  auto listed = workers();
  EXPECT_EQ(listed.count("rogue"), 1u) << "A itself is a member";
  auto started = exec(control_->url(), sandbox_on_b, key_, "echo still served by its worker");
  EXPECT_TRUE(started.contains("process_id")) << started.dump();
  auto figures = call("GET", control_->url() + "/metrics", "");
  ASSERT_EQ(figures.status, 200);
  EXPECT_NE(figures.raw.find("airlock_cluster_registrations_refused_total{reason=\"identity\"} "
                             + std::to_string(flood + 3)),
            std::string::npos)
    << figures.raw.substr(0, 4000);
  caf::anon_send_exit(node, caf::exit_reason::user_shutdown);
}

} // namespace
} // namespace airlock::test::cluster
