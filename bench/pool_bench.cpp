// Create latency with a warm pool, side by side in one run, at 1 and N clients
// (each on its own keep-alive connection, one thread each: a client costs a
// few microseconds of CPU per call, so the figures are the daemon's):
//   GET /healthz   the HTTP round trip alone (the floor of any call)
//   bwrap          `bwrap --unshare-all --ro-bind / / true`: the bare namespace floor
//   pool           POST /v1/sandboxes answered (202), and the same create until its
//                  operation succeeded (GET /v1/operations/{id}?wait=), claiming a
//                  warm member of `minimal`: the claim recorded, the worker told
//   cold           the same create with no pool: a sandbox started from scratch
// Before each pooled round (at most the pool's size) the pool is filled and
// waited for; sandboxes are deleted between rounds, untimed. At the end: the
// pool's hits and misses, and its members' refill time from /metrics.
//
//   pool_bench [--airlockd PATH] [--data-dir DIR] [--creates N] [--clients N] [--pool N]
//
// Needs root. DIR (default /var/tmp/airlock-pool-bench) keeps the btrfs image
// and the built template between runs.

#include <spawn.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/api/common.hpp"
#include "bench/api/http_client.hpp"
#include "bench/api/serve_daemon.hpp"
#include "bench/bench_flags.hpp"

extern char** environ;

namespace {

using namespace airlock::api_bench;
using nlohmann::json;

struct pool_options {
  std::string airlockd = AIRLOCK_AIRLOCKD_PATH;
  std::string data_dir = "/var/tmp/airlock-pool-bench";
  int creates = 64; ///< per concurrency level (half of it, at least 16, at one client)
  int clients = 16;
  int pool = 32; ///< pool size, and so the most creates in one round
};

const json sandbox_spec = {{"template", "minimal"}, {"cpu_millis", 100}, {"memory_mb", 128}};

/// One call's figures: ms to its answer, ms to done (equal when there is no
/// operation), and the sandbox it made.
struct timed_call {
  double answered_ms = 0;
  double done_ms = 0;
  std::string sandbox;
};

using call_body = std::function<std::optional<timed_call>(keepalive_client&)>;

/// `total` calls of `body` spread over `clients` threads, each with its own
/// connection; every call's figures, or nullopt when one failed.
std::optional<std::vector<timed_call>> run_batch(const serve_daemon& serve, int clients, int total,
                                                 const call_body& body) {
  std::vector<timed_call> all;
  std::mutex mutex;
  std::atomic<int> next{0};
  std::atomic<bool> failed{false};
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&] {
      keepalive_client client("127.0.0.1", serve.port, serve.key);
      std::vector<timed_call> mine;
      while (!failed && next.fetch_add(1) < total) {
        auto call = body(client);
        if (!call) {
          failed = true;
          break;
        }
        mine.push_back(std::move(*call));
      }
      std::lock_guard lock(mutex);
      all.insert(all.end(), mine.begin(), mine.end());
    });
  }
  for (auto& thread : threads)
    thread.join();
  if (failed)
    return std::nullopt;
  return all;
}

std::optional<timed_call> healthz(keepalive_client& client) {
  auto start = clock_type::now();
  if (client.send(http::verb::get, "/healthz").status != 200)
    return std::nullopt;
  double ms = ms_since(start);
  return timed_call{ms, ms, {}};
}

std::optional<timed_call> bare_bwrap(keepalive_client&) {
  const char* argv[] = {"bwrap", "--unshare-all", "--ro-bind", "/", "/", "true", nullptr};
  auto start = clock_type::now();
  pid_t pid = 0;
  if (::posix_spawnp(&pid, "bwrap", nullptr, nullptr, const_cast<char**>(argv), environ) != 0)
    return std::nullopt;
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return std::nullopt;
  double ms = ms_since(start);
  return timed_call{ms, ms, {}};
}

std::optional<timed_call> create(keepalive_client& client) {
  auto start = clock_type::now();
  auto posted = client.send(http::verb::post, "/v1/sandboxes", sandbox_spec.dump());
  timed_call call;
  call.answered_ms = ms_since(start);
  if (posted.status != 202) {
    std::cerr << "create answered " << posted.status << " " << posted.body << "\n";
    return std::nullopt;
  }
  auto body = parse(posted);
  if (!wait_operation(client, body["operation_id"]))
    return std::nullopt;
  call.done_ms = ms_since(start);
  call.sandbox = body["sandbox_id"];
  return call;
}

bool delete_all(const serve_daemon& serve, int clients, const std::vector<timed_call>& calls) {
  std::atomic<size_t> next{0};
  auto deleted = run_batch(serve, clients, static_cast<int>(calls.size()),
                           [&](keepalive_client& client) -> std::optional<timed_call> {
                             size_t i = next.fetch_add(1);
                             if (i >= calls.size() || calls[i].sandbox.empty())
                               return timed_call{};
                             if (!http_delete(client, calls[i].sandbox))
                               return std::nullopt;
                             return timed_call{};
                           });
  return deleted.has_value();
}

json get_pool(keepalive_client& client) {
  return parse(client.send(http::verb::get, "/v1/templates/minimal/pool"));
}

/// Sets the pool's size and, when above 0, waits until that many are ready.
bool fill_pool(keepalive_client& client, int size) {
  json wanted = sandbox_spec;
  wanted.erase("template");
  wanted["size"] = size;
  auto set = client.send(http::verb::put, "/v1/templates/minimal/pool", wanted.dump());
  if (set.status != 200) {
    std::cerr << "pool answered " << set.status << " " << set.body << "\n";
    return false;
  }
  auto deadline = clock_type::now() + timeout;
  while (clock_type::now() < deadline) {
    auto pool = get_pool(client);
    if (pool.is_object() && pool.value("ready", 0) >= size)
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50)); // a bench's poll, not a test
  }
  std::cerr << "the pool did not fill to " << size << " within " << timeout.count() << " s\n";
  return false;
}

struct table_row {
  std::string what;
  int clients = 0;
  std::vector<timed_call> calls;
  bool has_answer = false; ///< a 202 before done (creates)
  std::string note;
};

void print_row(const table_row& row) {
  std::vector<double> answered;
  std::vector<double> done;
  for (const auto& call : row.calls) {
    answered.push_back(call.answered_ms);
    done.push_back(call.done_ms);
  }
  auto a = percentiles(answered);
  auto d = percentiles(done);
  if (row.has_answer)
    std::printf("%-14s %7d %6zu %9.1f %9.1f %11.1f %11.1f  %s\n", row.what.c_str(), row.clients,
                row.calls.size(), a.p50, a.p90, d.p50, d.p90, row.note.c_str());
  else
    std::printf("%-14s %7d %6zu %9s %9s %11.1f %11.1f  %s\n", row.what.c_str(), row.clients,
                row.calls.size(), "", "", d.p50, d.p90, row.note.c_str());
}

/// airlock_pool_refill_seconds_{sum,count} of `minimal` from /metrics.
std::pair<double, double> refill_figures(keepalive_client& client) {
  auto text = client.send(http::verb::get, "/metrics").body;
  std::pair<double, double> out{0, 0};
  std::regex line(R"re(airlock_pool_refill_seconds_(sum|count)\{template="minimal"\} (\S+))re");
  for (std::sregex_iterator it(text.begin(), text.end(), line), end; it != end; ++it)
    ((*it)[1] == "sum" ? out.first : out.second) = std::stod((*it)[2]);
  return out;
}

int run(const pool_options& opt) {
  auto serve = start_serve(opt.airlockd, opt.data_dir + "/serve",
                           {"poolbench", "pb", "10.212.0.0/16", "870000000"});
  if (!serve || serve->key.empty()) {
    if (serve)
      serve->stop();
    std::cerr << "no airlockd serve (or no API key in its CLI config)\n";
    return 1;
  }
  std::vector<table_row> rows;
  std::vector<std::string> refills;
  keepalive_client admin("127.0.0.1", serve->port, serve->key);
  bool ok = [&] {
    // The template is built on first use: not part of any figure.
    auto warm = run_batch(*serve, 1, 1, create);
    if (!warm || !delete_all(*serve, 1, *warm))
      return false;
    for (int clients : {1, opt.clients}) {
      int creates = clients > 1 ? opt.creates : std::max(16, opt.creates / 2);
      auto floor = run_batch(*serve, clients, creates, healthz);
      auto bare = run_batch(*serve, clients, creates, bare_bwrap);
      if (!floor || !bare)
        return false;
      rows.push_back({"GET /healthz", clients, *floor, false, ""});
      rows.push_back({"bwrap", clients, *bare, false, ""});
      table_row pooled{"pool", clients, {}, true, ""};
      while (static_cast<int>(pooled.calls.size()) < creates) {
        int round = std::min(opt.pool, creates - static_cast<int>(pooled.calls.size()));
        if (!fill_pool(admin, opt.pool))
          return false;
        auto calls = run_batch(*serve, clients, round, create);
        if (!calls || !delete_all(*serve, clients, *calls))
          return false;
        pooled.calls.insert(pooled.calls.end(), calls->begin(), calls->end());
      }
      if (!fill_pool(admin, 0))
        return false;
      auto pool = get_pool(admin);
      pooled.note = "(pool hits " + pool.value("hits_total", json(0)).dump() + ", misses "
                    + pool.value("misses_total", json(0)).dump() + " so far)";
      auto [sum, count] = refill_figures(admin);
      rows.push_back(std::move(pooled));
      auto cold = run_batch(*serve, clients, creates, create);
      if (!cold || !delete_all(*serve, clients, *cold))
        return false;
      rows.push_back({"cold", clients, *cold, true, ""});
      char line[160];
      std::snprintf(line, sizeof line,
                    "refills so far (after the %d-client rounds): %.0f, mean %.0f ms each", clients,
                    count, count > 0 ? sum / count * 1000 : 0.0);
      refills.emplace_back(line);
    }
    return true;
  }();
  serve->stop();
  ::umount2((opt.data_dir + "/serve/data/rootfs").c_str(), MNT_DETACH);
  if (!ok) {
    std::cerr << "a call failed; no table (the daemon's log: " << opt.data_dir
              << "/serve/stderr.log)\n";
    return 1;
  }
  std::printf("%-14s %7s %6s %9s %9s %11s %11s\n", "ms", "clients", "calls", "202 p50", "202 p90",
              "running p50", "running p90");
  for (const auto& row : rows)
    print_row(row);
  for (const auto& line : refills)
    std::printf("%s\n", line.c_str());
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  pool_options opt;
  airlock::bench::bench_flags flags{
    "pool_bench", "Create latency through HTTP from a warm pool, against a cold create, the\n"
                  "bare bwrap floor and GET /healthz, at 1 and N clients. Needs root."};
  flags.text("airlockd", opt.airlockd, "PATH", "the airlockd binary run as the daemon")
    .text("data-dir", opt.data_dir, "DIR", "btrfs image and templates (kept between runs)")
    .integer("creates", opt.creates, "creates at N clients (half, at least 16, at one)", 16, 4096)
    .integer("clients", opt.clients, "the concurrent level (the other is 1)", 2, 256)
    .integer("pool", opt.pool, "pool size: the most creates in one round", 1, 256);
  if (auto status = flags.parse(argc, argv))
    return *status;
  if (::geteuid() != 0) {
    std::cerr << "pool_bench needs root (sandboxes)\n";
    return 1;
  }
  return run(opt);
}
