#include "cli/commands.hpp"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <functional>
#include <iostream>

namespace airlock::cli {

namespace {

using nlohmann::json;
using steady = std::chrono::steady_clock;

/// The API holds a ?wait= request at most this long.
/// How long one poll of an operation waits on the server: short, so that its
/// progress shows as it comes (the answer comes at once when it ends).
constexpr uint64_t progress_wait_s = 2;

bool is_terminal(const json& operation) {
  auto state = operation.value("state", "");
  return state == "succeeded" || state == "failed" || state == "cancelled";
}

std::string text_of(const json& value) {
  if (value.is_string())
    return value.get<std::string>();
  if (value.is_null())
    return "-";
  return value.dump();
}

/// Columns padded to their widest cell.
void print_table(std::ostream& out, const std::vector<std::string>& headers,
                 const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths(headers.size());
  for (size_t c = 0; c < headers.size(); ++c) {
    widths[c] = headers[c].size();
    for (const auto& row : rows)
      widths[c] = std::max(widths[c], row[c].size());
  }
  auto line = [&out, &widths](const std::vector<std::string>& cells) {
    for (size_t c = 0; c < cells.size(); ++c) {
      out << cells[c];
      if (c + 1 < cells.size())
        out << std::string(widths[c] - cells[c].size() + 2, ' ');
    }
    out << "\n";
  };
  line(headers);
  for (const auto& row : rows)
    line(row);
}

} // namespace

std::string path_id(const std::string& id) { return url_encode(id); }

std::string with_query(std::string path, const query_params& query) {
  char separator = '?';
  for (const auto& [key, value] : query) {
    path += separator + url_encode(key) + "=" + url_encode(value);
    separator = '&';
  }
  return path;
}

namespace {

/// Every item of a paged list, following next_cursor up to `limit` items (0: all).
result<json> list_all(context& ctx, const std::string& path, query_params query, uint64_t limit) {
  json items = json::array();
  std::string cursor;
  for (uint32_t page = 0; page < ctx.options.list_pages_max; ++page) {
    query_params page_query = query;
    if (limit != 0)
      page_query.emplace_back("limit",
                              std::to_string(std::min<uint64_t>(limit - items.size(), 1000)));
    if (!cursor.empty())
      page_query.emplace_back("cursor", cursor);
    auto answer = ctx.api.call("GET", with_query(path, page_query));
    if (!answer)
      return answer.error();
    for (auto& item : answer->value("items", json::array())) {
      if (limit != 0 && items.size() >= limit)
        break;
      items.push_back(std::move(item));
    }
    auto next = answer->value("next_cursor", json(nullptr));
    if (!next.is_string() || next.get<std::string>().empty()
        || (limit != 0 && items.size() >= limit))
      return json{{"items", items}, {"next_cursor", nullptr}};
    cursor = next.get<std::string>();
  }
  return make_status(errc::resource_exhausted, "the list has more than "
                                                 + std::to_string(ctx.options.list_pages_max)
                                                 + " pages; narrow it with --state or --limit");
}

} // namespace

/// Lists every page of `path` (up to --limit items) and prints it: the JSON
/// with --json, else a table of `columns`.
int print_listing(context& ctx, const std::string& path, query_params query,
                  const std::vector<column>& columns) {
  auto listed = list_all(ctx, path, std::move(query), ctx.inv.number("limit").value_or(0));
  if (!listed)
    return report(ctx, listed.error());
  if (ctx.inv.json) {
    ctx.io.out << listed->dump(2) << "\n";
    return 0;
  }
  std::vector<std::string> headers;
  for (const auto& c : columns)
    headers.push_back(c.header);
  std::vector<std::vector<std::string>> rows;
  for (const auto& item : (*listed)["items"]) {
    auto& row = rows.emplace_back();
    for (const auto& c : columns) {
      // An empty cell would shift the columns for whoever splits on blanks.
      auto cell = text_of(item.value(c.field, json()));
      row.push_back(cell.empty() ? "-" : cell);
    }
  }
  print_table(ctx.io.out, headers, rows);
  return 0;
}

namespace {

/// 0 for a succeeded operation; 1 after printing the error of another.
int operation_outcome(context& ctx, const json& operation) {
  if (operation.value("state", "") == "succeeded")
    return 0;
  auto error = operation.value("error", json(nullptr));
  std::string why = error.is_object()
                      ? error.value("code", "error") + ": " + error.value("message", "")
                      : "no error given";
  ctx.io.err << "airlock: operation " << operation.value("id", "?") << " "
             << operation.value("state", "?") << ": " << why << "\n";
  return exit_api_error;
}

uint64_t wait_timeout(context& ctx) {
  return ctx.inv.number("timeout").value_or(ctx.options.wait_timeout_s);
}

int run_create(context& ctx) {
  json body = {{"template", ctx.inv.value("template").value_or("base")}};
  auto add_number = [&ctx, &body](const char* flag, const char* field) {
    if (auto n = ctx.inv.number(flag))
      body[field] = *n;
  };
  add_number("cpu", "cpu_millis");
  add_number("memory", "memory_mb");
  add_number("disk", "disk_mb");
  add_number("idle-timeout", "idle_timeout_s");
  if (ctx.inv.has("env"))
    body["env"] = ctx.inv.pairs("env");
  if (ctx.inv.has("metadata"))
    body["metadata"] = ctx.inv.pairs("metadata");
  auto created = ctx.api.call("POST", "/v1/sandboxes", &body);
  if (!created)
    return report(ctx, created.error());
  if (ctx.inv.has("wait")) {
    auto done = wait_operation(ctx, created->value("operation_id", ""), wait_timeout(ctx));
    if (!done)
      return report(ctx, done.error());
    if (int code = operation_outcome(ctx, *done); code != 0)
      return code;
  }
  if (ctx.inv.json)
    ctx.io.out << created->dump(2) << "\n";
  else
    ctx.io.out << created->value("sandbox_id", "") << "\n";
  return 0;
}

int run_ls(context& ctx) {
  query_params query;
  if (auto state = ctx.inv.value("state"))
    query.emplace_back("state", *state);
  for (const auto& [key, value] : ctx.inv.pairs("metadata"))
    query.emplace_back("metadata." + key, value);
  return print_listing(
    ctx, "/v1/sandboxes", std::move(query),
    {{"ID", "id"}, {"STATE", "state"}, {"TEMPLATE", "template"}, {"CREATED", "created_at"}});
}

int run_get(context& ctx) {
  auto sandbox = ctx.api.call("GET", "/v1/sandboxes/" + path_id(ctx.inv.positionals[0]));
  if (!sandbox)
    return report(ctx, sandbox.error());
  if (ctx.inv.json) {
    ctx.io.out << sandbox->dump(2) << "\n";
    return 0;
  }
  for (const auto& [key, value] : sandbox->items()) {
    if (key == "metadata" && value.is_object()) {
      std::string pairs;
      for (const auto& [k, v] : value.items())
        pairs += (pairs.empty() ? "" : ", ") + k + "=" + text_of(v);
      ctx.io.out << key << ": " << pairs << "\n";
    } else {
      ctx.io.out << key << ": " << text_of(value) << "\n";
    }
  }
  return 0;
}

/// One line per value of a result's `field`: a string gives one line, an
/// array one per element; anything else, or no such field, none.
std::vector<std::string> result_lines(const json& result, const char* field) {
  std::vector<std::string> lines;
  if (!result.is_object())
    return lines;
  auto found = result.find(field);
  if (found == result.end())
    return lines;
  if (found->is_array()) {
    for (const auto& item : *found)
      lines.push_back(text_of(item));
  } else if (found->is_string()) {
    lines.push_back(found->get<std::string>());
  }
  return lines;
}

} // namespace

/// What every verb that starts an operation (a 202 {"operation_id"}) does:
/// prints the operation id, or the answer with --json. With --wait it waits
/// for the operation, prints its id (the operation with --json) and, once it
/// succeeded, the lines of its result's `result_field` (when one is named);
/// exits 1 when the operation did not succeed.
int follow_operation(context& ctx, const json& answer, const char* result_field) {
  std::string operation_id = answer.value("operation_id", "");
  if (!ctx.inv.has("wait")) {
    ctx.io.out << (ctx.inv.json ? answer.dump(2) : operation_id) << "\n";
    return 0;
  }
  auto done = wait_operation(ctx, operation_id, wait_timeout(ctx));
  if (!done)
    return report(ctx, done.error());
  ctx.io.out << (ctx.inv.json ? done->dump(2) : operation_id) << "\n";
  if (int code = operation_outcome(ctx, *done); code != 0)
    return code;
  if (result_field != nullptr && !ctx.inv.json) {
    for (const auto& line : result_lines(done->value("result", json(nullptr)), result_field))
      ctx.io.out << line << "\n";
  }
  return 0;
}

int run_operation(context& ctx, std::string_view method, const std::string& path, const json* body,
                  const char* result_field) {
  auto answer = ctx.api.call(method, path, body);
  if (!answer)
    return report(ctx, answer.error());
  return follow_operation(ctx, *answer, result_field);
}

namespace {

/// /v1/sandboxes/{ID} for the command's first argument.
std::string sandbox_path(const context& ctx) {
  return "/v1/sandboxes/" + path_id(ctx.inv.positionals[0]);
}

/// pause, resume, suspend, wake: POST /v1/sandboxes/{id}/VERB without a body;
/// rm: DELETE /v1/sandboxes/{id}.
int run_lifecycle(context& ctx) {
  if (ctx.inv.command == "rm")
    return run_operation(ctx, "DELETE", sandbox_path(ctx));
  return run_operation(ctx, "POST", sandbox_path(ctx) + "/" + ctx.inv.command);
}

/// No body restores a suspended sandbox from its suspend snapshot;
/// {"checkpoint_id"} rolls it back to that checkpoint.
int run_restore(context& ctx) {
  auto checkpoint = ctx.inv.value("checkpoint");
  if (!checkpoint)
    return run_operation(ctx, "POST", sandbox_path(ctx) + "/restore");
  json body = {{"checkpoint_id", *checkpoint}};
  return run_operation(ctx, "POST", sandbox_path(ctx) + "/restore", &body);
}

int run_checkpoint(context& ctx) {
  json body = json::object();
  if (auto label = ctx.inv.value("label"))
    body["label"] = *label;
  return run_operation(ctx, "POST", sandbox_path(ctx) + "/checkpoints", &body, "checkpoint_id");
}

int run_checkpoints(context& ctx) {
  return print_listing(
    ctx, sandbox_path(ctx) + "/checkpoints", {},
    {{"ID", "id"}, {"LABEL", "label"}, {"AUTOMATIC", "automatic"}, {"CREATED", "created_at"}});
}

int run_rm_checkpoint(context& ctx) {
  return run_operation(ctx, "DELETE", "/v1/checkpoints/" + path_id(ctx.inv.positionals[0]));
}

int run_fork(context& ctx) {
  // The parser requires --count and keeps it within 1..64.
  json body = {{"count", ctx.inv.number("count").value()}};
  return run_operation(ctx, "POST", sandbox_path(ctx) + "/fork", &body, "sandbox_ids");
}

int run_ops(context& ctx) {
  query_params query;
  if (auto target = ctx.inv.value("target"))
    query.emplace_back("target_id", *target);
  if (auto state = ctx.inv.value("state"))
    query.emplace_back("state", *state);
  return print_listing(ctx, "/v1/operations", std::move(query),
                       {{"ID", "id"},
                        {"KIND", "kind"},
                        {"TARGET", "target_id"},
                        {"STATE", "state"},
                        {"UPDATED", "updated_at"}});
}

int run_wait(context& ctx) {
  auto done = wait_operation(ctx, ctx.inv.positionals[0], wait_timeout(ctx));
  if (!done)
    return report(ctx, done.error());
  if (ctx.inv.json)
    ctx.io.out << done->dump(2) << "\n";
  else
    ctx.io.out << done->value("state", "") << "\n";
  return operation_outcome(ctx, *done);
}

int dispatch(context& ctx) {
  static const std::map<std::string_view, std::function<int(context&)>> commands{
    {"create", run_create},
    {"ls", run_ls},
    {"get", run_get},
    {"exec", run_exec},
    {"cp", run_cp},
    {"pause", run_lifecycle},
    {"resume", run_lifecycle},
    {"rm", run_lifecycle},
    {"suspend", run_lifecycle},
    {"wake", run_lifecycle},
    {"restore", run_restore},
    {"checkpoint", run_checkpoint},
    {"checkpoints", run_checkpoints},
    {"rm-checkpoint", run_rm_checkpoint},
    {"fork", run_fork},
    {"template", run_template},
    {"ops", run_ops},
    {"wait", run_wait}};
  return commands.at(ctx.inv.command)(ctx);
}

} // namespace

int report(context& ctx, const status& failure) {
  ctx.io.err << "airlock: " << failure.message << "\n";
  return exit_api_error;
}

std::optional<remote_path> parse_remote(std::string_view arg) {
  auto colon = arg.find(':');
  if (colon == std::string_view::npos || colon == 0)
    return std::nullopt;
  std::string_view prefix = arg.substr(0, colon);
  if (prefix.find('/') != std::string_view::npos)
    return std::nullopt;
  return remote_path{std::string(prefix), std::string(arg.substr(colon + 1))};
}

std::string progress_line(const json& progress, bool bar) {
  const auto& percent = progress.contains("percent") ? progress["percent"] : json(nullptr);
  const std::string step = progress.value("step", "");
  std::string out;
  if (bar) {
    constexpr int width = 30;
    const int filled =
      percent.is_number() ? std::clamp(percent.get<int>(), 0, 100) * width / 100 : 0;
    out = "[" + std::string(filled, '#') + std::string(width - filled, '.') + "] ";
  }
  out += percent.is_number() ? std::to_string(percent.get<int>()) + "% " : "";
  out += step;
  const uint64_t total = progress.value("bytes_total", uint64_t{0});
  if (total > 0)
    out += " (" + std::to_string(progress.value("bytes_done", uint64_t{0}) >> 20) + "/"
           + std::to_string(total >> 20) + " MiB)";
  return out;
}

/// Shows an operation's progress on io.err as it changes: a bar redrawn in
/// place on a terminal, else a line per step.
struct progress_display {
  cli_io& io;
  std::string last_step;
  std::string shown;

  void update(const json& operation) {
    auto progress = operation.value("progress", json(nullptr));
    if (!progress.is_object())
      return;
    const bool bar = io.err_is_terminal;
    auto line = progress_line(progress, bar);
    if (line == shown)
      return;
    const std::string step = progress.value("step", "");
    if (bar) {
      io.err << "\r" << line
             << std::string(shown.size() > line.size() ? shown.size() - line.size() : 0, ' ')
             << std::flush;
    } else if (step != last_step) {
      io.err << "progress: " << line << "\n";
    }
    shown = line;
    last_step = step;
  }

  void finish() {
    if (io.err_is_terminal && !shown.empty())
      io.err << "\n";
  }
};

result<json> wait_operation(context& ctx, const std::string& operation_id, uint64_t timeout_s) {
  auto deadline = steady::now() + std::chrono::seconds(timeout_s);
  progress_display display{ctx.io, {}, {}};
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::seconds>(deadline - steady::now()).count();
    // Short waits, so that progress shows as it comes.
    uint64_t wait_s = std::clamp<int64_t>(left, 0, static_cast<int64_t>(progress_wait_s));
    auto operation = ctx.api.call("GET", "/v1/operations/" + path_id(operation_id)
                                           + "?wait=" + std::to_string(wait_s));
    if (!operation) {
      display.finish();
      return operation.error();
    }
    display.update(*operation);
    if (is_terminal(*operation)) {
      display.finish();
      return operation;
    }
    if (steady::now() >= deadline || wait_s == 0)
      return make_status(errc::timeout, "operation " + operation_id + " is still "
                                          + operation->value("state", "running") + " after "
                                          + std::to_string(timeout_s) + " s\nhint: airlock wait "
                                          + operation_id + " waits longer");
  }
}

int exit_code_of(std::optional<int> exit_code, std::optional<int> signal) {
  if (signal && *signal > 0)
    return 128 + std::min(*signal, 127);
  if (!exit_code)
    return 1;
  return std::clamp(*exit_code, 0, 255);
}

int run_cli(std::span<const std::string> args, const env_map& env, cli_io io,
            const cli_options& options) {
  auto inv = parse_args(args);
  if (!inv) {
    io.err << "airlock: " << inv.error().message << "\n";
    return exit_usage;
  }
  if (inv->help) {
    const command_spec* spec = find_command(inv->command);
    io.out << (spec ? command_help(*spec) : usage_text());
    return 0;
  }
  auto config = resolve_connection(inv->connection, env);
  if (!config) {
    io.err << "airlock: " << config.error().message << "\n";
    return exit_usage;
  }
  if (config->api_key.empty()) {
    io.err << "airlock: no API key: set AIRLOCK_API_KEY, pass --api-key, or run airlockd serve "
              "once (it writes "
           << config->config_path << ")\n";
    return exit_usage;
  }
  http_client_options http = options.http;
  if (!config->ca_file.empty()) {
    auto pem = read_ca_file(config->ca_file);
    if (!pem) {
      io.err << "airlock: " << pem.error().message << "\n";
      return exit_usage;
    }
    http.ca_pem = std::move(*pem);
  }
  api_client api(*config, http);
  context ctx{*inv, api, io, options};
  return dispatch(ctx);
}

} // namespace airlock::cli
