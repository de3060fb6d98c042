#pragma once
// Internal to cli/: what the command implementations share. Declared here so
// that tests can drive the pieces (remote paths, waiting) directly.

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "cli/api.hpp"
#include "cli/args.hpp"
#include "cli/cli.hpp"

namespace airlock::cli {

/// Everything one command needs.
struct context {
  const invocation& inv;
  const api_client& api;
  cli_io& io;
  const cli_options& options;
};

/// Prints "airlock: MESSAGE" to io.err and returns 1.
int report(context& ctx, const status& failure);

/// `ID:/abs/path` taken apart. A prefix without '/' before the first ':'
/// names a sandbox; anything else is a local path.
struct remote_path {
  std::string sandbox_id;
  std::string path;
};
std::optional<remote_path> parse_remote(std::string_view arg);

/// Polls GET /v1/operations/{id}?wait= until the operation is terminal; its
/// JSON. timeout after `timeout_s`.
result<nlohmann::json> wait_operation(context& ctx, const std::string& operation_id,
                                      uint64_t timeout_s);

int run_exec(context& ctx);
int run_cp(context& ctx);

/// PUTs the local file `source` ("-": stdin; at most upload_bytes_max) to
/// `path` as the raw body; the 2xx answer's JSON.
result<nlohmann::json> put_local_file(context& ctx, const std::string& path,
                                      const std::string& source);

} // namespace airlock::cli
