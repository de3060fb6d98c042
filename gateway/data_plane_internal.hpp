#pragma once
// Internal to gateway/: what the data-plane route files share
// (data_routes.cpp the routes and their resolution, data_uploads.cpp file
// uploads). Not a public header: data_routes.hpp is the contract.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "gateway/api_common.hpp"
#include "gateway/data_routes.hpp"

namespace airlock::gateway::data_detail {

struct data_api {
  data_plane_deps deps;
  std::chrono::milliseconds timeout() const {
    return std::chrono::milliseconds(deps.options.call_timeout_ms);
  }
};
using api_ptr = std::shared_ptr<const data_api>;

/// A sandbox the caller may use, and where it runs.
struct target {
  std::string sandbox_id;
  std::string tenant_id;
  actors::node_actor node;
  std::string data_url;    ///< where attach_url points
  std::string worker_id;   ///< the sandbox's worker: the audience of tokens minted for it
  bool by_api_key = false; ///< else by a control-plane token
  std::string token;       ///< the caller's token (token callers)
  int64_t token_expires_ms = 0;
  /// Found through the scheduler: the request is relayed to the sandbox's
  /// worker (a control listener, or `serve`'s), not served by that worker.
  bool forwarded = false;
};

/// Counts what a forwarding listener relays (airlock_data_forwarded_*): a
/// deployment whose control plane relays much should send clients to the
/// workers' data_url (docs/architecture.md).
void count_forwarded(const data_api& api, const target& t, std::string_view direction,
                     uint64_t bytes);

/// The longest path a file route takes.
constexpr size_t path_bytes_max = 4096;

/// ?path= as an absolute path; invalid_argument otherwise.
result<std::string> path_of_query(const exchange& ex);

/// ?NAME= as a flag: absent, 1 or true is true; 0 or false is false;
/// anything else invalid_argument.
result<bool> flag(const exchange& ex, std::string_view name);

/// While `stream` is open, sandbox `sandbox_id` counts as active for the
/// idle policy (control listeners only: they have the registry).
void keep_active_while_open(const data_api& api, const std::shared_ptr<sse_stream>& stream,
                            const std::string& sandbox_id);

/// GET .../files/watch?path=&recursive=: a directory watch as SSE
/// (data_watch.cpp).
void watch_files(api_ptr api, detail::exchange_ptr ex, target t);

/// PUT .../files?path=&mode=: the body is read as it is sent (the route
/// streams it); a body of at most one chunk goes to the worker in one
/// message, a larger one through a write session, a chunk at a time.
void write_file(api_ptr api, detail::exchange_ptr ex, target t);

/// The file routes (data_files.cpp): GET .../files?path= (small files in one
/// read, larger ones streamed), .../list, .../stat, DELETE, .../mkdir and
/// .../move?to=.
void read_file(api_ptr api, detail::exchange_ptr ex, target t);
void list_files(api_ptr api, detail::exchange_ptr ex, target t);
void stat_file(api_ptr api, detail::exchange_ptr ex, target t);
void remove_file(api_ptr api, detail::exchange_ptr ex, target t);
void make_directory(api_ptr api, detail::exchange_ptr ex, target t);
void move_file(api_ptr api, detail::exchange_ptr ex, target t);

} // namespace airlock::gateway::data_detail
