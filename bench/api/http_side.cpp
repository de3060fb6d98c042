// api_bench's HTTP side: a child `airlockd serve` driven over keep-alive
// connections, its output read through the SSE stream.

#include <sys/mount.h>

#include <algorithm>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/api/http_client.hpp"
#include "bench/api/serve_daemon.hpp"
#include "bench/api/sides.hpp"

namespace airlock::api_bench {
namespace {

using nlohmann::json;

std::optional<serve_daemon> start_api_serve(const bench_options& opt) {
  return start_serve(opt.airlockd, opt.data_dir + "/serve",
                     {"apibench", "ab", "10.206.0.0/16", "600000000"});
}

/// POST + wait; the sandbox id, or "" on failure.
std::string http_create(keepalive_client& client, int cpu_millis = 50) {
  auto posted = client.send(
    http::verb::post, "/v1/sandboxes",
    json{{"template", "minimal"}, {"cpu_millis", cpu_millis}, {"memory_mb", 256}, {"disk_mb", 512}}
      .dump());
  if (posted.status != 202) {
    std::cerr << "create: " << posted.status << " " << posted.body << "\n";
    return "";
  }
  auto body = parse(posted);
  return wait_operation(client, body["operation_id"]) ? body["sandbox_id"].get<std::string>()
                                                      : std::string();
}

/// exec `true` and wait until it exited, through the attach URL and token.
bool http_exec(keepalive_client& client, const std::string& id) {
  auto started =
    client.send(http::verb::post, "/v1/sandboxes/" + id + "/processes", R"({"argv":["true"]})");
  if (started.status != 201)
    return false;
  auto body = parse(started);
  std::string url = body["attach_url"];
  std::string token = body["attach_token"];
  auto path = url.substr(url.find("/v1/"));
  for (;;) {
    auto state = parse(client.send(http::verb::get, path + "?wait=10", {}, token));
    if (!state.is_object())
      return false;
    if (state["state"] == "exited")
      return state["exit_code"] == 0;
  }
}

/// Bytes of `data` fields in an SSE body whose events are {"data":"xxx..."}
/// (the command writes only 'x', so no escapes): counted without a JSON parse.
class sse_counter {
public:
  void feed(std::string_view bytes) {
    for (char c : bytes) {
      if (c != '\n') {
        line_.push_back(c);
        continue;
      }
      constexpr std::string_view prefix = "data: {\"data\":\"";
      if (line_.starts_with(prefix) && line_.ends_with("\"}")) {
        // Each "\n" escape is two characters for one byte.
        auto escapes = static_cast<uint64_t>(std::count(line_.begin(), line_.end(), '\\'));
        payload_ += line_.size() - prefix.size() - 2 - escapes;
      } else if (line_.starts_with("event: error")) {
        std::cerr << "SSE error event\n";
      } else if (line_.starts_with("data: {\"error") || line_.starts_with("data: {\"code")) {
        std::cerr << line_ << "\n";
      }
      line_.clear();
    }
  }
  uint64_t payload() const { return payload_; }

private:
  std::string line_;
  uint64_t payload_ = 0;
};

} // namespace

void run_http(const bench_options& opt, results& out) {
  auto daemon = start_api_serve(opt);
  if (!daemon || daemon->key.empty()) {
    if (daemon)
      daemon->stop();
    std::cerr << "no airlockd serve (or no API key in its CLI config)\n";
    return;
  }
  keepalive_client warm("127.0.0.1", daemon->port, daemon->key);
  auto first = http_create(warm); // builds the template if needed
  if (first.empty())
    return daemon->stop();
  http_delete(warm, first);
  for (int level : {1, opt.clients}) {
    std::vector<std::unique_ptr<keepalive_client>> clients;
    for (int c = 0; c < level; ++c)
      clients.push_back(std::make_unique<keepalive_client>("127.0.0.1", daemon->port, daemon->key));
    std::vector<std::vector<std::string>> made(static_cast<size_t>(level));
    auto create_ms = run_clients(level, opt.creates, [&](int c, int) {
      auto& client = *clients[static_cast<size_t>(c)];
      auto id = http_create(client);
      auto& mine = made[static_cast<size_t>(c)];
      if (!id.empty() && mine.empty())
        mine.push_back(id); // kept for the execs; the rest go at once (capacity)
      else if (!id.empty())
        http_delete(client, id);
      return !id.empty();
    });
    out.rows.push_back({"create x" + std::to_string(level), percentiles(create_ms), {}});
    // One sandbox per client for the execs.
    auto exec_ms = run_clients(level, opt.execs, [&](int c, int) {
      const auto& mine = made[static_cast<size_t>(c)];
      return !mine.empty() && http_exec(*clients[static_cast<size_t>(c)], mine.front());
    });
    out.rows.push_back({"exec `true` x" + std::to_string(level), percentiles(exec_ms), {}});
    for (int c = 0; c < level; ++c)
      for (const auto& id : made[static_cast<size_t>(c)])
        http_delete(*clients[static_cast<size_t>(c)], id);
  }
  auto box = opt.output_mb > 0 ? http_create(warm, opt.output_cpu_millis) : std::string{};
  auto started = warm.send(http::verb::post, "/v1/sandboxes/" + box + "/processes",
                           json{{"cmd", output_command(opt)}}.dump());
  if (started.status == 201) {
    auto body = parse(started);
    std::string url = body["attach_url"];
    sse_counter counter;
    keepalive_client reader("127.0.0.1", daemon->port, daemon->key);
    auto start = clock_type::now();
    reader.stream(url.substr(url.find("/v1/")) + "/output", body["attach_token"],
                  [&counter](std::string_view bytes) { counter.feed(bytes); });
    double s = ms_since(start) / 1000;
    out.http_mib_s = static_cast<double>(counter.payload()) / (1 << 20) / s;
    if (counter.payload() != opt.output_mb << 20)
      std::cerr << "SSE delivered " << counter.payload() << " bytes\n";
  }
  http_delete(warm, box);
  daemon->stop();
  ::umount2((opt.data_dir + "/serve/data/rootfs").c_str(), MNT_DETACH);
}

} // namespace airlock::api_bench
