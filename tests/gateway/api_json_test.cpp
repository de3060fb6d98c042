#include "gateway/api_json.hpp"

#include <gtest/gtest.h>

namespace airlock::gateway {
namespace {

using nlohmann::json;

TEST(api_json, sandbox_spec_takes_defaults_for_every_field_but_template) {
  auto spec = parse_sandbox_spec(json{{"template", "minimal"}}, {});
  ASSERT_TRUE(spec) << spec.error().message;
  EXPECT_EQ(spec->template_name, "minimal");
  EXPECT_EQ(spec->cpu_millis, 1000u);
  EXPECT_EQ(spec->memory_mb, 512u);
  EXPECT_EQ(spec->egress.profile, schema::egress_profile::none);
}

TEST(api_json, sandbox_spec_reads_every_field) {
  json body = {
    {"template", "base"},   {"cpu_millis", 500},
    {"memory_mb", 256},     {"disk_mb", 100},
    {"env", {{"A", "1"}}},  {"metadata", {{"team", "x"}}},
    {"idle_timeout_s", 60}, {"egress", {{"profile", "allowlist"}, {"allow", {"api.example.com"}}}}};
  auto spec = parse_sandbox_spec(body, {});
  ASSERT_TRUE(spec) << spec.error().message;
  EXPECT_EQ(spec->cpu_millis, 500u);
  EXPECT_EQ(spec->disk_mb, 100u);
  EXPECT_EQ(spec->env.at("A"), "1");
  EXPECT_EQ(spec->metadata.at("team"), "x");
  EXPECT_EQ(spec->egress.profile, schema::egress_profile::allowlist);
  EXPECT_EQ(spec->egress.allow, std::vector<std::string>{"api.example.com"});
}

TEST(api_json, sandbox_spec_names_the_field_at_fault) {
  struct bad_case {
    json body;
    std::string field;
  };
  std::vector<bad_case> cases = {
    {json::object(), "template"},
    {{{"template", 3}}, "template"},
    {{{"template", "m"}, {"cpu_millis", "x"}}, "cpu_millis"},
    {{{"template", "m"}, {"cpu_millis", -1}}, "cpu_millis"},
    {{{"template", "m"}, {"memory_mb", 1'000'000'000}}, "memory_mb"},
    {{{"template", "m"}, {"env", {{"A", 1}}}}, "env"},
    {{{"template", "m"}, {"metadata", "x"}}, "metadata"},
    {{{"template", "m"}, {"egress", {{"profile", "sometimes"}}}}, "egress"},
  };
  for (const auto& c : cases) {
    auto spec = parse_sandbox_spec(c.body, {});
    ASSERT_FALSE(spec) << c.body.dump();
    EXPECT_EQ(spec.code(), errc::invalid_argument) << c.body.dump();
    EXPECT_NE(spec.error().message.find(c.field), std::string::npos) << spec.error().message;
  }
}

TEST(api_json, from_checkpoint_stands_in_for_the_template) {
  auto spec = parse_sandbox_spec(json{{"from_checkpoint", "ckpt_1"}}, {});
  ASSERT_TRUE(spec) << spec.error().message;
  EXPECT_EQ(spec->from_checkpoint, "ckpt_1");
  EXPECT_TRUE(spec->template_name.empty());
  auto neither = parse_sandbox_spec(json{{"cpu_millis", 100}}, {});
  ASSERT_FALSE(neither);
  EXPECT_EQ(neither.code(), errc::invalid_argument);
  auto not_text = parse_sandbox_spec(json{{"from_checkpoint", 7}}, {});
  EXPECT_FALSE(not_text);
}

TEST(api_json, exec_spec_needs_exactly_one_of_argv_and_cmd) {
  EXPECT_FALSE(parse_exec_spec(json::object(), {}));
  EXPECT_FALSE(parse_exec_spec(json{{"argv", {"true"}}, {"cmd", "true"}}, {}));
  EXPECT_FALSE(parse_exec_spec(json{{"argv", "true"}}, {}));
  EXPECT_FALSE(parse_exec_spec(json{{"argv", json::array()}}, {}));
  auto spec = parse_exec_spec(json{{"argv", {"ls", "-l"}},
                                   {"env", {{"X", "y"}}},
                                   {"pty", {{"rows", 30}, {"cols", 90}}},
                                   {"stdin", true},
                                   {"timeout_s", 5},
                                   {"user", "nobody"},
                                   {"cwd", "/tmp"}},
                              {});
  ASSERT_TRUE(spec) << spec.error().message;
  EXPECT_EQ(spec->argv, (std::vector<std::string>{"ls", "-l"}));
  EXPECT_TRUE(spec->pty);
  EXPECT_EQ(spec->rows, 30);
  EXPECT_EQ(spec->cols, 90);
  EXPECT_TRUE(spec->stdin_open);
  EXPECT_EQ(spec->timeout_s, 5u);
  EXPECT_EQ(spec->user, "nobody");
  ASSERT_EQ(spec->env.size(), 1u);
  EXPECT_EQ(spec->env[0].first, "X");
}

TEST(api_json, signals_parse_by_name_with_or_without_sig_and_by_number) {
  EXPECT_EQ(*parse_signal("TERM"), 15);
  EXPECT_EQ(*parse_signal("SIGKILL"), 9);
  EXPECT_EQ(*parse_signal(2), 2);
  EXPECT_FALSE(parse_signal("NOPE"));
  EXPECT_FALSE(parse_signal(0));
  EXPECT_FALSE(parse_signal(65));
  EXPECT_FALSE(parse_signal(json::array()));
}

TEST(api_json, patch_needs_at_least_one_field) {
  EXPECT_FALSE(parse_sandbox_patch(json::object(), {}));
  auto patch = parse_sandbox_patch(json{{"idle_timeout_s", 10}}, {});
  ASSERT_TRUE(patch);
  EXPECT_EQ(*patch->idle_timeout_s, 10u);
  EXPECT_FALSE(patch->metadata.has_value());
}

TEST(api_json, patch_takes_the_lifecycle_policy_fields_within_their_bounds) {
  auto patch = parse_sandbox_patch(json{{"on_idle", "delete"},
                                        {"max_lifetime_s", 600},
                                        {"checkpoint_interval_s", 60},
                                        {"checkpoints_max", 5}},
                                   {});
  ASSERT_TRUE(patch) << patch.error().message;
  EXPECT_EQ(*patch->on_idle, "delete");
  EXPECT_EQ(*patch->max_lifetime_s, 600u);
  EXPECT_EQ(*patch->checkpoint_interval_s, 60u);
  EXPECT_EQ(*patch->checkpoints_max, 5u);
  EXPECT_FALSE(parse_sandbox_patch(json{{"on_idle", "sleep"}}, {}));
  EXPECT_FALSE(parse_sandbox_patch(json{{"checkpoints_max", 0}}, {}));
  EXPECT_FALSE(parse_sandbox_patch(json{{"checkpoints_max", 101}}, {}));
  EXPECT_FALSE(parse_sandbox_patch(json{{"checkpoint_interval_s", 86401}}, {}));
  auto spec = parse_sandbox_spec(json{{"template", "m"}, {"on_idle", "delete"}}, {});
  ASSERT_TRUE(spec);
  EXPECT_EQ(spec->on_idle, schema::idle_action::delete_sandbox);
  EXPECT_EQ(spec->checkpoints_max, 20u) << "the default";
}

TEST(api_json, bodies_must_be_json_objects) {
  EXPECT_EQ(parse_object("").code(), errc::invalid_argument);
  EXPECT_EQ(parse_object("{").code(), errc::invalid_argument);
  EXPECT_EQ(parse_object("[1]").code(), errc::invalid_argument);
  EXPECT_TRUE(parse_object("{\"a\":1}"));
}

TEST(api_json, utf8_check_accepts_text_and_refuses_broken_sequences) {
  EXPECT_TRUE(is_utf8("plain"));
  EXPECT_TRUE(is_utf8("gr\xc3\xbc\xc3\x9f"));
  EXPECT_TRUE(is_utf8("\xe2\x82\xac"));
  EXPECT_FALSE(is_utf8("\xff"));
  EXPECT_FALSE(is_utf8("\xc3"));     // cut short
  EXPECT_FALSE(is_utf8("\xe2\x82")); // cut short
  EXPECT_FALSE(is_utf8("\xc3\x28")); // bad continuation
}

TEST(api_json, base64_matches_the_rfc_vectors) {
  EXPECT_EQ(base64_encode(""), "");
  EXPECT_EQ(base64_encode("f"), "Zg==");
  EXPECT_EQ(base64_encode("fo"), "Zm8=");
  EXPECT_EQ(base64_encode("foo"), "Zm9v");
  EXPECT_EQ(base64_encode("foobar"), "Zm9vYmFy");
}

TEST(api_json, timestamps_are_rfc3339_utc_with_milliseconds) {
  EXPECT_EQ(timestamp_json(0), nullptr);
  EXPECT_EQ(timestamp_json(1'700'000'000'123), "2023-11-14T22:13:20.123Z");
}

TEST(api_json, errors_map_to_the_statuses_api_md_names) {
  EXPECT_EQ(http_status_of(errc::invalid_argument), http::status::bad_request);
  EXPECT_EQ(http_status_of(errc::unauthenticated), http::status::unauthorized);
  EXPECT_EQ(http_status_of(errc::permission_denied), http::status::forbidden);
  EXPECT_EQ(http_status_of(errc::not_found), http::status::not_found);
  EXPECT_EQ(http_status_of(errc::wrong_state), http::status::conflict);
  EXPECT_EQ(http_status_of(errc::gone), http::status::gone);
  EXPECT_EQ(http_status_of(errc::too_large), http::status::payload_too_large);
  EXPECT_EQ(http_status_of(errc::unavailable), http::status::service_unavailable);
  auto response = error_response(make_status(errc::not_found, "no sandbox sb_x"));
  auto body = json::parse(response.body());
  EXPECT_EQ(body["error"]["code"], "not_found");
  EXPECT_EQ(body["error"]["message"], "no sandbox sb_x");
}

TEST(api_json, records_render_with_the_api_md_field_names) {
  schema::sandbox_record record;
  record.id = "sb_1";
  record.spec.template_name = "minimal";
  record.state = schema::sandbox_state::running;
  record.created_at_ms = 1'700'000'000'000;
  auto out = to_json(record);
  for (const char* field :
       {"id", "state", "template", "worker_id", "data_url", "cpu_millis", "memory_mb", "disk_mb",
        "metadata", "egress", "created_at", "last_active_at"})
    EXPECT_TRUE(out.contains(field)) << field;
  EXPECT_EQ(out["state"], "running");
  schema::operation_record op;
  op.id = "op_1";
  op.result_json = R"({"sandbox_id":"sb_1"})";
  auto op_json = to_json(op);
  for (const char* field :
       {"id", "kind", "target_id", "state", "error", "result", "created_at", "updated_at"})
    EXPECT_TRUE(op_json.contains(field)) << field;
  EXPECT_EQ(op_json["result"]["sandbox_id"], "sb_1");
}

TEST(api_json, a_process_shows_the_apis_two_states) {
  actors::process_view process;
  process.process_id = "proc_1";
  process.state = schema::process_state::starting;
  EXPECT_EQ(to_json(process)["state"], "running");
  process.state = schema::process_state::failed;
  process.exit_code = 127;
  process.error = "no such file: python4";
  auto out = to_json(process);
  EXPECT_EQ(out["state"], "exited");
  EXPECT_EQ(out["exit_code"], 127);
  EXPECT_EQ(out["error"], "no such file: python4");
}

} // namespace
} // namespace airlock::gateway
