// Split mode end to end: `airlockd control` and `airlockd worker` as separate
// processes joined over the cluster transport on loopback. Sandboxes are
// created through the control plane and reached on the worker's data plane
// with tokens; the worker and the control plane are killed and restarted
// under load. Needs root (namespaces, btrfs, nftables); sandboxes use the
// `minimal` template, built on the worker without the network.

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <future>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gateway/attach_token.hpp"
#include "tests/cluster/cluster_fixture.hpp"
#include "tests/cluster/cluster_support.hpp"
#include "tests/support/environment.hpp"

namespace airlock::test::cluster {
namespace {

constexpr const char* five_lines = "for i in 1 2 3 4 5; do echo line$i; sleep 0.1; done";
constexpr const char* five_lines_out = "line1\nline2\nline3\nline4\nline5\n";

/// Reads a process's output, dropping the first connection after one event
/// and resuming from its Last-Event-ID; the whole output.
std::string read_with_one_drop(const std::string& attach_url, const std::string& bearer) {
  auto first = read_events(attach_url + "/output", bearer, {}, 1);
  EXPECT_EQ(first.status, 200);
  EXPECT_EQ(first.events.size(), 1u);
  std::string text = output_text(first.events);
  if (first.exited)
    return text;
  auto rest = read_events(attach_url + "/output", bearer, first.last_id);
  EXPECT_EQ(rest.status, 200);
  EXPECT_TRUE(rest.exited) << "the resumed stream ends with the exit event";
  if (!rest.events.empty()) {
    auto exit = json::parse(rest.events.back().data, nullptr, false);
    EXPECT_EQ(exit.value("exit_code", -1), 0) << rest.events.back().data;
  }
  return text + output_text(rest.events);
}

TEST_F(cluster_e2e, a_sandbox_lives_its_whole_life_through_the_control_plane_on_its_worker) {
  start_control();
  auto& worker = start_worker();
  ASSERT_TRUE(eventually([&] { return worker_in_state("clue2e-0", "ready"); }, rejoin_bound));
  auto listed = workers().at("clue2e-0");
  EXPECT_EQ(listed["data_url"], worker.url());
  EXPECT_GT(listed["capacity"]["cpu_millis"].get<int64_t>(), 0) << listed.dump();
  EXPECT_GT(listed["capacity"]["memory_mb"].get<int64_t>(), 0) << listed.dump();
  EXPECT_GT(listed["capacity"]["sandboxes"].get<int64_t>(), 0) << listed.dump();

  auto id = create_running();
  auto record = sandbox(id);
  EXPECT_EQ(record["state"], "running");
  EXPECT_EQ(record["data_url"], worker.url());
  EXPECT_EQ(record["worker_id"], listed["id"]);

  // Exec through the control plane with the API key: attach_url points at
  // the worker, the token works there, and the output resumes after a drop.
  auto started = exec(control_->url(), id, key_, five_lines);
  std::string attach_url = started["attach_url"];
  std::string attach_token = started["attach_token"];
  EXPECT_EQ(attach_url.rfind(worker.url() + "/v1/sandboxes/" + id + "/processes/", 0), 0u)
    << attach_url;
  EXPECT_EQ(read_with_one_drop(attach_url, attach_token), five_lines_out);

  // The same output through the control plane's own listener with the key
  // (forwarded to the worker).
  std::string forwarded = control_->url() + attach_url.substr(worker.url().size());
  EXPECT_EQ(read_with_one_drop(forwarded, key_), five_lines_out);
  auto state = call("GET", forwarded + "?wait=10", key_);
  EXPECT_EQ(state.status, 200) << state.raw;
  EXPECT_EQ(state.body["state"], "exited");
  EXPECT_EQ(state.body["exit_code"], 0);

  // A sandbox token for the data plane: exec and files straight on the worker.
  auto token = call("POST", control_->url() + "/v1/sandboxes/" + id + "/token", key_,
                    json{{"scope", "all"}, {"ttl_s", 600}}.dump());
  ASSERT_EQ(token.status, 201) << token.raw;
  EXPECT_EQ(token.body["data_url"], worker.url());
  std::string sandbox_token = token.body["token"];
  auto direct = exec(worker.url(), id, sandbox_token, "echo direct");
  EXPECT_EQ(
    output_text(
      read_events(std::string(direct["attach_url"]) + "/output", direct["attach_token"]).events),
    "direct\n");

  std::string content = "bytes\0with a nul\n";
  content += std::string(100'000, 'x');
  std::string file_url = worker.url() + "/v1/sandboxes/" + id + "/files?path=/tmp/dir/f.bin";
  auto put =
    call("PUT", file_url, sandbox_token, content, {{"Content-Type", "application/octet-stream"}});
  ASSERT_EQ(put.status, 201) << put.raw;
  EXPECT_EQ(put.body["size_bytes"], content.size());
  auto got = call("GET", file_url, sandbox_token);
  EXPECT_EQ(got.status, 200);
  EXPECT_EQ(got.raw, content);
  auto cat = exec(worker.url(), id, sandbox_token, "wc -c < /tmp/dir/f.bin");
  EXPECT_EQ(output_text(
              read_events(std::string(cat["attach_url"]) + "/output", cat["attach_token"]).events),
            std::to_string(content.size()) + "\n");

  // Pause, resume, delete.
  for (const auto& [verb, after] : std::vector<std::pair<std::string, std::string>>{
         {"pause", "paused"}, {"resume", "running"}, {"delete", "destroyed"}}) {
    auto op = post_verb(id, verb);
    auto done = wait_operation(control_->url(), key_, op, operation_bound);
    EXPECT_EQ(done["state"], "succeeded") << verb << ": " << done.dump();
    EXPECT_EQ(sandbox(id)["state"], after) << verb;
  }
  // The worker forgot it: its data plane refuses the sandbox now.
  auto gone = call("GET", worker.url() + "/v1/sandboxes/" + id + "/processes", sandbox_token);
  EXPECT_GE(gone.status, 400) << gone.raw;
}

/// The value of the first sample of `text` whose line starts with `series`
/// (name and labels as rendered); nullopt when there is none.
std::optional<double> sample(const std::string& text, const std::string& series) {
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find('\n', at);
    auto line = text.substr(at, end == std::string::npos ? std::string::npos : end - at);
    if (line.rfind(series + " ", 0) == 0)
      return std::stod(line.substr(series.size() + 1));
    if (end == std::string::npos)
      break;
    at = end + 1;
  }
  return std::nullopt;
}

TEST_F(cluster_e2e, file_writes_straight_to_the_worker_keep_a_sandbox_from_idling_out) {
  start_control();
  start_worker();
  ASSERT_TRUE(eventually([&] { return worker_in_state("clue2e-0", "ready"); }, rejoin_bound));
  auto used = create_running({{"idle_timeout_s", 3}});
  auto quiet = create_running({{"idle_timeout_s", 3}});
  ASSERT_FALSE(used.empty());
  ASSERT_FALSE(quiet.empty());
  auto token = call("POST", control_->url() + "/v1/sandboxes/" + used + "/token", key_,
                    json{{"scope", "all"}, {"ttl_s", 600}}.dump());
  ASSERT_EQ(token.status, 201) << token.raw;
  const std::string data_url = token.body["data_url"];
  const std::string bearer = token.body["token"];
  // The control plane never sees these writes: only the worker does. They
  // go on until the quiet one has idled out and for at least twice the idle
  // timeout, so that the used one would have idled out without them however
  // slowly each write goes.
  int writes = 0;
  const auto started = std::chrono::steady_clock::now();
  const auto long_enough = started + std::chrono::seconds(2 * 3);
  const auto deadline = started + std::chrono::seconds(90);
  while (std::chrono::steady_clock::now() < deadline
         && (std::chrono::steady_clock::now() < long_enough
             || sandbox(quiet).value("state", "") != "suspended")) {
    auto put = call("PUT", data_url + "/v1/sandboxes/" + used + "/files?path=/tmp/n", bearer,
                    std::to_string(++writes), {{"Content-Type", "application/octet-stream"}});
    EXPECT_EQ(put.status, 201) << put.raw;
    std::this_thread::sleep_for(500ms); // the pace of a client, not a synchronisation
  }
  ASSERT_EQ(sandbox(quiet)["state"], "suspended") << "the control sandbox never idled out";
  EXPECT_EQ(sandbox(used)["state"], "running") << "writes on the worker's listener are activity";
  EXPECT_GE(std::chrono::steady_clock::now(), long_enough) << "after " << writes << " writes";
}

TEST_F(cluster_e2e, a_worker_serves_its_own_metrics_and_the_control_plane_streams_relayed_files) {
  start_control();
  auto& worker = start_worker();
  ASSERT_TRUE(eventually([&] { return worker_in_state("clue2e-0", "ready"); }, rejoin_bound));
  auto id = create_running();

  // Larger than a download chunk (1 MiB), so the control plane streams it.
  std::string content(5 * (1 << 20) + 7, '\0');
  for (size_t i = 0; i < content.size(); ++i)
    content[i] = static_cast<char>((i * 2654435761u) >> 13);
  std::string files = "/v1/sandboxes/" + id + "/files?path=/tmp/big.bin";
  auto put = call("PUT", control_->url() + files, key_, content,
                  {{"Content-Type", "application/octet-stream"}});
  ASSERT_EQ(put.status, 201) << put.raw;
  auto relayed = call("GET", control_->url() + files, key_);
  EXPECT_EQ(relayed.status, 200);
  ASSERT_EQ(relayed.raw.size(), content.size());
  EXPECT_TRUE(relayed.raw == content) << "the relayed download differs from what was written";
  auto missing = call("GET", control_->url() + "/v1/sandboxes/" + id + "/files?path=/nope", key_);
  EXPECT_EQ(missing.status, 404) << missing.raw;

  // The same bytes with chunked transfer encoding (no length announced): the
  // control plane streams them to the worker a chunk at a time.
  const std::string sandbox_files = "/v1/sandboxes/" + id + "/files";
  auto chunked = test::http_connection::open(control_->host, control_->port);
  ASSERT_TRUE(chunked);
  ASSERT_TRUE(chunked->send("PUT " + sandbox_files
                            + "?path=/tmp/chunked.bin HTTP/1.1\r\n"
                              "Host: control\r\nAuthorization: Bearer "
                            + key_
                            + "\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"));
  constexpr size_t http_chunk = 300'000; // not a multiple of the relay's chunk
  for (size_t at = 0; at < content.size(); at += http_chunk) {
    auto piece = content.substr(at, http_chunk);
    std::ostringstream size_line;
    size_line << std::hex << piece.size() << "\r\n";
    ASSERT_TRUE(chunked->send(size_line.str() + piece + "\r\n"));
  }
  ASSERT_TRUE(chunked->send("0\r\n\r\n"));
  auto chunked_put = chunked->read_reply();
  ASSERT_TRUE(chunked_put);
  EXPECT_EQ(chunked_put->status, 201) << chunked_put->body;
  auto chunked_back = call("GET", control_->url() + sandbox_files + "?path=/tmp/chunked.bin", key_);
  EXPECT_EQ(chunked_back.status, 200);
  ASSERT_EQ(chunked_back.raw.size(), content.size());
  EXPECT_TRUE(chunked_back.raw == content) << "the chunked upload differs from what was sent";

  // The worker's own /metrics, on its data listener: its sandboxes, its
  // egress proxy's counters and its listener's requests.
  auto figures = call("GET", worker.url() + "/metrics", "");
  ASSERT_EQ(figures.status, 200);
  EXPECT_EQ(sample(figures.raw, "airlock_worker_metrics_up"), 1.0) << figures.raw;
  EXPECT_EQ(sample(figures.raw, "airlock_worker_sandboxes{state=\"running\"}"), 1.0) << figures.raw;
  for (const char* family : {"airlock_egress_connections_total", "airlock_egress_denied_total",
                             "airlock_egress_dns_queries_total"})
    EXPECT_TRUE(sample(figures.raw, family).has_value()) << family << " in\n" << figures.raw;
  EXPECT_NE(figures.raw.find("airlock_http_requests_total"), std::string::npos);

  // The control plane's: what it relayed, and none of the worker's figures.
  auto control = call("GET", control_->url() + "/metrics", "");
  ASSERT_EQ(control.status, 200);
  auto down = sample(control.raw, "airlock_data_forwarded_bytes_total{direction=\"download\"}");
  ASSERT_TRUE(down.has_value()) << control.raw;
  EXPECT_GE(*down, static_cast<double>(content.size()));
  auto up = sample(control.raw, "airlock_data_forwarded_bytes_total{direction=\"upload\"}");
  ASSERT_TRUE(up.has_value()) << control.raw;
  EXPECT_EQ(*up, 2.0 * static_cast<double>(content.size()));
  auto requests = sample(control.raw, "airlock_data_forwarded_requests_total{route=\"files\"}");
  ASSERT_TRUE(requests.has_value()) << control.raw;
  EXPECT_GE(*requests, 5.0);
  EXPECT_EQ(control.raw.find("airlock_egress_"), std::string::npos);

  // A client that goes away half way: the old file stays, and the worker's
  // temporary file goes with the session the control plane aborts.
  auto abandoned = test::http_connection::open(control_->host, control_->port);
  ASSERT_TRUE(abandoned);
  ASSERT_TRUE(abandoned->send("PUT " + sandbox_files
                              + "?path=/tmp/big.bin HTTP/1.1\r\n"
                                "Host: control\r\nAuthorization: Bearer "
                              + key_ + "\r\nContent-Length: " + std::to_string(content.size())
                              + "\r\n\r\n" + std::string(3 << 20, 'z')));
  auto temporary_in_tmp = [&] {
    auto listed = call("GET", control_->url() + sandbox_files + "/list?path=/tmp", key_);
    return listed.raw.find(".big.bin.airlock-") != std::string::npos;
  };
  // Wait until the relay has opened the session (its temporary file exists).
  ASSERT_TRUE(eventually(temporary_in_tmp, 20s));
  abandoned->close();
  EXPECT_TRUE(eventually([&] { return !temporary_in_tmp(); }, 20s));
  auto kept = call("GET", control_->url() + files, key_);
  ASSERT_EQ(kept.raw.size(), content.size());
  EXPECT_TRUE(kept.raw == content) << "an abandoned upload changed the file";
}

TEST_F(cluster_e2e, a_worker_is_ready_once_joined_and_takes_only_valid_control_plane_tokens) {
  // The worker joins once (it redeems its token for a certificate), then
  // both stop: the worker starts first and must wait for the control plane.
  start_control();
  uint16_t cluster_port = control_->cluster_port;
  start_worker(0);
  ASSERT_TRUE(eventually([&] { return worker_in_state("clue2e-0", "ready"); }, rejoin_bound));
  ASSERT_TRUE(stop_process(*workers_.back().process));
  workers_.pop_back();
  ASSERT_TRUE(stop_process(*control_->process));
  auto& worker = start_worker(0, cluster_port);
  auto ready = call("GET", worker.url() + "/readyz", "");
  EXPECT_EQ(ready.status, 503) << ready.raw;

  start_control(cluster_port);
  ASSERT_EQ(control_->cluster_port, cluster_port);
  EXPECT_TRUE(eventually([&] { return call("GET", worker.url() + "/readyz", "").status == 200; },
                         rejoin_bound))
    << read_file(worker.process->stderr_path());
  auto id = create_running();

  // API keys are for the control plane only.
  auto by_key = call("GET", worker.url() + "/v1/sandboxes/" + id + "/processes", key_);
  EXPECT_EQ(by_key.status, 401);
  EXPECT_EQ(by_key.body["error"]["code"], "unauthenticated");
  EXPECT_NE(by_key.body["error"]["message"].get<std::string>().find("token"), std::string::npos);

  auto token = call("POST", control_->url() + "/v1/sandboxes/" + id + "/token", key_,
                    json{{"scope", "all"}}.dump());
  ASSERT_EQ(token.status, 201);
  std::string good = token.body["token"];
  std::string list_url = worker.url() + "/v1/sandboxes/" + id + "/processes";
  EXPECT_EQ(call("GET", list_url, good).status, 200);

  // Forged: one character of the signature changed.
  std::string forged = good;
  forged.back() = forged.back() == 'A' ? 'B' : 'A';
  EXPECT_EQ(call("GET", list_url, forged).status, 401);
  // Signed by another key.
  auto stranger = gateway::token_signer::load_or_create(dir_.path() + "/other-key.pem");
  ASSERT_TRUE(stranger);
  int64_t now_ms =
    std::chrono::duration_cast<milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
  auto record = call("GET", control_->url() + "/v1/sandboxes/" + id, key_);
  ASSERT_EQ(record.status, 200);
  const std::string worker_id = record.body["worker_id"];
  gateway::token_claims claims{"admin", id, "", "all", now_ms + 600'000, worker_id};
  EXPECT_EQ(call("GET", list_url, stranger->sign(claims)).status, 401);
  // Signed by the control plane's own key, but expired.
  auto own = gateway::token_signer::load_or_create(control_dir() + "/keys/token.pem");
  ASSERT_TRUE(own);
  EXPECT_EQ(call("GET", list_url, own->sign(claims)).status, 200) << "the key is the right one";
  // The right key and sandbox, minted for another worker: refused here.
  auto for_other = claims;
  for_other.audience = "wk_somebody_else";
  auto elsewhere = call("GET", list_url, own->sign(for_other));
  EXPECT_EQ(elsewhere.status, 401) << elsewhere.raw;
  EXPECT_NE(elsewhere.raw.find("another worker"), std::string::npos) << elsewhere.raw;
  claims.expires_at_ms = now_ms - 1'000;
  auto expired = call("GET", list_url, own->sign(claims));
  EXPECT_EQ(expired.status, 401) << expired.raw;
  // For another sandbox.
  claims = {"admin", "sb_other", "", "all", now_ms + 600'000, worker_id};
  EXPECT_GE(call("GET", list_url, own->sign(claims)).status, 401);
  EXPECT_EQ(call("GET", list_url, "").status, 401);
}

TEST_F(cluster_e2e, a_killed_worker_is_lost_and_a_create_then_fails_instead_of_hanging) {
  start_control();
  auto& worker = start_worker();
  ASSERT_TRUE(eventually([&] { return worker_in_state("clue2e-0", "ready"); }, rejoin_bound));
  auto id = create_running();
  EXPECT_FALSE(id.empty());

  ASSERT_TRUE(stop_process(*worker.process, true));
  EXPECT_TRUE(eventually([&] { return worker_in_state("clue2e-0", "lost"); }, lost_within))
    << workers().at("clue2e-0").dump();

  auto [sandbox_id, operation] = post_create();
  auto done = wait_operation(control_->url(), key_, operation, operation_bound);
  ASSERT_EQ(done["state"], "failed") << done.dump();
  EXPECT_EQ(done["error"]["code"], "unavailable") << done.dump();
  EXPECT_FALSE(done["error"]["message"].get<std::string>().empty());
  EXPECT_EQ(sandbox(sandbox_id)["state"], "destroyed") << "a create that failed leaves nothing";

  // The same worker comes back (and cleans up what the killed one left).
  start_worker();
  EXPECT_TRUE(eventually([&] { return worker_in_state("clue2e-0", "ready"); }, rejoin_bound));
  EXPECT_EQ(workers().size(), 1u) << "a restarted worker is the same worker";
}

/// What a sandbox's operations say its state must be now.
struct expectation {
  std::string create_op;
  std::vector<std::pair<std::string, std::string>> ops; ///< (verb, operation id) in order
};

TEST_F(cluster_e2e, every_operation_in_flight_when_the_control_plane_is_killed_ends_consistently) {
  start_control();
  start_worker();
  ASSERT_TRUE(eventually([&] { return worker_in_state("clue2e-0", "ready"); }, rejoin_bound));
  std::vector<std::string> existing;
  for (int i = 0; i < 4; ++i)
    existing.push_back(create_running());

  // Start several creates, deletes and pauses at once, then kill -9.
  std::map<std::string, expectation> sandboxes;
  std::vector<std::future<std::pair<std::string, std::string>>> creates;
  for (int i = 0; i < 4; ++i)
    creates.push_back(std::async(std::launch::async, [this] { return post_create(); }));
  auto del0 = std::async(std::launch::async, [&] { return post_verb(existing[0], "delete"); });
  auto del1 = std::async(std::launch::async, [&] { return post_verb(existing[1], "delete"); });
  auto pause2 = std::async(std::launch::async, [&] { return post_verb(existing[2], "pause"); });
  auto pause3 = std::async(std::launch::async, [&] { return post_verb(existing[3], "pause"); });
  for (auto& create : creates) {
    auto [id, op] = create.get();
    sandboxes[id].create_op = op;
  }
  sandboxes[existing[0]].ops.emplace_back("delete", del0.get());
  sandboxes[existing[1]].ops.emplace_back("delete", del1.get());
  sandboxes[existing[2]].ops.emplace_back("pause", pause2.get());
  sandboxes[existing[3]].ops.emplace_back("pause", pause3.get());
  uint16_t cluster_port = control_->cluster_port;
  ASSERT_TRUE(stop_process(*control_->process, true));

  start_control(cluster_port);
  ASSERT_TRUE(eventually([&] { return worker_in_state("clue2e-0", "ready"); }, rejoin_bound))
    << read_file(workers_.back().process->stderr_path());

  for (auto& [id, expected] : sandboxes) {
    SCOPED_TRACE(id);
    std::string state_now;
    if (!expected.create_op.empty()) {
      auto done = wait_operation(control_->url(), key_, expected.create_op, operation_bound);
      ASSERT_TRUE(is_terminal(done)) << "create stuck: " << done.dump();
      EXPECT_EQ(done["state"], "succeeded") << done.dump();
      state_now = done["state"] == "succeeded" ? "running" : "error";
    } else {
      state_now = "running";
    }
    for (const auto& [verb, op] : expected.ops) {
      ASSERT_FALSE(op.empty()) << verb << " was refused";
      auto done = wait_operation(control_->url(), key_, op, operation_bound);
      ASSERT_TRUE(is_terminal(done)) << verb << " stuck: " << done.dump();
      EXPECT_EQ(done["state"], "succeeded") << verb << ": " << done.dump();
      if (done["state"] == "succeeded")
        state_now = verb == "delete" ? "destroyed" : "paused";
    }
    auto record = sandbox(id);
    EXPECT_EQ(record["state"], state_now) << record.dump();
    if (state_now == "running") {
      auto listed = call("GET", control_->url() + "/v1/sandboxes/" + id + "/processes", key_);
      EXPECT_EQ(listed.status, 200) << listed.raw;
      auto started = exec(control_->url(), id, key_, "echo alive");
      if (started.contains("attach_url")) {
        EXPECT_EQ(output_text(read_events(std::string(started["attach_url"]) + "/output",
                                          started["attach_token"])
                                .events),
                  "alive\n");
      }
    }
  }
  // Nothing else is left unfinished.
  auto active = call("GET", control_->url() + "/v1/operations?state=running", key_);
  ASSERT_EQ(active.status, 200);
  EXPECT_TRUE(active.body["items"].empty()) << active.raw;
  // The paused sandboxes resume on the worker that kept them.
  for (int i : {2, 3}) {
    auto op = post_verb(existing[i], "resume");
    auto done = wait_operation(control_->url(), key_, op, operation_bound);
    EXPECT_EQ(done["state"], "succeeded") << done.dump();
  }
}

TEST_F(cluster_e2e,
       two_workers_on_their_own_hosts_serve_their_sandboxes_and_refuse_each_other_s_tokens) {
  start_control();
  start_worker(0);
  start_worker(1);
  ASSERT_EQ(workers_.size(), 2u);
  const worker_daemon& first = workers_[0]; // start_worker's references move with the vector
  const worker_daemon& second = workers_[1];
  ASSERT_TRUE(eventually(
    [&] { return worker_in_state("clue2e-0", "ready") && worker_in_state("clue2e-1", "ready"); },
    rejoin_bound));
  const std::string first_id = workers()["clue2e-0"].value("id", "");
  ASSERT_NE(first.host, second.host) << "the workers share a host";

  // Creates until each worker holds a sandbox (placement spreads by free
  // capacity; bounded).
  std::map<std::string, std::string> sandbox_of; // worker id -> sandbox id
  for (int i = 0; i < 6 && sandbox_of.size() < 2; ++i) {
    const std::string id = create_running();
    ASSERT_FALSE(id.empty());
    sandbox_of.emplace(sandbox(id).value("worker_id", ""), id);
  }
  ASSERT_EQ(sandbox_of.size(), 2u) << "placement put every sandbox on one worker";
  const std::string on_first = sandbox_of[first_id];
  ASSERT_FALSE(on_first.empty());

  // Each sandbox answers through the control plane and straight from its own
  // worker's host.
  for (const auto& [worker_id, id] : sandbox_of) {
    auto token = call("POST", control_->url() + "/v1/sandboxes/" + id + "/token", key_,
                      json{{"scope", "all"}, {"ttl_s", 600}}.dump());
    ASSERT_EQ(token.status, 201) << token.raw;
    const std::string data_url = token.body["data_url"];
    EXPECT_EQ(data_url, worker_id == first_id ? first.url() : second.url());
    auto started = exec(data_url, id, token.body["token"], "hostname; echo on-$0");
    EXPECT_NE(
      output_text(
        read_events(std::string(started["attach_url"]) + "/output", started["attach_token"]).events)
        .find("on-"),
      std::string::npos);
  }

  // A token for the first worker's sandbox, taken to the second worker's
  // host: refused there (its audience is the first worker), for every route.
  auto token = call("POST", control_->url() + "/v1/sandboxes/" + on_first + "/token", key_,
                    json{{"scope", "all"}, {"ttl_s", 600}}.dump());
  ASSERT_EQ(token.status, 201) << token.raw;
  const std::string bearer = token.body["token"];
  auto stolen =
    call("GET", second.url() + "/v1/sandboxes/" + on_first + "/files?path=/etc/hostname", bearer);
  EXPECT_TRUE(stolen.status == 401 || stolen.status == 403) << stolen.status << " " << stolen.raw;
  auto run = call("POST", second.url() + "/v1/sandboxes/" + on_first + "/processes", bearer,
                  json{{"cmd", "true"}}.dump());
  EXPECT_TRUE(run.status == 401 || run.status == 403) << run.status << " " << run.raw;
  // On its own worker it works.
  EXPECT_EQ(
    call("GET", first.url() + "/v1/sandboxes/" + on_first + "/files?path=/etc/hostname", bearer)
      .status,
    200);
}

} // namespace
} // namespace airlock::test::cluster
