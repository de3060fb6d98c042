// The credential and audit routes: validation with clear 400s, tenant
// scoping, a secret that never comes back, audit filters. Real actors over
// an in-memory store; exchanges are answered into a recording transport.
#include <caf/all.hpp>
#include <gtest/gtest.h>

#include <thread>

#include "actors/system_config.hpp"
#include "gateway/api_json.hpp"
#include "gateway/egress_routes.hpp"
#include "gateway/exchange.hpp"
#include "scheduler/scheduler_actor.hpp"
#include "storage/kv_store.hpp"
#include "tests/gateway/recording_transport.hpp"
#include "tests/scheduler/stub_node.hpp"
#include "tests/support/wait.hpp"

namespace airlock::gateway {
namespace {

using nlohmann::json;
using std::chrono::seconds;

const std::string secret = "sk-live-0123456789";

json good_body(json scope = {{"tenant", true}}) {
  return {{"name", "openai"},
          {"scope", scope},
          {"hosts", {"api.openai.com"}},
          {"inject", {{"header", "Authorization"}, {"value_template", "Bearer {secret}"}}},
          {"secret", secret},
          {"rate_limit_per_min", 600}};
}

class egress_routes : public ::testing::Test {
protected:
  egress_routes() {
    deps.system = &system;
    deps.registry = actors::spawn_sandbox_registry(system, *store, clock);
    deps.api_keys = actors::spawn_api_key_actor(system, *store, clock);
    actors::credential_actor_deps c;
    c.store = store.get();
    c.master_key = std::string(32, 'm');
    c.clock = &clock;
    c.entropy = &entropy;
    c.registry = deps.registry;
    deps.credentials = actors::spawn_credential_actor(system, std::move(c));
    deps.audit = actors::spawn_audit_actor(system, *store, clock);
    add_egress_routes(routes, deps);
    acme_key = new_key("acme");
    evil_key = new_key("evil");
  }
  ~egress_routes() override {
    caf::anon_send_exit(deps.registry, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(deps.api_keys, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(deps.credentials, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(deps.audit, caf::exit_reason::user_shutdown);
  }

  std::string new_key(const std::string& tenant) {
    caf::scoped_actor self{system};
    std::string key;
    self->request(deps.api_keys, seconds(10), actors::key_create_atom::value, tenant)
      .receive([&key](std::string& made) { key = made; }, [](caf::error&) {});
    return key;
  }

  void add_sandbox(const schema::sandbox_record& record) {
    caf::scoped_actor self{system};
    self->request(deps.registry, seconds(10), actors::rg_create_atom::value, record)
      .receive([](schema::sandbox_record&) {}, [](caf::error&) { ADD_FAILURE(); });
  }

  void add_audit(const std::vector<schema::audit_record>& records) {
    caf::scoped_actor self{system};
    self->request(deps.audit, seconds(10), actors::au_append_atom::value, records)
      .receive([](bool) {}, [](caf::error&) { ADD_FAILURE(); });
  }

  /// Sends one request through the route table and waits for its answer.
  std::pair<http::status, json> call(http::verb method, const std::string& target,
                                     const std::string& key, const json& body = nullptr) {
    http_request request{method, target, 11};
    if (!key.empty())
      request.set(http::field::authorization, "Bearer " + key);
    if (!body.is_null())
      request.body() = body.dump();
    auto path = target.substr(0, target.find('?'));
    auto match = routes.match(method, path);
    if (match.result != route_match::outcome::found)
      return {http::status::not_found, nullptr};
    auto transport = std::make_shared<test::recording_transport>();
    auto ex = std::make_shared<exchange>(request, match.route->pattern, match.params, transport, 1);
    match.route->async_handler(ex);
    auto response = transport->wait();
    auto parsed = json::parse(response.body(), nullptr, false);
    return {response.result(), parsed.is_discarded() ? json(response.body()) : parsed};
  }

  actors::system_config config;
  caf::actor_system system{config};
  std::unique_ptr<storage::kv_store> store = storage::make_memory_store();
  manual_wall_clock clock;
  system_entropy entropy;
  control_api_deps deps;
  route_table routes;
  std::string acme_key;
  std::string evil_key;
};

TEST_F(egress_routes, a_created_credential_answers_201_and_never_shows_its_secret) {
  auto [status, body] = call(http::verb::post, "/v1/credentials", acme_key, good_body());
  ASSERT_EQ(status, http::status::created) << body.dump();
  EXPECT_EQ(body.dump().find(secret), std::string::npos);
  EXPECT_FALSE(body.contains("secret"));
  EXPECT_EQ(body["scope"], (json{{"tenant", "acme"}}));
  EXPECT_EQ(body["inject"]["value_template"], "Bearer {secret}");
  auto id = body["id"].get<std::string>();
  auto [got_status, got] = call(http::verb::get, "/v1/credentials/" + id, acme_key);
  EXPECT_EQ(got_status, http::status::ok);
  EXPECT_EQ(got.dump().find(secret), std::string::npos);
  auto [list_status, list] = call(http::verb::get, "/v1/credentials", acme_key);
  EXPECT_EQ(list_status, http::status::ok);
  EXPECT_EQ(list["items"].size(), 1u);
  EXPECT_EQ(list.dump().find(secret), std::string::npos);
  // Another tenant sees nothing of it.
  EXPECT_EQ(call(http::verb::get, "/v1/credentials/" + id, evil_key).first,
            http::status::not_found);
  EXPECT_EQ(call(http::verb::get, "/v1/credentials", evil_key).second["items"].size(), 0u);
  EXPECT_EQ(call(http::verb::delete_, "/v1/credentials/" + id, evil_key).first,
            http::status::not_found);
  EXPECT_EQ(call(http::verb::delete_, "/v1/credentials/" + id, acme_key).first, http::status::ok);
  EXPECT_EQ(call(http::verb::get, "/v1/credentials/" + id, acme_key).first,
            http::status::not_found);
}

TEST_F(egress_routes, bad_credentials_get_a_400_that_names_the_field) {
  struct bad_case {
    std::function<void(json&)> change;
    std::string field;
  };
  std::vector<bad_case> cases = {
    {[](json& b) { b.erase("name"); }, "name"},
    {[](json& b) {
       b["scope"] = {{"tenant", true}, {"template", "x"}};
     },
     "scope"},
    {[](json& b) {
       b["scope"] = {{"planet", "x"}};
     },
     "scope"},
    {[](json& b) {
       b["scope"] = {{"tenant", "evil"}};
     },
     "scope.tenant"},
    {[](json& b) { b["hosts"] = json::array(); }, "hosts"},
    {[](json& b) { b["hosts"] = {"169.254.169.254"}; }, "hosts"},
    {[](json& b) { b["inject"]["header"] = "Host"; }, "inject.header"},
    {[](json& b) { b["inject"]["header"] = "Transfer-Encoding"; }, "inject.header"},
    {[](json& b) { b["inject"]["value_template"] = "Bearer"; }, "inject.value_template"},
    {[](json& b) { b["secret"] = ""; }, "secret"},
    {[](json& b) { b["secret"] = std::string(8193, 'x'); }, "secret"},
    {[](json& b) { b["rate_limit_per_min"] = 1'000'001; }, "rate_limit_per_min"},
    {[](json& b) { b["rate_limit_per_min"] = -1; }, "rate_limit_per_min"},
  };
  for (auto& c : cases) {
    auto body = good_body();
    c.change(body);
    auto [status, answer] = call(http::verb::post, "/v1/credentials", acme_key, body);
    EXPECT_EQ(status, http::status::bad_request) << c.field;
    auto message = answer["error"]["message"].get<std::string>();
    EXPECT_NE(message.find(c.field), std::string::npos) << message;
    EXPECT_EQ(answer.dump().find(secret), std::string::npos);
  }
  EXPECT_EQ(call(http::verb::post, "/v1/credentials", "", good_body()).first,
            http::status::unauthorized);
}

TEST_F(egress_routes, a_sandbox_scope_names_a_sandbox_the_caller_can_see) {
  schema::sandbox_record sandbox;
  sandbox.id = "sb_1";
  sandbox.tenant_id = "acme";
  sandbox.spec.template_name = "python";
  add_sandbox(sandbox);
  EXPECT_EQ(
    call(http::verb::post, "/v1/credentials", evil_key, good_body({{"sandbox", "sb_1"}})).first,
    http::status::not_found);
  auto [status, body] =
    call(http::verb::post, "/v1/credentials", acme_key, good_body({{"sandbox", "sb_1"}}));
  EXPECT_EQ(status, http::status::created) << body.dump();
  EXPECT_EQ(body["tenant_id"], "acme");
}

TEST_F(egress_routes, audit_answers_the_callers_records_filtered_in_time_order) {
  std::vector<schema::audit_record> records = {
    {1'000, "acme", "sb_1", "egress", "denied", "not in the allow list", "evil.com:443", ""},
    {2'000, "acme", "sb_2", "dns", "denied", "TXT refused", "x.evil.com", ""},
    {3'000, "evil", "sb_9", "egress", "allowed", "", "ok.com:443", ""},
    {4'000, "acme", "sb_1", "egress", "allowed", "", "api.openai.com:443", "GET /v1"}};
  add_audit(records);
  auto [status, all] = call(http::verb::get, "/v1/audit", acme_key);
  ASSERT_EQ(status, http::status::ok) << all.dump();
  ASSERT_EQ(all["items"].size(), 3u);
  EXPECT_EQ(all["items"][0]["target"], "evil.com:443");
  EXPECT_EQ(all["items"][0]["at"], "1970-01-01T00:00:01.000Z");
  auto [_, filtered] = call(http::verb::get, "/v1/audit?sandbox_id=sb_1&kind=egress", acme_key);
  EXPECT_EQ(filtered["items"].size(), 2u);
  auto [__, since] = call(http::verb::get, "/v1/audit?since=1970-01-01T00:00:02Z", acme_key);
  EXPECT_EQ(since["items"].size(), 2u);
  auto [___, paged] = call(http::verb::get, "/v1/audit?limit=1", acme_key);
  ASSERT_EQ(paged["items"].size(), 1u);
  ASSERT_TRUE(paged["next_cursor"].is_string());
  auto [____, next] =
    call(http::verb::get, "/v1/audit?limit=1&cursor=" + paged["next_cursor"].get<std::string>(),
         acme_key);
  ASSERT_EQ(next["items"].size(), 1u);
  EXPECT_EQ(next["items"][0]["at"], "1970-01-01T00:00:02.000Z");
  EXPECT_EQ(call(http::verb::get, "/v1/audit?kind=everything", acme_key).first,
            http::status::bad_request);
  EXPECT_EQ(call(http::verb::get, "/v1/audit?since=yesterday", acme_key).first,
            http::status::bad_request);
}

TEST_F(egress_routes, a_patched_egress_policy_reaches_the_sandboxs_worker) {
  scheduler::scheduler_deps sdeps;
  sdeps.clock = &clock;
  sdeps.entropy = &entropy;
  deps.scheduler = scheduler::spawn_scheduler(system, {}, std::move(sdeps));
  auto script = std::make_shared<testing::stub_node_script>();
  auto node = testing::spawn_stub_node(system, script);
  schema::worker_registration worker;
  worker.id = "wk_1";
  worker.capacity = {1000, 1000, 1000, 10};
  {
    caf::scoped_actor self{system};
    self->request(deps.scheduler, seconds(10), actors::sc_register_atom::value, worker, node)
      .receive([](actors::registration_ack&) {}, [](caf::error&) { ADD_FAILURE(); });
  }
  schema::sandbox_record record;
  record.id = "sb_1";
  record.worker_id = "wk_1";
  record.state = schema::sandbox_state::running;
  record.spec.egress = {schema::egress_profile::allowlist, {"api.example.com"}};
  push_egress_to_worker(deps, record);
  ASSERT_TRUE(airlock::test::wait_for([&] { return !script->egresses().empty(); }));
  ASSERT_EQ(script->egresses().size(), 1u);
  EXPECT_EQ(script->egresses()[0].spec.egress, record.spec.egress);
  // A sandbox on a worker the scheduler does not know: nothing to send, no crash.
  record.worker_id = "wk_gone";
  push_egress_to_worker(deps, record);
  caf::anon_send_exit(deps.scheduler, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(node, caf::exit_reason::user_shutdown);
}

TEST(egress_json, a_sandbox_egress_policy_is_checked_with_the_gateways_rules) {
  auto spec = parse_sandbox_spec(
    json{{"template", "m"}, {"egress", {{"profile", "allowlist"}, {"allow", {"10.0.0.1"}}}}}, {});
  ASSERT_FALSE(spec);
  EXPECT_NE(spec.error().message.find("egress.allow"), std::string::npos);
  auto patch = parse_sandbox_patch(
    json{{"egress", {{"profile", "allowlist"}, {"allow", {"*.pypi.org", "api.x.com:8443"}}}}}, {});
  ASSERT_TRUE(patch) << patch.error().message;
  EXPECT_FALSE(parse_sandbox_patch(json{{"egress", {{"allow", {"a..b"}}}}}, {}));
}

TEST(egress_json, times_parse_as_rfc3339_or_milliseconds) {
  EXPECT_EQ(parse_time_ms("1700000000123"), 1'700'000'000'123);
  EXPECT_EQ(parse_time_ms("2023-11-14T22:13:20Z"), 1'700'000'000'000);
  EXPECT_EQ(parse_time_ms("2023-11-14T22:13:20.5Z"), 1'700'000'000'500);
  EXPECT_EQ(parse_time_ms("2023-11-14T22:13:20+01:00"), std::nullopt);
  EXPECT_EQ(parse_time_ms("-5"), std::nullopt);
}

} // namespace
} // namespace airlock::gateway
