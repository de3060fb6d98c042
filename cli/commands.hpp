#pragma once
// Internal to cli/: what the command implementations share. Declared here so
// that tests can drive the pieces (remote paths, waiting) directly.

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

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

/// Exit codes: the API refused or an operation failed; the command line is wrong.
inline constexpr int exit_api_error = 1;
inline constexpr int exit_usage = 2;

/// The path segment of an id, escaped.
std::string path_id(const std::string& id);

using query_params = std::vector<std::pair<std::string, std::string>>;
/// `path` with `query` appended, escaped.
std::string with_query(std::string path, const query_params& query);

/// One column of a listing: its header and the item field it shows.
struct column {
  std::string header;
  std::string field;
};

/// Lists every page of `path` (up to --limit items) and prints it: the JSON
/// with --json, else a table of `columns`.
int print_listing(context& ctx, const std::string& path, query_params query,
                  const std::vector<column>& columns);

/// What every verb that starts an operation (a 202 {"operation_id"}) does:
/// prints the operation id, or the answer with --json. With --wait it waits
/// for the operation, prints its id (the operation with --json) and, once it
/// succeeded, the lines of its result's `result_field` (when one is named);
/// exits 1 when the operation did not succeed.
int follow_operation(context& ctx, const nlohmann::json& answer,
                     const char* result_field = nullptr);
/// Calls `method path` with `body`, then follow_operation on its answer.
int run_operation(context& ctx, std::string_view method, const std::string& path,
                  const nlohmann::json* body = nullptr, const char* result_field = nullptr);

int run_exec(context& ctx);
/// `template ls | get | build | push | log | rm | pool` (template_command.cpp).
int run_template(context& ctx);
int run_cp(context& ctx);

/// PUTs the local file `source` ("-": stdin; at most upload_bytes_max) to
/// `path` as the raw body; the 2xx answer's JSON.
result<nlohmann::json> put_local_file(context& ctx, const std::string& path,
                                      const std::string& source);

} // namespace airlock::cli
