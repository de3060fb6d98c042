// Sandboxes and operations through the control routes: create, operation
// waits and event streams, pause/resume, delete, lists, idempotency, metrics.

#include <set>
#include <sstream>

#include "tests/api/api_fixture.hpp"

namespace airlock::test {
namespace {

using nlohmann::json;

class api_lifecycle : public api_suite {};

/// Every `state` event of an operation's SSE stream until the server ends it.
std::vector<json> read_state_events(http_connection& stream, bool& only_state_events) {
  std::vector<json> states;
  only_state_events = true;
  while (auto event = stream.next_event(operation_wait_max)) {
    only_state_events = only_state_events && event->event == "state";
    states.push_back(json::parse(event->data, nullptr, false));
  }
  return states;
}

TEST_F(api_lifecycle, create_answers_202_and_its_operation_ends_with_a_running_sandbox) {
  auto api = admin();
  auto created = api.create(small_spec({{"metadata", {{"suite", "lifecycle"}}}}));
  ASSERT_EQ(created.status, 202) << created.body;
  std::string sandbox_id = created.json.value("sandbox_id", "");
  std::string op_id = created.json.value("operation_id", "");
  EXPECT_EQ(sandbox_id.rfind("sb_", 0), 0u) << created.body;
  ASSERT_EQ(op_id.rfind("op_", 0), 0u) << created.body;

  // Watched while it runs: the current state first, then each transition,
  // ending with the terminal one.
  auto stream = api.open_stream("/v1/operations/" + op_id + "/events");
  ASSERT_TRUE(stream);
  ASSERT_EQ(stream->second.status, 200);
  EXPECT_EQ(stream->second.headers["content-type"], "text/event-stream");
  bool only_state = false;
  auto states = read_state_events(stream->first, only_state);
  EXPECT_TRUE(stream->first.eof()) << "the stream must end after the terminal state";
  EXPECT_TRUE(only_state);
  ASSERT_FALSE(states.empty());
  EXPECT_EQ(states.back().value("state", ""), "succeeded") << states.back().dump();
  for (const auto& state : states)
    EXPECT_EQ(state.value("id", ""), op_id);

  auto op = api.get("/v1/operations/" + op_id + "?wait=30");
  ASSERT_EQ(op.status, 200) << op.body;
  EXPECT_EQ(op.json["state"], "succeeded");
  EXPECT_EQ(op.json["kind"], "sandbox.create");
  EXPECT_EQ(op.json["target_id"], sandbox_id);
  EXPECT_TRUE(op.json["error"].is_null());
  EXPECT_TRUE(op.json["created_at"].is_string());

  auto sandbox = api.get("/v1/sandboxes/" + sandbox_id);
  ASSERT_EQ(sandbox.status, 200) << sandbox.body;
  EXPECT_EQ(sandbox.json["state"], "running");
  EXPECT_EQ(sandbox.json["template"], "minimal");
  EXPECT_EQ(sandbox.json["metadata"]["suite"], "lifecycle");
  ASSERT_TRUE(sandbox.json["worker_id"].is_string()) << sandbox.body;
  EXPECT_EQ(sandbox.json["worker_id"].get<std::string>().rfind("wk_", 0), 0u);
  EXPECT_EQ(sandbox.json["data_url"], server().url());

  // An operation that has already ended: exactly one event, then the end.
  auto again = api.open_stream("/v1/operations/" + op_id + "/events");
  ASSERT_TRUE(again);
  ASSERT_EQ(again->second.status, 200);
  auto ended = read_state_events(again->first, only_state);
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(ended[0]["state"], "succeeded");
  EXPECT_TRUE(again->first.eof());

  auto missing = api.open_stream("/v1/operations/op_nosuchoperation/events");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->second.status, 404);
}

/// The combined output offset of `process` now: the end of what one read
/// from offset 0 returns (the counter writes far less than one read's limit).
int64_t output_end(const api_client& api, const started_process& process) {
  auto stream = api.open_stream(process.attach_path + "/output",
                                {{"Authorization", "Bearer " + process.attach_token}});
  if (!stream || stream->second.status != 200)
    return -1;
  auto event = stream->first.next_event();
  return event ? std::stoll(event->id) : -1;
}

TEST_F(api_lifecycle, pause_stops_a_process_and_resume_lets_it_continue) {
  auto api = admin();
  auto id = admin().create_running();
  ASSERT_FALSE(id.empty());
  auto counter =
    api.exec(id, {{"cmd", "i=0; while true; do echo $i; i=$((i+1)); sleep 0.05; done"}});
  ASSERT_TRUE(counter);
  ASSERT_GT(output_end(api, *counter), 0);

  auto paused = api.call("POST", "/v1/sandboxes/" + id + "/pause");
  ASSERT_EQ(paused.status, 202) << paused.body;
  EXPECT_EQ(api.wait_operation(paused.json["operation_id"])["state"], "succeeded");
  EXPECT_EQ(api.get("/v1/sandboxes/" + id).json["state"], "paused");
  // Bounded waits on the process (it cannot end while frozen): the first
  // lets output already on its way to the host land, the second is the
  // interval in which a running counter would write 40 lines.
  EXPECT_EQ(api.get(counter->attach_path + "?wait=1").json["state"], "running");
  auto before = output_end(api, *counter);
  ASSERT_GT(before, 0);
  auto during = api.get(counter->attach_path + "?wait=2");
  EXPECT_EQ(during.json["state"], "running") << during.body;
  EXPECT_EQ(output_end(api, *counter), before) << "a paused sandbox made progress";

  auto again = api.call("POST", "/v1/sandboxes/" + id + "/pause");
  EXPECT_EQ(again.status, 409) << again.body;
  EXPECT_EQ(again.error_code(), "wrong_state");

  auto resumed = api.call("POST", "/v1/sandboxes/" + id + "/resume");
  ASSERT_EQ(resumed.status, 202) << resumed.body;
  EXPECT_EQ(api.wait_operation(resumed.json["operation_id"])["state"], "succeeded");
  EXPECT_EQ(api.get("/v1/sandboxes/" + id).json["state"], "running");
  // Progress resumes: a stream from where it stopped gets new output.
  auto stream = api.open_stream(counter->attach_path + "/output",
                                {{"Authorization", "Bearer " + counter->attach_token},
                                 {"Last-Event-ID", std::to_string(before)}});
  ASSERT_TRUE(stream);
  ASSERT_EQ(stream->second.status, 200);
  auto next = stream->first.next_event();
  ASSERT_TRUE(next) << "no output after resume";
  EXPECT_GT(std::stoll(next->id), before);

  auto running_resume = api.call("POST", "/v1/sandboxes/" + id + "/resume");
  EXPECT_EQ(running_resume.status, 409) << running_resume.body;
  EXPECT_TRUE(running_resume.is_error_shape());
}

TEST_F(api_lifecycle, delete_destroys_it_and_later_calls_get_409) {
  auto api = admin();
  auto id = api.create_running();
  ASSERT_FALSE(id.empty());
  auto deleted = api.call("DELETE", "/v1/sandboxes/" + id);
  ASSERT_EQ(deleted.status, 202) << deleted.body;
  auto op = api.wait_operation(deleted.json["operation_id"]);
  EXPECT_EQ(op["state"], "succeeded") << op.dump();
  EXPECT_EQ(op["kind"], "sandbox.delete");
  EXPECT_EQ(api.get("/v1/sandboxes/" + id).json["state"], "destroyed");

  for (const char* verb : {"pause", "resume"}) {
    auto refused = api.call("POST", "/v1/sandboxes/" + id + "/" + verb);
    EXPECT_EQ(refused.status, 409) << verb << ": " << refused.body;
    EXPECT_TRUE(refused.is_error_shape()) << refused.body;
  }
  EXPECT_EQ(api.call("DELETE", "/v1/sandboxes/" + id).status, 409);
  auto exec = api.post("/v1/sandboxes/" + id + "/processes", {{"cmd", "true"}});
  EXPECT_EQ(exec.status, 409) << exec.body;
  EXPECT_EQ(api.get("/v1/sandboxes/" + id + "/files?path=/etc/passwd").status, 409);
  EXPECT_EQ(api.post("/v1/sandboxes/" + id + "/token", json::object()).status, 409);
}

TEST_F(api_lifecycle, checkpoints_are_taken_listed_read_and_deleted_through_operations) {
  auto api = admin();
  auto id = api.create_running();
  ASSERT_FALSE(id.empty());
  auto wrote = api.run(id, "echo kept > /kept");
  ASSERT_TRUE(wrote.exit && (*wrote.exit).value("exit_code", -1) == 0) << wrote.stderr_bytes;

  auto taken = api.post("/v1/sandboxes/" + id + "/checkpoints", {{"label", "first"}});
  ASSERT_EQ(taken.status, 202) << taken.body;
  auto op = api.wait_operation(taken.json["operation_id"]);
  ASSERT_EQ(op["state"], "succeeded") << op.dump();
  EXPECT_EQ(op["kind"], "checkpoint.create");
  EXPECT_EQ(op["target_id"], id);
  const std::string checkpoint = op["result"].value("checkpoint_id", "");
  ASSERT_EQ(checkpoint.rfind("ckpt_", 0), 0u) << op.dump();

  auto read = api.get("/v1/checkpoints/" + checkpoint);
  ASSERT_EQ(read.status, 200) << read.body;
  EXPECT_EQ(read.json["sandbox_id"], id);
  EXPECT_EQ(read.json["label"], "first");
  EXPECT_EQ(read.json["kind"], "checkpoint");
  EXPECT_EQ(read.json["complete"], true);
  EXPECT_EQ(read.json["memory_persisted"], false);
  EXPECT_FALSE(read.json["worker_id"].get<std::string>().empty());

  // A paused sandbox can be checkpointed too, and stays paused.
  auto paused = api.call("POST", "/v1/sandboxes/" + id + "/pause");
  ASSERT_EQ(paused.status, 202) << paused.body;
  ASSERT_EQ(api.wait_operation(paused.json["operation_id"])["state"], "succeeded");
  auto second = api.post("/v1/sandboxes/" + id + "/checkpoints", json::object());
  ASSERT_EQ(second.status, 202) << second.body;
  EXPECT_EQ(api.wait_operation(second.json["operation_id"])["state"], "succeeded");
  EXPECT_EQ(api.get("/v1/sandboxes/" + id).json["state"], "paused");

  auto listed = api.get("/v1/sandboxes/" + id + "/checkpoints");
  ASSERT_EQ(listed.status, 200) << listed.body;
  ASSERT_EQ(listed.json["items"].size(), 2u) << listed.body;
  EXPECT_EQ(listed.json["items"][0]["id"], checkpoint) << "oldest first";

  // Bad input changes nothing.
  auto memory = api.post("/v1/sandboxes/" + id + "/checkpoints", {{"include_memory", true}});
  EXPECT_EQ(memory.status, 400) << memory.body;
  EXPECT_TRUE(memory.is_error_shape());
  auto label = api.post("/v1/sandboxes/" + id + "/checkpoints", {{"label", 7}});
  EXPECT_EQ(label.status, 400) << label.body;
  EXPECT_EQ(api.post("/v1/sandboxes/sb_none/checkpoints", json::object()).status, 404);
  EXPECT_EQ(api.get("/v1/checkpoints/ckpt_none").status, 404);
  EXPECT_EQ(api.get("/v1/sandboxes/" + id + "/checkpoints").json["items"].size(), 2u);

  auto deleted = api.call("DELETE", "/v1/checkpoints/" + checkpoint);
  ASSERT_EQ(deleted.status, 202) << deleted.body;
  auto gone = api.wait_operation(deleted.json["operation_id"]);
  EXPECT_EQ(gone["state"], "succeeded") << gone.dump();
  EXPECT_EQ(gone["kind"], "checkpoint.delete");
  EXPECT_EQ(api.get("/v1/checkpoints/" + checkpoint).status, 404);
  EXPECT_EQ(api.get("/v1/sandboxes/" + id + "/checkpoints").json["items"].size(), 1u);
  EXPECT_EQ(api.call("DELETE", "/v1/checkpoints/" + checkpoint).status, 404);

  // A destroyed sandbox takes no checkpoint; its checkpoints stay until deleted.
  auto destroyed = api.call("DELETE", "/v1/sandboxes/" + id);
  ASSERT_EQ(destroyed.status, 202);
  ASSERT_EQ(api.wait_operation(destroyed.json["operation_id"])["state"], "succeeded");
  auto refused = api.post("/v1/sandboxes/" + id + "/checkpoints", json::object());
  EXPECT_EQ(refused.status, 409) << refused.body;
  EXPECT_EQ(refused.error_code(), "wrong_state");
  EXPECT_EQ(api.get("/v1/sandboxes/" + id + "/checkpoints").json["items"].size(), 1u);
}

/// Every sandbox id of GET /v1/sandboxes?QUERY, following next_cursor with
/// pages of `limit`; fails the test on a page over the limit.
std::vector<std::string> walk(const api_client& api, const std::string& query, size_t limit) {
  std::vector<std::string> ids;
  std::string cursor;
  for (int page = 0; page < 1000; ++page) {
    std::string target = "/v1/sandboxes?limit=" + std::to_string(limit) + query;
    if (!cursor.empty())
      target += "&cursor=" + cursor;
    auto reply = api.get(target);
    EXPECT_EQ(reply.status, 200) << reply.body;
    if (reply.status != 200)
      break;
    EXPECT_LE(reply.json["items"].size(), limit);
    for (const auto& item : reply.json["items"])
      ids.push_back(item["id"]);
    if (reply.json["next_cursor"].is_null())
      break;
    cursor = reply.json["next_cursor"];
  }
  return ids;
}

TEST_F(api_lifecycle, lists_page_through_every_sandbox_and_filter_by_state_and_metadata) {
  auto api = admin();
  std::vector<std::string> group;
  for (int i = 0; i < 3; ++i) {
    auto created =
      api.create(small_spec({{"metadata", {{"group", "paging"}, {"n", std::to_string(i)}}}}));
    ASSERT_EQ(created.status, 202) << created.body;
    group.push_back(created.json["sandbox_id"]);
    ASSERT_EQ(api.wait_operation(created.json["operation_id"])["state"], "succeeded");
  }
  auto other = api.create_running({{"metadata", {{"group", "other"}}}});
  ASSERT_FALSE(other.empty());

  auto all = walk(api, "", 2);
  std::set<std::string> unique(all.begin(), all.end());
  EXPECT_EQ(unique.size(), all.size()) << "a page repeated a sandbox";
  for (const auto& id : group)
    EXPECT_EQ(unique.count(id), 1u) << id;
  EXPECT_EQ(unique.count(other), 1u);

  auto in_group = walk(api, "&metadata.group=paging", 2);
  EXPECT_EQ(std::set<std::string>(in_group.begin(), in_group.end()),
            std::set<std::string>(group.begin(), group.end()));
  auto one = walk(api, "&metadata.group=paging&metadata.n=1", 100);
  EXPECT_EQ(one, std::vector<std::string>{group[1]});

  auto deleted = api.call("DELETE", "/v1/sandboxes/" + group[0]);
  ASSERT_EQ(deleted.status, 202);
  ASSERT_EQ(api.wait_operation(deleted.json["operation_id"])["state"], "succeeded");
  auto destroyed = walk(api, "&state=destroyed&metadata.group=paging", 100);
  EXPECT_EQ(destroyed, std::vector<std::string>{group[0]});
  auto running = walk(api, "&state=running&metadata.group=paging", 100);
  EXPECT_EQ(std::set<std::string>(running.begin(), running.end()),
            (std::set<std::string>{group[1], group[2]}));

  auto ops = api.get("/v1/operations?target_id=" + group[0]);
  ASSERT_EQ(ops.status, 200);
  std::set<std::string> kinds;
  for (const auto& op : ops.json["items"])
    kinds.insert(op["kind"].get<std::string>());
  EXPECT_EQ(kinds, (std::set<std::string>{"sandbox.create", "sandbox.delete"}));
}

TEST_F(api_lifecycle, an_idempotency_key_returns_the_first_operation_again) {
  auto api = admin();
  json spec = small_spec();
  auto first = api.call("POST", "/v1/sandboxes", spec.dump(), {{"Idempotency-Key", "create-1"}});
  auto second = api.call("POST", "/v1/sandboxes", spec.dump(), {{"Idempotency-Key", "create-1"}});
  ASSERT_EQ(first.status, 202) << first.body;
  ASSERT_EQ(second.status, 202) << second.body;
  EXPECT_EQ(second.json["operation_id"], first.json["operation_id"]);
  EXPECT_EQ(second.json["sandbox_id"], first.json["sandbox_id"]);
  std::string id = first.json["sandbox_id"];
  ASSERT_EQ(api.wait_operation(first.json["operation_id"])["state"], "succeeded");

  auto del1 = api.call("DELETE", "/v1/sandboxes/" + id, "", {{"Idempotency-Key", "delete-1"}});
  ASSERT_EQ(del1.status, 202) << del1.body;
  ASSERT_EQ(api.wait_operation(del1.json["operation_id"])["state"], "succeeded");
  // Destroyed by now, yet the repeat answers with the first operation.
  auto del2 = api.call("DELETE", "/v1/sandboxes/" + id, "", {{"Idempotency-Key", "delete-1"}});
  EXPECT_EQ(del2.status, 202) << del2.body;
  EXPECT_EQ(del2.json["operation_id"], del1.json["operation_id"]);
  // Without the key it is a new request, refused by the state.
  EXPECT_EQ(api.call("DELETE", "/v1/sandboxes/" + id).status, 409);
}

/// The lines of a Prometheus text that start with `name` and contain `label`.
bool has_sample(const std::string& text, const std::string& name, const std::string& label) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line))
    if (line.rfind(name, 0) == 0 && line.find(label) != std::string::npos)
      return true;
  return false;
}

TEST_F(api_lifecycle, metrics_count_requests_operations_and_sandboxes) {
  auto api = admin();
  ASSERT_FALSE(api.create_running().empty());
  auto metrics = api.get("/metrics");
  ASSERT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.headers["content-type"].find("text/plain"), std::string::npos);
  const auto& text = metrics.body;
  EXPECT_TRUE(has_sample(text, "airlock_http_requests_total{", "")) << text;
  EXPECT_TRUE(has_sample(text, "airlock_operations_total{", "kind=\"sandbox.create\"")) << text;
  EXPECT_TRUE(has_sample(text, "airlock_sandboxes{", "state=\"running\"")) << text;
  EXPECT_TRUE(
    has_sample(text, "airlock_operation_duration_seconds_bucket{", "kind=\"sandbox.create\""))
    << text;
  // The running gauge counts at least the sandbox just created.
  std::istringstream lines(text);
  std::string line;
  double running = -1;
  while (std::getline(lines, line))
    if (line.rfind("airlock_sandboxes{state=\"running\"}", 0) == 0)
      running = std::stod(line.substr(line.rfind(' ') + 1));
  EXPECT_GE(running, 1.0) << text;
  // `serve` appends its worker's own figures, asked for with one message.
  EXPECT_TRUE(has_sample(text, "airlock_worker_sandboxes{", "state=\"running\"")) << text;
  EXPECT_NE(text.find("\nairlock_worker_metrics_up 1\n"), std::string::npos) << text;
}

} // namespace
} // namespace airlock::test
