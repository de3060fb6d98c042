#pragma once
// Helpers for the split-mode end-to-end tests: `airlockd control` and
// `airlockd worker` as child processes, a JSON HTTP client (the CLI's Beast
// client, one connection per call), an SSE reader that can drop its
// connection on purpose, and bounded waits on operations. Every wait has a
// deadline; nothing sleeps to synchronise.

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/cluster/host_network.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/host.hpp"
#include "tests/support/http_client.hpp"

namespace airlock::test::cluster {

using nlohmann::json;
using std::chrono::milliseconds;

/// An HTTP answer; status 0 when no connection could be made (then `raw`
/// holds the reason). `body` is the parsed JSON, or null when it is not JSON.
struct reply {
  int status = 0;
  json body;
  std::string raw;
};

using header_list = std::vector<std::pair<std::string, std::string>>;

/// One request to an absolute URL with `Authorization: Bearer <bearer>`
/// (none when empty).
reply call(const std::string& method, const std::string& url, const std::string& bearer,
           const std::string& body = {}, const header_list& headers = {});

/// One server-sent event (the test client's type).
using test::sse_event;

/// What one SSE connection delivered.
struct sse_read {
  int status = 0; ///< the response status; 0 when the connection failed
  std::vector<sse_event> events;
  bool exited = false; ///< an `exit` event arrived
  std::string last_id; ///< the last `id:` seen
};

/// Reads the SSE stream at `url` until an `exit` event arrives, or, when
/// `drop_after_events` is set, drops the connection after that many events.
/// `last_event_id` (if not empty) is sent as Last-Event-ID.
sse_read read_events(const std::string& url, const std::string& bearer,
                     const std::string& last_event_id = {},
                     std::optional<size_t> drop_after_events = std::nullopt);

/// The stdout+stderr text of `events` (their JSON `data` fields), in order.
std::string output_text(const std::vector<sse_event>& events);

/// A running `airlockd control`.
struct control_daemon {
  std::unique_ptr<child_process> process;
  std::string host = "127.0.0.1"; ///< the address of its host
  uint16_t port = 0;              ///< HTTP listener
  uint16_t cluster_port = 0;      ///< where workers join
  std::string admin_key;          ///< printed on the first start only
  std::string url() const { return "http://" + host + ":" + std::to_string(port); }
};

/// A running `airlockd worker`.
struct worker_daemon {
  std::unique_ptr<child_process> process;
  std::string host = "127.0.0.1"; ///< the address of its host
  uint16_t port = 0; ///< data-plane listener (TLS with the worker's member certificate)
  std::string data_dir;
  std::string url() const { return "https://" + host + ":" + std::to_string(port); }
};

/// Where the daemons keep their files, and the sandbox host settings the
/// e2e tests use (instance clue2e, veth ce, pool 10.205.0.0/16).
struct cluster_paths {
  std::string airlockd;
  std::string scratch; ///< stderr files and config homes go here
};

/// Starts `airlockd control` on `data_dir` on `host` (its listeners at its
/// address), the cluster listener on `cluster_port` (0: any). nullopt (after
/// a test failure with its stderr) when it does not report both listeners.
std::optional<control_daemon> start_control(const cluster_paths& paths, const std::string& data_dir,
                                            uint16_t cluster_port, const host_address& host = {});

/// Where a worker runs and whom it joins.
struct worker_place {
  host_address host;                    ///< its own host
  std::string control_ip = "127.0.0.1"; ///< the control plane's address
  int index = 0; ///< workers past the first get an instance and uids of their own
};

/// The sandbox host instance of worker `index`: clue2e, clue2e1, clue2e2...
std::string worker_instance(int index);

/// The command line of `airlockd worker --join CONTROL:<join_port>` named
/// `name` with the e2e tests' sandbox host settings and its data listener
/// on its host's address, then `extra`.
std::vector<std::string> worker_args(const std::string& data_dir, uint16_t join_port,
                                     const std::string& name,
                                     const std::vector<std::string>& extra = {},
                                     const worker_place& place = {});

/// Starts `airlockd worker` (worker_args) in its host's network namespace.
std::optional<worker_daemon> start_worker(const cluster_paths& paths, const std::string& data_dir,
                                          uint16_t join_port, const std::string& name,
                                          const std::vector<std::string>& extra = {},
                                          const worker_place& place = {});

/// How a command that runs to its end ended.
struct command_result {
  std::optional<int> exit_code; ///< nullopt: it did not exit within the bound
  std::string out;
  std::string err;
};

/// Runs `airlockd args...` (in the daemons' environment, so with their CLI
/// config; in network namespace `netns` unless empty) to its end, bounded by
/// `bound`.
command_result run_airlockd(const cluster_paths& paths, const std::vector<std::string>& args,
                            milliseconds bound = milliseconds(60'000),
                            const std::string& netns = {});

/// SIGTERM (or SIGKILL when `kill`) and reap; true when it exited in time.
bool stop_process(child_process& process, bool kill = false);

/// Unmounts the btrfs image a worker mounted under `data_dir`/rootfs, so
/// that the temporary directory can be removed. Idempotent.
void unmount_worker_rootfs(const std::string& data_dir);

/// Polls GET /v1/operations/{id}?wait= until the operation is terminal or
/// `bound` passes; the last answer's body (null on no answer).
json wait_operation(const std::string& control_url, const std::string& key,
                    const std::string& operation_id, milliseconds bound);

/// True for succeeded, failed and cancelled.
bool is_terminal(const json& operation);

/// Polls `probe` until it returns true or `bound` passes.
bool eventually(const std::function<bool()>& probe, milliseconds bound);

} // namespace airlock::test::cluster
