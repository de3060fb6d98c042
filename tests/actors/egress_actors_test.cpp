// The credential and audit actors: request validation, scope matching
// (narrowest first), secrets that never come back through the API replies,
// audit appends, queries, retention and lifecycle records.
#include <caf/all.hpp>
#include <gtest/gtest.h>

#include "actors/audit_actor.hpp"
#include "actors/credential_actor.hpp"
#include "actors/errors.hpp"
#include "actors/system_config.hpp"
#include "crypto/sealed_box.hpp"
#include "storage/kv_store.hpp"
#include "tests/actors/live_actors_fixture.hpp"

namespace airlock::actors {
namespace {

using schema::credential_scope;

const std::string master_key(32, 'k');

credential_request request(credential_scope scope, std::string value, std::string secret = "s1") {
  credential_request r;
  r.tenant_id = "acme";
  r.name = "api";
  r.scope = scope;
  r.scope_value = std::move(value);
  r.hosts = {"API.Example.com", "*.example.org:8443"};
  r.header = "Authorization";
  r.value_template = "Bearer {secret}";
  r.secret = std::move(secret);
  r.rate_limit_per_min = 60;
  return r;
}

schema::credential_record stored(std::string id, credential_scope scope, std::string value,
                                 std::string secret, std::string tenant = "acme") {
  schema::credential_record c;
  c.id = std::move(id);
  c.tenant_id = std::move(tenant);
  c.name = c.id;
  c.scope = scope;
  c.scope_value = std::move(value);
  c.hosts = {"api.example.com"};
  c.header = "X-Key";
  c.value_template = "k={secret};again={secret}";
  c.sealed_secret = *crypto::seal(master_key, secret, c.id);
  return c;
}

schema::sandbox_record sandbox(std::string id, std::string tenant, std::string template_name) {
  schema::sandbox_record s;
  s.id = std::move(id);
  s.tenant_id = std::move(tenant);
  s.spec.template_name = std::move(template_name);
  return s;
}

TEST(credential_validation, accepts_a_good_request_and_normalizes_its_hosts) {
  auto hosts = validate_credential_request(request(credential_scope::tenant, "acme"), {});
  ASSERT_TRUE(hosts) << hosts.error().message;
  EXPECT_EQ(*hosts, (std::vector<std::string>{"api.example.com", "*.example.org:8443"}));
}

TEST(credential_validation, refuses_each_bad_field_with_invalid_argument) {
  auto refused = [](auto change) {
    auto r = request(credential_scope::tenant, "acme");
    change(r);
    return validate_credential_request(r, {}).code() == errc::invalid_argument;
  };
  EXPECT_TRUE(refused([](credential_request& r) { r.name.clear(); }));
  EXPECT_TRUE(refused([](credential_request& r) { r.scope_value.clear(); }));
  EXPECT_TRUE(refused([](credential_request& r) { r.hosts.clear(); }));
  EXPECT_TRUE(refused([](credential_request& r) { r.hosts = {"10.0.0.1"}; }));
  EXPECT_TRUE(refused([](credential_request& r) { r.hosts = {"passthrough:api.example.com"}; }));
  EXPECT_TRUE(refused([](credential_request& r) { r.header = "Host"; }));
  EXPECT_TRUE(refused([](credential_request& r) { r.header = "content-length"; }));
  EXPECT_TRUE(refused([](credential_request& r) { r.header = "Transfer-Encoding"; }));
  EXPECT_TRUE(refused([](credential_request& r) { r.header = "Connection"; }));
  EXPECT_TRUE(refused([](credential_request& r) { r.header = "X Bad"; }));
  EXPECT_TRUE(refused([](credential_request& r) { r.value_template = "Bearer"; }));
  EXPECT_TRUE(refused([](credential_request& r) { r.value_template = "{secret}\r\nX: y"; }));
  EXPECT_TRUE(refused([](credential_request& r) { r.secret.clear(); }));
  EXPECT_TRUE(refused([](credential_request& r) { r.secret = std::string(8193, 'a'); }));
  EXPECT_TRUE(refused([](credential_request& r) { r.secret = "a\nb"; }));
  EXPECT_TRUE(refused([](credential_request& r) { r.rate_limit_per_min = 1'000'001; }));
  EXPECT_FALSE(refused([](credential_request& r) { r.secret = std::string(8192, 'a'); }));
}

TEST(credential_grants, narrowest_scope_comes_first_and_other_scopes_are_left_out) {
  std::vector<schema::credential_record> all = {
    stored("cred_1", credential_scope::tenant, "acme", "t"),
    stored("cred_2", credential_scope::template_name, "python", "p"),
    stored("cred_3", credential_scope::sandbox, "sb_1", "s"),
    stored("cred_4", credential_scope::sandbox, "sb_2", "other sandbox"),
    stored("cred_5", credential_scope::template_name, "node", "other template"),
    stored("cred_6", credential_scope::tenant, "acme", "other tenant", "evil")};
  auto grants = grants_for(all, sandbox("sb_1", "acme", "python"), master_key);
  ASSERT_EQ(grants.size(), 3u);
  EXPECT_EQ(grants[0].credential_id, "cred_3");
  EXPECT_EQ(grants[1].credential_id, "cred_2");
  EXPECT_EQ(grants[2].credential_id, "cred_1");
  EXPECT_EQ(grants[0].value, "k=s;again=s");
  EXPECT_EQ(grants[0].scope, credential_scope::sandbox);
}

TEST(credential_grants, a_secret_that_does_not_open_is_left_out_and_reported) {
  auto bad = stored("cred_1", credential_scope::tenant, "acme", "t");
  bad.sealed_secret[0] = static_cast<char>(bad.sealed_secret[0] ^ 1);
  std::vector<std::string> unreadable;
  auto grants = grants_for({bad, stored("cred_2", credential_scope::tenant, "acme", "u")},
                           sandbox("sb_1", "acme", "python"), master_key, &unreadable);
  ASSERT_EQ(grants.size(), 1u);
  EXPECT_EQ(grants[0].credential_id, "cred_2");
  EXPECT_EQ(unreadable, std::vector<std::string>{"cred_1"});
}

class egress_actors : public live_actors_test {
protected:
  egress_actors() {
    registry = own(spawn_sandbox_registry(system, *store, clock));
    credential_actor_deps deps;
    deps.store = store.get();
    deps.master_key = master_key;
    deps.clock = &clock;
    deps.entropy = &entropy;
    deps.registry = registry;
    credentials = own(spawn_credential_actor(system, std::move(deps)));
    audit_options options;
    options.audit_retention_hours = 1;
    audit = own(spawn_audit_actor(system, *store, clock, options));
  }

  sandbox_registry_actor registry;
  credential_actor credentials;
  audit_actor audit;
};

TEST_F(egress_actors, a_created_credential_never_shows_its_secret_and_is_tenant_scoped) {
  auto created = ask<schema::credential_record>(credentials, cr_create_atom::value,
                                                request(credential_scope::tenant, "acme", "sk-1"));
  ASSERT_TRUE(created) << created.error().message;
  EXPECT_EQ(created->id.rfind("cred_", 0), 0u);
  EXPECT_TRUE(created->sealed_secret.empty());
  auto raw = store->get(storage::keyspace::credentials, created->id);
  ASSERT_TRUE(raw && raw->has_value());
  EXPECT_EQ((*raw)->find("sk-1"), std::string::npos) << "the secret is stored in the clear";
  auto mine = ask<schema::credential_record>(credentials, cr_get_atom::value, created->id,
                                             std::string("acme"));
  ASSERT_TRUE(mine);
  EXPECT_TRUE(mine->sealed_secret.empty());
  EXPECT_EQ(ask<schema::credential_record>(credentials, cr_get_atom::value, created->id,
                                           std::string("evil"))
              .code(),
            errc::not_found);
  EXPECT_EQ(ask<bool>(credentials, cr_delete_atom::value, created->id, std::string("evil")).code(),
            errc::not_found);
  auto listed = ask<credential_page>(credentials, cr_list_atom::value, std::string("acme"),
                                     uint32_t{10}, std::string());
  ASSERT_TRUE(listed);
  ASSERT_EQ(listed->items.size(), 1u);
  EXPECT_TRUE(listed->items[0].sealed_secret.empty());
  EXPECT_TRUE(*ask<bool>(credentials, cr_delete_atom::value, created->id, std::string("acme")));
  EXPECT_EQ(ask<bool>(credentials, cr_delete_atom::value, created->id, std::string("acme")).code(),
            errc::not_found);
}

TEST_F(egress_actors, grants_for_a_sandbox_come_from_its_registry_record) {
  auto record = sandbox("sb_1", "acme", "python");
  ASSERT_TRUE(ask<schema::sandbox_record>(registry, rg_create_atom::value, record));
  ASSERT_TRUE(ask<schema::credential_record>(credentials, cr_create_atom::value,
                                             request(credential_scope::tenant, "acme", "wide")));
  ASSERT_TRUE(ask<schema::credential_record>(credentials, cr_create_atom::value,
                                             request(credential_scope::sandbox, "sb_1", "narrow")));
  auto grants = ask<std::vector<schema::credential_grant>>(credentials, cr_grants_atom::value,
                                                           std::string("sb_1"));
  ASSERT_TRUE(grants) << grants.error().message;
  ASSERT_EQ(grants->size(), 2u);
  EXPECT_EQ((*grants)[0].value, "Bearer narrow");
  EXPECT_EQ((*grants)[1].value, "Bearer wide");
  EXPECT_EQ(ask<std::vector<schema::credential_grant>>(credentials, cr_grants_atom::value,
                                                       std::string("sb_none"))
              .code(),
            errc::not_found);
}

TEST_F(egress_actors, audit_appends_are_queryable_and_the_sweep_drops_old_ones) {
  auto now = clock.now_ms();
  std::vector<schema::audit_record> records = {
    {now - 2 * 3'600'000, "acme", "sb_1", "egress", "denied", "old", "a:443", ""},
    {0, "acme", "sb_1", "egress", "allowed", "", "b:443", std::string(5000, 'x')},
    {now, "evil", "sb_9", "dns", "denied", "", "c", ""}};
  ASSERT_TRUE(ask<bool>(audit, au_append_atom::value, records));
  schema::audit_query q;
  q.tenant_id = "acme";
  auto page = ask<audit_page>(audit, au_query_atom::value, q);
  ASSERT_TRUE(page);
  ASSERT_EQ(page->items.size(), 2u);
  EXPECT_EQ(page->items[1].at_ms, now) << "at_ms 0 is stamped with now";
  EXPECT_EQ(page->items[1].detail.size(), 1024u) << "long fields are cut";
  auto deleted = ask<uint64_t>(audit, au_sweep_atom::value);
  ASSERT_TRUE(deleted);
  EXPECT_EQ(*deleted, 1u);
  EXPECT_EQ(ask<audit_page>(audit, au_query_atom::value, schema::audit_query{})->items.size(), 2u);
  std::vector<schema::audit_record> too_many(10'001);
  EXPECT_EQ(ask<bool>(audit, au_append_atom::value, too_many).code(), errc::too_large);
}

TEST(lifecycle_audit, names_the_sandbox_state_kind_and_error_of_an_operation) {
  schema::operation_record op;
  op.id = "op_1";
  op.kind = "sandbox.create";
  op.target_id = "sb_1";
  op.tenant_id = "acme";
  op.state = schema::operation_state::failed;
  op.error = schema::error_info{"resource_exhausted", "no worker has room"};
  op.updated_at_ms = 77;
  auto r = lifecycle_audit(op);
  EXPECT_EQ(
    r, (schema::audit_record{77, "acme", "sb_1", "lifecycle", "failed",
                             "resource_exhausted: no worker has room", "sandbox.create", "op_1"}));
}

} // namespace
} // namespace airlock::actors
