// What the HTTP API adds on top of the worker, side by side in one run:
//   create   POST /v1/sandboxes + GET /v1/operations/{id}?wait=60 until the
//            sandbox runs, vs nd_create on the node actor in-process (the
//            call the operation's worker step makes), at 1 and 16 clients
//   exec     POST /v1/sandboxes/{id}/processes (`true`) + GET {attach_url}?wait
//            until exited, vs dp_exec + dp_proc(wait) on the node actor
//   output   `head -c SIZE /dev/zero | tr '\0' x` read through the SSE output
//            stream, vs the same command read with dp_output on the node
//            actor (the reads the SSE route makes: 64 KiB, one in flight),
//            and the host's own `yes | head -c SIZE` into a raw pipe read by
//            this process (the ceiling: no sandbox, no guest, no HTTP)
// HTTP clients use one keep-alive connection each. The HTTP side is a child
// `airlockd serve` (control plane and local worker in one process); the
// worker side is airlockd's own worker_host in this process. They run one
// after the other, never at once, on separate instances and data dirs.
//
//   api_bench [--airlockd PATH] [--data-dir DIR] [--creates N] [--execs N]
//             [--output-mb N] [--clients N] [--output-cpu-millis N] [--help]
//
// Needs root. DIR (default /var/tmp/airlock-api-bench) keeps the btrfs images
// and templates between runs; their loop mounts are removed at the end.

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <caf/actor_system.hpp>
#include <caf/scoped_actor.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "actors/errors.hpp"
#include "actors/system_config.hpp"
#include "airlockd/worker_host.hpp"
#include "bench/actor_ask.hpp"
#include "bench/bench_flags.hpp"
#include "storage/kv_store.hpp"

#ifndef AIRLOCK_AIRLOCKD_PATH
#define AIRLOCK_AIRLOCKD_PATH ""
#endif

namespace airlock::bench {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
using tcp = boost::asio::ip::tcp;
using nlohmann::json;
using clock_type = std::chrono::steady_clock;
constexpr auto timeout = std::chrono::seconds(120);

struct bench_options {
  std::string airlockd = AIRLOCK_AIRLOCKD_PATH;
  std::string data_dir = "/var/tmp/airlock-api-bench";
  int creates = 32; ///< per concurrency level
  int execs = 300;  ///< per concurrency level
  uint64_t output_mb = 256;
  int clients = 16; ///< the concurrent level (the other is 1)
  /// CPU of the output phase's sandbox: with the 50 mCPU of the others the
  /// producer, not the path, would be measured.
  int output_cpu_millis = 2000;
};

double ms_since(clock_type::time_point start) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - start).count();
}

struct figures {
  double p50 = 0, p90 = 0, p99 = 0;
  size_t n = 0;
};

figures percentiles(std::vector<double> v) {
  figures out;
  if (v.empty())
    return out;
  std::sort(v.begin(), v.end());
  auto at = [&v](double q) {
    return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
  };
  return {at(0.5), at(0.9), at(0.99), v.size()};
}

// --- a keep-alive HTTP client ------------------------------------------------

struct http_answer {
  int status = 0; ///< 0: the connection failed
  std::string body;
};

/// One keep-alive connection; reconnects once when the server closed it.
/// Not thread-safe: one per client thread.
class keepalive_client {
public:
  keepalive_client(std::string host, uint16_t port, std::string bearer)
      : host_(std::move(host)), port_(port), bearer_(std::move(bearer)), socket_(io_) {}

  http_answer send(http::verb method, const std::string& target, const std::string& body = {},
                   const std::string& bearer = {}) {
    for (int attempt = 0; attempt < 2; ++attempt) {
      if (!socket_.is_open() && !connect())
        return {};
      http::request<http::string_body> request{method, target, 11};
      request.set(http::field::host, host_);
      request.set(http::field::authorization, "Bearer " + (bearer.empty() ? bearer_ : bearer));
      request.keep_alive(true);
      if (!body.empty()) {
        request.set(http::field::content_type, "application/json");
        request.body() = body;
      }
      request.prepare_payload();
      beast::error_code ec;
      http::write(socket_, request, ec);
      http::response<http::string_body> response;
      if (!ec)
        http::read(socket_, buffer_, response, ec);
      if (ec) {
        socket_.close(ec);
        continue;
      }
      if (!response.keep_alive())
        socket_.close(ec);
      return {static_cast<int>(response.result_int()), std::move(response.body())};
    }
    return {};
  }

  /// GETs an SSE stream and hands each chunk of the body to `on_bytes`
  /// until the server ends it; the connection is closed afterwards.
  bool stream(const std::string& target, const std::string& bearer,
              const std::function<void(std::string_view)>& on_bytes) {
    if (!socket_.is_open() && !connect())
      return false;
    http::request<http::empty_body> request{http::verb::get, target, 11};
    request.set(http::field::host, host_);
    request.set(http::field::authorization, "Bearer " + bearer);
    request.set(http::field::accept, "text/event-stream");
    beast::error_code ec;
    http::write(socket_, request, ec);
    http::response_parser<http::buffer_body> parser;
    parser.body_limit(std::numeric_limits<uint64_t>::max());
    if (!ec)
      http::read_header(socket_, buffer_, parser, ec);
    std::vector<char> chunk(1 << 16);
    while (!ec && !parser.is_done()) {
      parser.get().body().data = chunk.data();
      parser.get().body().size = chunk.size();
      http::read(socket_, buffer_, parser, ec);
      if (ec == http::error::need_buffer)
        ec = {};
      on_bytes({chunk.data(), chunk.size() - parser.get().body().size});
    }
    socket_.close(ec);
    return parser.is_done();
  }

private:
  bool connect() {
    beast::error_code ec;
    tcp::resolver resolver(io_);
    auto found = resolver.resolve(host_, std::to_string(port_), ec);
    if (!ec)
      boost::asio::connect(socket_, found, ec);
    if (!ec)
      socket_.set_option(tcp::no_delay(true), ec);
    buffer_.clear();
    return !ec;
  }

  std::string host_;
  uint16_t port_;
  std::string bearer_;
  boost::asio::io_context io_;
  tcp::socket socket_;
  beast::flat_buffer buffer_;
};

/// Runs `body(client_index, iteration)` `total` times split over `clients`
/// threads; each iteration's latency in ms.
std::vector<double> run_clients(int clients, int total, const std::function<bool(int, int)>& body) {
  std::vector<double> all;
  std::mutex mutex;
  std::vector<std::thread> threads;
  std::atomic<int> next{0};
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      std::vector<double> mine;
      for (int i; (i = next.fetch_add(1)) < total;) {
        auto start = clock_type::now();
        if (!body(c, i))
          break;
        mine.push_back(ms_since(start));
      }
      std::lock_guard lock(mutex);
      all.insert(all.end(), mine.begin(), mine.end());
    });
  }
  for (auto& thread : threads)
    thread.join();
  return all;
}

// --- the HTTP side -------------------------------------------------------------

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

// --- the worker side -------------------------------------------------------------

template <class R, class Handle, class... Ts>
result<R> ask(caf::scoped_actor& self, const Handle& dest, Ts&&... xs) {
  return ask_within<R>(self, timeout, dest, std::forward<Ts>(xs)...);
}

schema::sandbox_record record_for(const std::string& id, int cpu_millis = 50) {
  schema::sandbox_record record;
  record.id = id;
  record.tenant_id = "bench";
  record.spec.template_name = "minimal";
  record.spec.cpu_millis = cpu_millis;
  record.spec.memory_mb = 256;
  record.spec.disk_mb = 512;
  return record;
}

bool node_create(caf::actor_system& system, const actors::node_actor& node, const std::string& id,
                 int cpu_millis = 50) {
  caf::scoped_actor self{system};
  auto created = ask<actors::node_sandbox>(self, node, actors::nd_create_atom::value,
                                           record_for(id, cpu_millis));
  if (!created)
    std::cerr << "nd_create: " << created.error().message << "\n";
  return static_cast<bool>(created);
}

bool node_destroy(caf::actor_system& system, const actors::node_actor& node,
                  const std::string& id) {
  caf::scoped_actor self{system};
  return static_cast<bool>(
    ask<actors::node_sandbox>(self, node, actors::nd_destroy_atom::value, id));
}

bool node_exec(caf::actor_system& system, const actors::node_actor& node, const std::string& id) {
  caf::scoped_actor self{system};
  actors::exec_spec spec;
  spec.argv = {"true"};
  auto started = ask<actors::process_view>(self, node, actors::dp_exec_atom::value, id, spec);
  if (!started)
    return false;
  for (;;) {
    auto state = ask<actors::process_view>(self, node, actors::dp_proc_atom::value, id,
                                           started->process_id, uint32_t{10'000});
    if (!state)
      return false;
    if (schema::has_ended(state->state))
      return state->exit_code == 0;
  }
}

/// The same reads the SSE route makes: 64 KiB at most, 10 s wait, one in flight.
uint64_t node_read_all(caf::actor_system& system, const actors::node_actor& node,
                       const std::string& id, const std::string& process_id) {
  caf::scoped_actor self{system};
  actors::output_request request;
  request.process_id = process_id;
  request.max_bytes = 65'536;
  request.wait_ms = 10'000;
  uint64_t total = 0;
  for (;;) {
    auto batch = ask<actors::output_batch>(self, node, actors::dp_output_atom::value, id, request);
    if (!batch) {
      std::cerr << batch.error().message << " after " << total << " bytes\n";
      return total;
    }
    for (const auto& segment : batch->segments)
      total += segment.bytes.size();
    request.offset = batch->next_offset;
    if (batch->exited)
      return total;
  }
}

std::string output_command(const bench_options& opt) {
  // 1023 x's and a newline per line: JSON-safe but for one escape a line,
  // and busybox yes writes far faster than busybox tr.
  return "yes " + std::string(1023, 'x') + " | head -c " + std::to_string(opt.output_mb << 20);
}

// --- the report ---------------------------------------------------------------------

struct row {
  std::string what;
  figures http;
  figures node;
};

void print_row(const row& r) {
  std::printf("%-22s %8.2f %8.2f %8.2f | %8.2f %8.2f %8.2f | %+8.2f  (n=%zu/%zu)\n", r.what.c_str(),
              r.http.p50, r.http.p90, r.http.p99, r.node.p50, r.node.p90, r.node.p99,
              r.http.p50 - r.node.p50, r.http.n, r.node.n);
}

struct results {
  std::vector<row> rows; ///< create x1, create xN, exec x1, exec xN
  double http_mib_s = 0;
  double node_mib_s = 0;
  double pipe_mib_s = 0;
};

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

void run_node(const bench_options& opt, results& out) {
  std::string dir = opt.data_dir + "/worker";
  std::filesystem::create_directories(dir);
  actors::log_sink sink(std::cerr);
  actors::logger log("api_bench", actors::log_level::warn, sink);
  actors::system_config config;
  caf::actor_system system{config};
  auto store = storage::open_rocksdb_store(dir + "/worker-store");
  if (!store) {
    std::cerr << "worker store: " << store.error().message << "\n";
    return;
  }
  airlockd::sandbox_host_options host;
  host.instance = "apibenchw";
  host.veth_prefix = "aw";
  host.address_pool = "10.207.0.0/16";
  host.uid_base = 700'000'000;
  host.guest_binary =
    std::filesystem::path(opt.airlockd).parent_path().parent_path() / "guest" / "airlock-guest";
  airlockd::worker_host worker(log);
  if (auto started = worker.start(system, dir, host, **store); !started) {
    std::cerr << "worker: " << started.message << "\n";
    return;
  }
  auto node = worker.node();
  int serial = 0;
  auto fresh_id = [&serial] { return "sb_bench" + std::to_string(++serial); };
  if (auto id = fresh_id(); node_create(system, node, id))
    node_destroy(system, node, id);
  size_t row_index = 0;
  for (int level : {1, opt.clients}) {
    std::vector<std::vector<std::string>> made(static_cast<size_t>(level));
    std::mutex ids;
    auto create_ms = run_clients(level, opt.creates, [&](int c, int) {
      std::string id;
      {
        std::lock_guard lock(ids);
        id = fresh_id();
      }
      auto& mine = made[static_cast<size_t>(c)];
      bool created = node_create(system, node, id);
      if (created && mine.empty())
        mine.push_back(id); // as on the HTTP side: one kept per client
      else if (created)
        node_destroy(system, node, id);
      return created;
    });
    out.rows.at(row_index++).node = percentiles(create_ms);
    // A client whose creates all failed (e.g. "init did not exec" under load)
    // has no sandbox: it stops, as on the HTTP side, instead of reading
    // front() of an empty vector (the SIGSEGV seen once).
    auto exec_ms = run_clients(level, opt.execs, [&](int c, int) {
      const auto& mine = made[static_cast<size_t>(c)];
      return !mine.empty() && node_exec(system, node, mine.front());
    });
    out.rows.at(row_index++).node = percentiles(exec_ms);
    for (const auto& mine : made)
      for (const auto& id : mine)
        node_destroy(system, node, id);
  }
  auto box = fresh_id();
  if (opt.output_mb > 0 && node_create(system, node, box, opt.output_cpu_millis)) {
    std::cerr << "node reads: ";
    caf::scoped_actor self{system};
    actors::exec_spec spec;
    spec.cmd = output_command(opt);
    auto start = clock_type::now();
    auto started = ask<actors::process_view>(self, node, actors::dp_exec_atom::value, box, spec);
    if (started) {
      auto total = node_read_all(system, node, box, started->process_id);
      out.node_mib_s = static_cast<double>(total) / (1 << 20) / (ms_since(start) / 1000);
      if (total != opt.output_mb << 20)
        std::cerr << "node reads delivered " << total << " bytes\n";
    }
    node_destroy(system, node, box);
  }
  worker.stop();
  ::umount2((dir + "/rootfs").c_str(), MNT_DETACH);
}

/// The same command on the host (GNU yes and head, not busybox) into a pipe
/// that this process reads 64 KiB at a time.
void run_pipe(const bench_options& opt, results& out) {
  if (opt.output_mb == 0)
    return;
  auto start = clock_type::now();
  FILE* pipe = ::popen(output_command(opt).c_str(), "r");
  if (pipe == nullptr)
    return;
  std::vector<char> chunk(1 << 16);
  uint64_t total = 0;
  int fd = ::fileno(pipe);
  for (ssize_t n; (n = ::read(fd, chunk.data(), chunk.size())) != 0;) {
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      break;
    total += static_cast<uint64_t>(n);
  }
  ::pclose(pipe);
  out.pipe_mib_s = static_cast<double>(total) / (1 << 20) / (ms_since(start) / 1000);
  if (total != opt.output_mb << 20)
    std::cerr << "raw pipe delivered " << total << " bytes\n";
}

/// Parses the flags into `opt`; nullopt to run, else the status to exit with.
std::optional<int> parse_args(int argc, char** argv, bench_options& opt) {
  bench_flags flags{"api_bench",
                    "The HTTP API (a child `airlockd serve`) against the node actor underneath\n"
                    "it: create, exec and output. Needs root."};
  flags.text("airlockd", opt.airlockd, "PATH", "the airlockd binary run as the HTTP side")
    .text("data-dir", opt.data_dir, "DIR", "btrfs images and templates (kept between runs)")
    .integer("creates", opt.creates, "creates per concurrency level", 1)
    .integer("execs", opt.execs, "execs per concurrency level", 1)
    .integer("output-mb", opt.output_mb, "MiB read in the output phase; 0: none", 0, 1 << 24)
    .integer("clients", opt.clients, "the concurrent level (the other is 1)", 1, 1024)
    .integer("output-cpu-millis", opt.output_cpu_millis, "cpu of the output phase's sandbox", 1,
             1'000'000);
  return flags.parse(argc, argv);
}

} // namespace
} // namespace airlock::bench

int main(int argc, char** argv) {
  using namespace airlock::bench;
  bench_options opt;
  if (auto status = parse_args(argc, argv, opt))
    return *status;
  if (::geteuid() != 0) {
    std::cerr << "api_bench needs root (sandboxes)\n";
    return 1;
  }
  try {
    results out;
    run_http(opt, out);
    if (out.rows.size() != 4) {
      std::cerr << "the HTTP side failed; no table\n";
      return 1;
    }
    run_node(opt, out);
    run_pipe(opt, out);
    std::printf("%-22s %8s %8s %8s | %8s %8s %8s | %8s\n", "ms", "http p50", "p90", "p99",
                "node p50", "p90", "p99", "diff p50");
    for (const auto& r : out.rows)
      print_row(r);
    std::printf("output %llu MiB          SSE %8.1f MiB/s | node reads %8.1f MiB/s | raw pipe "
                "%8.1f MiB/s\n",
                static_cast<unsigned long long>(opt.output_mb), out.http_mib_s, out.node_mib_s,
                out.pipe_mib_s);
  } catch (const std::exception& e) {
    std::cerr << "api_bench: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
