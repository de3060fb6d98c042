#include "bench/api/serve_daemon.hpp"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string_view>
#include <vector>

namespace airlock::api_bench {
namespace {

using nlohmann::json;

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

} // namespace

void serve_daemon::stop() {
  if (pid > 0) {
    ::kill(pid, SIGTERM);
    ::waitpid(pid, nullptr, 0);
    pid = -1;
  }
  if (out != nullptr)
    ::fclose(out);
  out = nullptr;
}

std::optional<serve_daemon> start_serve(const std::string& airlockd, const std::string& dir,
                                        const serve_identity& who) {
  std::filesystem::create_directories(dir);
  std::string cli_config = dir + "/cli.json";
  serve_daemon daemon;
  if (!spawn_child(daemon,
                   {airlockd, "serve", "--data-dir", dir + "/data", "--listen", "127.0.0.1:0",
                    "--instance", who.instance, "--veth-prefix", who.veth_prefix, "--address-pool",
                    who.address_pool, "--uid-base", who.uid_base, "--log-level", "warn"},
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

bool wait_operation(keepalive_client& client, const std::string& operation_id) {
  for (;;) {
    auto done = parse(client.send(http::verb::get, "/v1/operations/" + operation_id + "?wait=60"));
    if (!done.is_object())
      return false;
    if (done["state"] == "succeeded")
      return true;
    if (done["state"] != "pending" && done["state"] != "running") {
      std::cerr << "operation " << operation_id << ": " << done.dump() << "\n";
      return false;
    }
  }
}

bool http_delete(keepalive_client& client, const std::string& id) {
  auto posted = client.send(http::verb::delete_, "/v1/sandboxes/" + id);
  if (posted.status != 202)
    return false;
  return wait_operation(client, parse(posted)["operation_id"]);
}

} // namespace airlock::api_bench
