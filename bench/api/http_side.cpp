// api_bench's HTTP side: a child `airlockd serve` driven over keep-alive
// connections, its output read through the SSE stream.

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/api/http_client.hpp"
#include "bench/api/sides.hpp"

namespace airlock::api_bench {
namespace {

using nlohmann::json;

/// A child `airlockd serve` with stdout on a pipe.
struct serve_daemon {
  pid_t pid = -1;
  FILE* out = nullptr;
  uint16_t port = 0;
  std::string key;

  void stop() {
    if (pid > 0) {
      ::kill(pid, SIGTERM);
      ::waitpid(pid, nullptr, 0);
      pid = -1;
    }
    if (out != nullptr)
      ::fclose(out);
    out = nullptr;
  }
};

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

/// Starts the child with `env`, stdout on a pipe and stderr into `err_path`.
bool spawn_child(serve_daemon& daemon, const std::vector<std::string>& args,
                 const std::vector<std::string>& env, const std::string& err_path) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    return false;
  std::vector<char*> argv;
  std::vector<char*> envp;
  for (const auto& a : args)
    argv.push_back(const_cast<char*>(a.c_str()));
  for (const auto& e : env)
    envp.push_back(const_cast<char*>(e.c_str()));
  argv.push_back(nullptr);
  envp.push_back(nullptr);
  daemon.pid = ::fork();
  if (daemon.pid == 0) {
    ::dup2(fds[1], 1);
    int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(err, 2);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  daemon.out = ::fdopen(fds[0], "r");
  return daemon.pid > 0 && daemon.out != nullptr;
}

std::optional<serve_daemon> start_serve(const bench_options& opt) {
  std::string dir = opt.data_dir + "/serve";
  std::filesystem::create_directories(dir);
  std::string cli_config = dir + "/cli.json";
  serve_daemon daemon;
  if (!spawn_child(daemon,
                   {opt.airlockd, "serve", "--data-dir", dir + "/data", "--listen", "127.0.0.1:0",
                    "--instance", "apibench", "--veth-prefix", "ab", "--address-pool",
                    "10.206.0.0/16", "--uid-base", "600000000", "--log-level", "warn"},
                   {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                    "HOME=" + dir, "AIRLOCK_CLI_CONFIG=" + cli_config},
                   dir + "/stderr.log"))
    return std::nullopt;
  char line[512];
  while (::fgets(line, sizeof line, daemon.out) != nullptr) {
    std::string_view text(line);
    constexpr std::string_view prefix = "listening on 127.0.0.1:";
    if (!text.starts_with(prefix))
      continue;
    daemon.port = static_cast<uint16_t>(std::stoi(std::string(text.substr(prefix.size()))));
    // The first start wrote the key here; later starts print none.
    auto config = json::parse(slurp(cli_config), nullptr, false);
    if (config.is_object())
      daemon.key = config.value("api_key", "");
    return daemon;
  }
  std::cerr << "airlockd serve did not start:\n" << slurp(dir + "/stderr.log");
  daemon.stop();
  return std::nullopt;
}

json parse(const http_answer& answer) {
  auto out = json::parse(answer.body, nullptr, false);
  return out.is_discarded() ? json(nullptr) : out;
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
  std::string op = body["operation_id"];
  for (;;) {
    auto done = parse(client.send(http::verb::get, "/v1/operations/" + op + "?wait=60"));
    if (!done.is_object())
      return "";
    if (done["state"] == "succeeded")
      return body["sandbox_id"];
    if (done["state"] != "pending" && done["state"] != "running") {
      std::cerr << "create: " << done.dump() << "\n";
      return "";
    }
  }
}

bool http_delete(keepalive_client& client, const std::string& id) {
  auto posted = client.send(http::verb::delete_, "/v1/sandboxes/" + id);
  if (posted.status != 202)
    return false;
  std::string op = parse(posted)["operation_id"];
  auto done = parse(client.send(http::verb::get, "/v1/operations/" + op + "?wait=60"));
  return done.is_object() && done["state"] == "succeeded";
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
  auto daemon = start_serve(opt);
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
