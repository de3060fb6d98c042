#pragma once
// A child `airlockd serve` for the HTTP benchmarks, on an instance of its own
// (its nftables table, veth prefix, address pool and id range), plus the
// calls every HTTP benchmark makes through it.

#include <sys/types.h>

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "bench/api/http_client.hpp"

namespace airlock::api_bench {

/// What keeps one benchmark's daemon apart from another's and from a real one.
struct serve_identity {
  std::string instance;
  std::string veth_prefix;
  std::string address_pool;
  std::string uid_base;
};

/// The running child: its pid, stdout, port and admin key.
struct serve_daemon {
  pid_t pid = -1;
  FILE* out = nullptr;
  uint16_t port = 0;
  std::string key;

  /// SIGTERM, then waits for the child.
  void stop();
};

/// `airlockd serve` with its data in DIR/data, listening on a free loopback
/// port; once it reported the port and its admin key is readable. Its stderr
/// goes to DIR/stderr.log (printed here when it does not start).
std::optional<serve_daemon> start_serve(const std::string& airlockd, const std::string& dir,
                                        const serve_identity& who);

/// The body as JSON, or null when it is not JSON.
nlohmann::json parse(const http_answer& answer);

/// GET /v1/operations/{id}?wait=60 until it ends; true when it succeeded.
bool wait_operation(keepalive_client& client, const std::string& operation_id);

/// DELETE the sandbox and wait for it to be gone.
bool http_delete(keepalive_client& client, const std::string& id);

} // namespace airlock::api_bench
