#include "tests/cluster/cluster_support.hpp"

#include <gtest/gtest.h>

#include <strings.h>
#include <sys/mount.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <mutex>
#include <thread>

#include "cli/http.hpp"
#include "cli/sse.hpp"
#include "tests/support/wait.hpp"

namespace airlock::test::cluster {

namespace {

/// The worker CAs of the clusters this process started: what an https
/// data URL's certificate must chain to (a client gets the same from
/// GET /v1/cluster/ca).
std::mutex trusted_mutex;
std::string trusted_worker_cas;

void trust_worker_ca(const std::string& pem) {
  std::lock_guard<std::mutex> guard(trusted_mutex);
  if (!pem.empty() && trusted_worker_cas.find(pem) == std::string::npos)
    trusted_worker_cas += pem;
}

/// Long enough for ?wait=10 and a slow create.
cli::http_client_options client_options() {
  cli::http_client_options options;
  options.connect_timeout_ms = 5'000;
  options.io_timeout_ms = 60'000;
  std::lock_guard<std::mutex> guard(trusted_mutex);
  options.ca_pem = trusted_worker_cas;
  return options;
}

cli::http_request make_request(const std::string& method, const std::string& url,
                               const std::string& bearer, const std::string& body,
                               const header_list& headers) {
  cli::http_request request;
  request.method = method;
  request.url = url;
  request.body = body;
  request.headers = headers;
  if (!bearer.empty())
    request.headers.emplace_back("Authorization", "Bearer " + bearer);
  const bool typed = std::any_of(headers.begin(), headers.end(), [](const auto& header) {
    return strcasecmp(header.first.c_str(), "Content-Type") == 0;
  });
  if (!body.empty() && !typed)
    request.headers.emplace_back("Content-Type", "application/json");
  return request;
}

std::vector<std::string> environment(const std::string& home) {
  return {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + home,
          "XDG_CONFIG_HOME=" + home + "/cfg", "AIRLOCK_CLI_CONFIG=" + home + "/cfg/cli.json"};
}

/// Spawns airlockd, in network namespace `netns` when it is not empty (only
/// the network: files and mounts stay the test's).
std::unique_ptr<child_process> spawn_airlockd(const cluster_paths& paths,
                                              const std::vector<std::string>& args,
                                              const std::string& label,
                                              const std::string& netns = {}) {
  static int spawned = 0;
  std::vector<std::string> argv;
  if (!netns.empty())
    argv = {"/usr/bin/nsenter", "--net=/run/netns/" + netns};
  argv.push_back(paths.airlockd);
  argv.insert(argv.end(), args.begin(), args.end());
  std::string stderr_path = paths.scratch + "/" + label + "." + std::to_string(++spawned) + ".err";
  auto process = child_process::spawn(argv, environment(paths.scratch + "/home"), stderr_path);
  EXPECT_TRUE(process) << "cannot start " << paths.airlockd;
  return process;
}

} // namespace

reply call(const std::string& method, const std::string& url, const std::string& bearer,
           const std::string& body, const header_list& headers) {
  auto answer = cli::http_send(make_request(method, url, bearer, body, headers), client_options());
  reply out;
  if (!answer) {
    out.raw = answer.error().message;
    return out;
  }
  out.status = answer->status;
  out.raw = answer->body;
  out.body = json::parse(out.raw, nullptr, false);
  if (out.body.is_discarded())
    out.body = nullptr;
  return out;
}

sse_read read_events(const std::string& url, const std::string& bearer,
                     const std::string& last_event_id, std::optional<size_t> drop_after_events) {
  header_list headers{{"Accept", "text/event-stream"}};
  if (!last_event_id.empty())
    headers.emplace_back("Last-Event-ID", last_event_id);
  sse_read out;
  cli::sse_parser parser;
  bool stop = false;
  auto on_event = [&out, &stop, drop_after_events](const cli::sse_event& event) {
    if (stop)
      return;
    out.events.push_back({event.event, event.id, event.data});
    out.last_id = event.id;
    if (event.event == "exit") {
      out.exited = true;
      stop = true;
    }
    if (drop_after_events && out.events.size() >= *drop_after_events)
      stop = true;
  };
  auto answer = cli::http_stream(make_request("GET", url, bearer, {}, headers), client_options(),
                                 [&parser, &on_event, &stop](std::string_view bytes) {
                                   if (!parser.feed(bytes, on_event))
                                     return false;
                                   return !stop;
                                 });
  if (answer)
    out.status = answer->status;
  return out;
}

std::string output_text(const std::vector<sse_event>& events) {
  std::string text;
  for (const auto& event : events) {
    if (event.event != "stdout" && event.event != "stderr")
      continue;
    auto data = json::parse(event.data, nullptr, false);
    if (data.is_object() && data.contains("data") && !data.contains("encoding"))
      text += data["data"].get<std::string>();
  }
  return text;
}

std::optional<control_daemon> start_control(const cluster_paths& paths, const std::string& data_dir,
                                            uint16_t cluster_port, const host_address& host) {
  control_daemon out;
  out.host = host.ip;
  out.process = spawn_airlockd(paths,
                               {"control", "--data-dir", data_dir, "--listen", host.ip + ":0",
                                "--cluster-listen", host.ip + ":" + std::to_string(cluster_port)},
                               "control", host.netns);
  if (!out.process)
    return std::nullopt;
  constexpr std::string_view key_prefix = "admin key: ";
  const std::string cluster_prefix = "cluster listening on " + host.ip + ":";
  while (auto line = out.process->read_line()) {
    if (line->starts_with(key_prefix))
      out.admin_key = line->substr(key_prefix.size());
    else if (line->starts_with(cluster_prefix))
      out.cluster_port = static_cast<uint16_t>(std::stoi(line->substr(cluster_prefix.size())));
    else if (auto bound = parse_listening(*line)) {
      out.port = bound->second;
      if (out.cluster_port != 0)
        return out;
    }
  }
  ADD_FAILURE() << "airlockd control did not report its listeners; stderr:\n"
                << read_file(out.process->stderr_path());
  return std::nullopt;
}

std::vector<std::string> worker_args(const std::string& data_dir, uint16_t join_port,
                                     const std::string& name, const std::vector<std::string>& extra,
                                     const worker_place& place) {
  std::vector<std::string> args{"worker",
                                "--join",
                                place.control_ip + ":" + std::to_string(join_port),
                                "--data-dir",
                                data_dir,
                                "--data-listen",
                                place.host.ip + ":0",
                                "--name",
                                name,
                                "--instance",
                                "clue2e",
                                "--veth-prefix",
                                "ce",
                                "--address-pool",
                                "10.205.0.0/16",
                                "--uid-base",
                                "800000000",
                                "--image-size-mb",
                                "4096"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

std::string worker_instance(int index) {
  return index == 0 ? "clue2e" : "clue2e" + std::to_string(index);
}

command_result run_airlockd(const cluster_paths& paths, const std::vector<std::string>& args,
                            milliseconds bound, const std::string& netns) {
  command_result out;
  auto process = spawn_airlockd(paths, args, "run", netns);
  if (!process)
    return out;
  while (auto line = process->read_line(bound))
    out.out += *line + "\n";
  out.exit_code = process->wait_exit(bound);
  out.err = read_file(process->stderr_path());
  return out;
}

std::optional<worker_daemon> start_worker(const cluster_paths& paths, const std::string& data_dir,
                                          uint16_t join_port, const std::string& name,
                                          const std::vector<std::string>& extra,
                                          const worker_place& place) {
  worker_daemon out;
  out.data_dir = data_dir;
  out.host = place.host.ip;
  out.process = spawn_airlockd(paths, worker_args(data_dir, join_port, name, extra, place),
                               "worker", place.host.netns);
  if (!out.process)
    return std::nullopt;
  while (auto line = out.process->read_line()) {
    if (auto bound = parse_listening(*line)) {
      out.port = bound->second;
      trust_worker_ca(read_file(data_dir + "/cluster/worker-ca.crt"));
      return out;
    }
  }
  ADD_FAILURE() << "airlockd worker did not report listening; stderr:\n"
                << read_file(out.process->stderr_path());
  return std::nullopt;
}

bool stop_process(child_process& process, bool kill) {
  process.send_signal(kill ? SIGKILL : SIGTERM);
  return process.wait_exit(std::chrono::seconds(60)).has_value();
}

void unmount_worker_rootfs(const std::string& data_dir) {
  std::string mount_point = data_dir + "/rootfs";
  if (::umount2(mount_point.c_str(), 0) != 0 && errno == EBUSY)
    ::umount2(mount_point.c_str(), MNT_DETACH); // never leave the image mounted
}

bool is_terminal(const json& operation) {
  if (!operation.is_object() || !operation.contains("state"))
    return false;
  auto state = operation["state"].get<std::string>();
  return state == "succeeded" || state == "failed" || state == "cancelled";
}

json wait_operation(const std::string& control_url, const std::string& key,
                    const std::string& operation_id, milliseconds bound) {
  json last = nullptr;
  // Each call long-polls; a failed one (the control plane may be restarting)
  // is tried again 100 ms on.
  test::wait_for(
    [&] {
      auto answer = call("GET", control_url + "/v1/operations/" + operation_id + "?wait=10", key);
      if (answer.status != 200)
        return false;
      last = answer.body;
      return is_terminal(last);
    },
    bound, milliseconds(100));
  return last;
}

bool eventually(const std::function<bool()>& probe, milliseconds bound) {
  // Each probe is an HTTP call to a child process: every 100 ms is enough.
  return test::wait_for(probe, bound, milliseconds(100));
}

} // namespace airlock::test::cluster
