// The scheduler's egress-control duties on CAF's test scheduler: it issues a
// worker's egress CA chain at registration and answers a worker's credential
// and audit calls by delegating to the control plane's actors.
#include <caf/all.hpp>
#include <caf/scheduler/test_coordinator.hpp>
#include <gtest/gtest.h>

#include "actors/errors.hpp"
#include "actors/system_config.hpp"
#include "crypto/sealed_box.hpp"
#include "scheduler/scheduler_actor.hpp"
#include "storage/kv_store.hpp"
#include "tests/scheduler/stub_node.hpp"

namespace airlock::actors {
namespace {

caf::actor_system_config& prepared(system_config& config) {
  use_test_scheduler(config);
  return config;
}

schema::worker_registration registration(std::string id, std::string egress_key) {
  schema::worker_registration r;
  r.id = std::move(id);
  r.name = "host";
  r.cluster_address = "10.0.0.1:7100";
  r.data_url = "http://h:7071";
  r.capacity = {1000, 1024, 100'000, 10};
  r.egress_ca_public_key = std::move(egress_key);
  return r;
}

class egress_delegation : public ::testing::Test {
protected:
  egress_delegation()
      : system(prepared(config)),
        sched(dynamic_cast<caf::scheduler::test_coordinator&>(system.scheduler())) {}

  ~egress_delegation() override {
    for (auto handle : handles)
      caf::anon_send_exit(handle, caf::exit_reason::user_shutdown);
    sched.run();
    while (sched.trigger_timeouts() > 0)
      sched.run();
  }

  /// A scheduler; with `full`, also the registry, credential and audit actors.
  void start(bool full) {
    scheduler::scheduler_deps deps;
    deps.token_public_key = std::string(32, '\x2a');
    deps.clock = &clock;
    deps.entropy = &entropy;
    deps.issue_egress_ca = [](std::string_view key,
                              std::string_view worker) -> result<std::string> {
      if (key == "bad")
        return make_status(errc::invalid_argument, "not a key");
      return "CHAIN(" + std::string(worker) + "," + std::string(key) + ")";
    };
    if (full) {
      registry = spawn_sandbox_registry(system, *store, clock);
      credential_actor_deps cdeps;
      cdeps.store = store.get();
      cdeps.master_key = std::string(32, 'k');
      cdeps.clock = &clock;
      cdeps.entropy = &entropy;
      cdeps.registry = registry;
      deps.credentials = spawn_credential_actor(system, std::move(cdeps));
      deps.audit = spawn_audit_actor(system, *store, clock);
      credentials = deps.credentials;
      audit = deps.audit;
      handles = {caf::actor_cast<caf::actor>(registry), caf::actor_cast<caf::actor>(credentials),
                 caf::actor_cast<caf::actor>(audit)};
    }
    scheduler_ = scheduler::spawn_scheduler(system, {}, std::move(deps));
    handles.push_back(caf::actor_cast<caf::actor>(scheduler_));
    sched.run();
  }

  template <class T, class Handle, class... Ts>
  caf::expected<T> ask(const Handle& dest, Ts&&... xs) {
    caf::scoped_actor asker{system};
    auto handle = asker->request(dest, caf::infinite, std::forward<Ts>(xs)...);
    sched.run();
    if (asker->mailbox().empty())
      return caf::make_error(caf::sec::request_timeout);
    caf::expected<T> out{caf::make_error(caf::sec::unexpected_response)};
    handle.receive([&out](T& value) { out = std::move(value); },
                   [&out](caf::error& err) { out = std::move(err); });
    return out;
  }

  node_actor new_node() {
    auto node = testing::spawn_stub_node(system, script);
    handles.push_back(caf::actor_cast<caf::actor>(node));
    return node;
  }

  system_config config;
  caf::actor_system system;
  caf::scheduler::test_coordinator& sched;
  manual_wall_clock clock;
  seeded_entropy entropy{7};
  std::unique_ptr<storage::kv_store> store = storage::make_memory_store();
  std::shared_ptr<testing::stub_node_script> script = std::make_shared<testing::stub_node_script>();
  sandbox_registry_actor registry;
  credential_actor credentials;
  audit_actor audit;
  scheduler_actor scheduler_;
  std::vector<caf::actor> handles;
};

TEST_F(egress_delegation, registration_carries_the_issued_egress_chain_or_fails_with_its_error) {
  start(false);
  auto ack = ask<registration_ack>(scheduler_, sc_register_atom::value,
                                   registration("wk_1", "PUBKEY"), new_node());
  ASSERT_TRUE(ack) << to_status(ack.error()).message;
  EXPECT_EQ(ack->egress_ca_chain, "CHAIN(wk_1,PUBKEY)");
  auto plain = ask<registration_ack>(scheduler_, sc_register_atom::value, registration("wk_2", ""),
                                     new_node());
  ASSERT_TRUE(plain);
  EXPECT_TRUE(plain->egress_ca_chain.empty());
  auto refused = ask<registration_ack>(scheduler_, sc_register_atom::value,
                                       registration("wk_3", "bad"), new_node());
  ASSERT_FALSE(refused);
  EXPECT_EQ(to_status(refused.error()).code, errc::invalid_argument);
}

TEST_F(egress_delegation, without_credential_and_audit_actors_the_calls_are_unavailable) {
  start(false);
  auto creds = ask<std::vector<schema::credential_grant>>(scheduler_, sc_creds_atom::value,
                                                          std::string("sb_1"));
  ASSERT_FALSE(creds);
  EXPECT_EQ(to_status(creds.error()).code, errc::unavailable);
  auto appended = ask<bool>(scheduler_, sc_audit_atom::value, std::vector<schema::audit_record>{});
  ASSERT_FALSE(appended);
  EXPECT_EQ(to_status(appended.error()).code, errc::unavailable);
}

TEST_F(egress_delegation, credentials_and_audit_records_pass_through_to_their_actors) {
  start(true);
  schema::sandbox_record sandbox;
  sandbox.id = "sb_1";
  sandbox.tenant_id = "acme";
  sandbox.spec.template_name = "python";
  ASSERT_TRUE(ask<schema::sandbox_record>(registry, rg_create_atom::value, sandbox));
  credential_request request;
  request.tenant_id = "acme";
  request.name = "gh";
  request.scope = schema::credential_scope::template_name;
  request.scope_value = "python";
  request.hosts = {"api.github.com"};
  request.header = "Authorization";
  request.value_template = "token {secret}";
  request.secret = "ghp_x";
  ASSERT_TRUE(ask<schema::credential_record>(credentials, cr_create_atom::value, request));
  auto grants = ask<std::vector<schema::credential_grant>>(scheduler_, sc_creds_atom::value,
                                                           std::string("sb_1"));
  ASSERT_TRUE(grants) << to_status(grants.error()).message;
  ASSERT_EQ(grants->size(), 1u);
  EXPECT_EQ((*grants)[0].value, "token ghp_x");
  std::vector<schema::audit_record> records = {
    {5, "acme", "sb_1", "egress", "denied", "not allowed", "x:443", ""}};
  auto appended = ask<bool>(scheduler_, sc_audit_atom::value, records);
  ASSERT_TRUE(appended);
  auto page = ask<audit_page>(audit, au_query_atom::value, schema::audit_query{});
  ASSERT_TRUE(page);
  EXPECT_EQ(page->items, records);
}

} // namespace
} // namespace airlock::actors
