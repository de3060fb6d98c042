#include "gateway/api_json.hpp"

#include "actors/runtime_choice.hpp"
#include "schema/base64.hpp"
#include "schema/egress_rules.hpp"

#include <csignal>
#include <cstdio>
#include <ctime>
#include <map>
#include <optional>

namespace airlock::gateway {

using nlohmann::json;

http::status http_status_of(errc code) noexcept {
  switch (code) {
    case errc::invalid_argument: return http::status::bad_request;
    case errc::unauthenticated: return http::status::unauthorized;
    case errc::permission_denied: return http::status::forbidden;
    case errc::not_found: return http::status::not_found;
    case errc::already_exists:
    case errc::wrong_state:
    case errc::conflict: return http::status::conflict;
    case errc::gone: return http::status::gone;
    case errc::too_large: return http::status::payload_too_large;
    case errc::resource_exhausted: return http::status::too_many_requests;
    case errc::unavailable: return http::status::service_unavailable;
    case errc::timeout:
    case errc::outcome_unknown:
    case errc::deadline_exceeded: return http::status::gateway_timeout;
    case errc::cancelled: return http::status::conflict;
    case errc::unimplemented: return http::status::not_implemented;
    default: return http::status::internal_server_error;
  }
}

http_response error_response(const status& failure) {
  return json_error(http_status_of(failure.code), to_string(failure.code), failure.message);
}

nlohmann::json timestamp_json(int64_t unix_ms) {
  if (unix_ms <= 0)
    return nullptr;
  std::time_t seconds = unix_ms / 1000;
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[64];
  std::snprintf(text, sizeof text, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", utc.tm_year + 1900,
                utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec,
                static_cast<int>(unix_ms % 1000));
  return std::string(text);
}

namespace {

/// Most automatic checkpoints a sandbox may keep.
constexpr uint64_t checkpoints_max_limit = 100;

json parsed_or_raw(const std::string& text) {
  if (text.empty())
    return nullptr;
  auto value = json::parse(text, nullptr, false);
  return value.is_discarded() ? json(text) : value;
}

json map_json(const std::map<std::string, std::string>& values) {
  json out = json::object();
  for (const auto& [key, value] : values)
    out[key] = value;
  return out;
}

status bad(std::string message) { return make_status(errc::invalid_argument, std::move(message)); }

/// Reads an optional unsigned field in [min, max].
result<std::optional<uint64_t>> read_uint(const json& body, const char* field, uint64_t min,
                                          uint64_t max) {
  auto found = body.find(field);
  if (found == body.end() || found->is_null())
    return std::optional<uint64_t>{};
  if (!found->is_number_integer() && !found->is_number_unsigned())
    return bad(std::string(field) + " must be an integer");
  if (found->is_number_integer() && found->get<int64_t>() < 0)
    return bad(std::string(field) + " must not be negative");
  auto value = found->get<uint64_t>();
  if (value < min || value > max)
    return bad(std::string(field) + " must be between " + std::to_string(min) + " and "
               + std::to_string(max));
  return std::optional<uint64_t>(value);
}

} // namespace

result<std::optional<std::string>> read_text(const json& body, const char* field,
                                             const spec_limits& limits) {
  auto found = body.find(field);
  if (found == body.end() || found->is_null())
    return std::optional<std::string>{};
  if (!found->is_string())
    return bad(std::string(field) + " must be a string");
  auto text = found->get<std::string>();
  if (text.size() > limits.text_bytes_max)
    return bad(std::string(field) + " is longer than " + std::to_string(limits.text_bytes_max)
               + " bytes");
  return std::optional<std::string>(std::move(text));
}

namespace {

result<std::optional<std::map<std::string, std::string>>>
read_map(const json& body, const char* field, const spec_limits& limits) {
  auto found = body.find(field);
  if (found == body.end() || found->is_null())
    return std::optional<std::map<std::string, std::string>>{};
  if (!found->is_object())
    return bad(std::string(field) + " must be an object of strings");
  if (found->size() > limits.map_entries_max)
    return bad(std::string(field) + " has more than " + std::to_string(limits.map_entries_max)
               + " entries");
  std::map<std::string, std::string> out;
  for (const auto& [key, value] : found->items()) {
    if (!value.is_string())
      return bad(std::string(field) + "." + key + " must be a string");
    if (key.empty() || key.size() > limits.text_bytes_max
        || value.get_ref<const std::string&>().size() > limits.text_bytes_max)
      return bad(std::string(field) + " has an empty or oversized key or value");
    out[key] = value.get<std::string>();
  }
  return std::optional<std::map<std::string, std::string>>(std::move(out));
}

result<std::optional<schema::egress_policy>> read_egress(const json& body,
                                                         const spec_limits& limits) {
  auto found = body.find("egress");
  if (found == body.end() || found->is_null())
    return std::optional<schema::egress_policy>{};
  if (!found->is_object())
    return bad("egress must be an object {\"profile\": \"none|allowlist|open\", \"allow\": [...]}");
  schema::egress_policy policy;
  auto profile = read_text(*found, "profile", limits);
  if (!profile)
    return bad("egress." + profile.error().message);
  if (*profile) {
    auto parsed = schema::parse_egress_profile(**profile);
    if (!parsed)
      return bad("egress.profile must be one of none, allowlist, open");
    policy.profile = *parsed;
  }
  if (auto allow = found->find("allow"); allow != found->end() && !allow->is_null()) {
    if (!allow->is_array() || allow->size() > limits.allow_entries_max)
      return bad("egress.allow must be an array of at most "
                 + std::to_string(limits.allow_entries_max) + " host names");
    for (const auto& host : *allow) {
      if (!host.is_string() || host.get_ref<const std::string&>().empty()
          || host.get_ref<const std::string&>().size() > 253)
        return bad("egress.allow entries must be host names");
      policy.allow.push_back(host.get<std::string>());
    }
  }
  // The gateway enforces exactly what the API accepts (schema/egress_rules).
  if (auto valid = schema::validate_egress_policy(policy); !valid)
    return bad("egress.allow: " + valid.message);
  return std::optional<schema::egress_policy>(std::move(policy));
}

/// Key-value pairs as a JSON object.
json env_json(const std::vector<std::pair<std::string, std::string>>& pairs) {
  json out = json::object();
  for (const auto& [key, value] : pairs)
    out[key] = value;
  return out;
}

} // namespace

json to_json(const schema::operation_record& record) {
  json error = nullptr;
  if (record.error)
    error = {{"code", record.error->code}, {"message", record.error->message}};
  return {{"id", record.id},
          {"kind", record.kind},
          {"target_id", record.target_id},
          {"state", std::string(schema::to_string(record.state))},
          {"error", error},
          {"result", parsed_or_raw(record.result_json)},
          {"progress", parsed_or_raw(record.progress_json)},
          {"created_at", timestamp_json(record.created_at_ms)},
          {"updated_at", timestamp_json(record.updated_at_ms)}};
}

json to_json(const schema::template_version& v) {
  json out = {{"version", v.version},
              {"state", std::string(schema::to_string(v.state))},
              {"source", json::parse(v.source_json, nullptr, false)},
              {"digest", v.digest.empty() ? json(nullptr) : json(v.digest)},
              {"size_bytes", v.size_bytes},
              {"files", v.files},
              {"env", env_json(v.env)},
              {"workdir", v.workdir.empty() ? json(nullptr) : json(v.workdir)},
              {"user", v.user.empty() ? json(nullptr) : json(v.user)},
              {"start_cmd", v.start_cmd.empty() ? json(nullptr) : json(v.start_cmd)},
              {"ready_cmd", v.ready_cmd.empty() ? json(nullptr) : json(v.ready_cmd)},
              {"default_runtime", v.default_runtime.empty() ? "namespace" : v.default_runtime},
              {"worker_id", v.worker_id.empty() ? json(nullptr) : json(v.worker_id)},
              {"operation_id", v.operation_id.empty() ? json(nullptr) : json(v.operation_id)},
              {"created_at", timestamp_json(v.created_at_ms)},
              {"build_log_tail", v.build_log_tail.empty() ? json(nullptr) : json(v.build_log_tail)},
              {"error", json(nullptr)}};
  if (out["source"].is_discarded())
    out["source"] = nullptr;
  if (v.error)
    out["error"] = {{"code", v.error->code}, {"message", v.error->message}};
  return out;
}

json to_json(const schema::pool_settings& pool) {
  return {{"size", pool.size},
          {"cpu_millis", pool.cpu_millis},
          {"memory_mb", pool.memory_mb},
          {"disk_mb", pool.disk_mb}};
}

json to_json(const schema::template_record& record) {
  json versions = json::array();
  for (const auto& v : record.versions)
    versions.push_back(to_json(v));
  const auto* current = record.find(record.current_version);
  // The newest version's state tells a client whether a build is under way.
  const auto* newest = record.versions.empty() ? nullptr : &record.versions.back();
  return {{"name", record.name},
          {"version", record.current_version == 0 ? json(nullptr) : json(record.current_version)},
          {"state", newest ? std::string(schema::to_string(newest->state)) : "failed"},
          {"size_bytes", current ? current->size_bytes : 0},
          {"default_runtime", "namespace"},
          {"shared", record.tenant_id.empty()},
          {"pool", to_json(record.pool)},
          {"versions", versions},
          {"created_at", timestamp_json(record.created_at_ms)},
          {"updated_at", timestamp_json(record.updated_at_ms)}};
}

json to_json(const schema::sandbox_record& record) {
  const auto& spec = record.spec;
  json egress = {{"profile", std::string(schema::to_string(spec.egress.profile))},
                 {"allow", spec.egress.allow}};
  json out = {
    {"id", record.id},
    {"state", std::string(schema::to_string(record.state))},
    {"template", spec.template_name},
    {"template_version", spec.template_version == 0 ? json(nullptr) : json(spec.template_version)},
    {"runtime", actors::runtime_of(spec)},
    {"worker_id", record.worker_id.empty() ? json(nullptr) : json(record.worker_id)},
    {"data_url", record.data_url.empty() ? json(nullptr) : json(record.data_url)},
    {"cpu_millis", spec.cpu_millis},
    {"memory_mb", spec.memory_mb},
    {"disk_mb", spec.disk_mb},
    {"cpu_request_millis", spec.cpu_request_millis},
    {"memory_request_mb", spec.memory_request_mb},
    {"disk_request_mb", spec.disk_request_mb},
    {"idle_timeout_s", spec.idle_timeout_s},
    {"metadata", map_json(spec.metadata)},
    {"egress", egress},
    {"created_at", timestamp_json(record.created_at_ms)},
    {"last_active_at", timestamp_json(record.last_active_at_ms)},
    {"snapshot_id", record.snapshot_id.empty() ? json(nullptr) : json(record.snapshot_id)},
    {"on_idle", std::string(schema::to_string(spec.on_idle))},
    {"max_lifetime_s", spec.max_lifetime_s},
    {"lifetime_used_s", record.lifetime_used_ms / 1000},
    {"running_since", timestamp_json(record.running_since_ms)},
    {"checkpoint_interval_s", spec.checkpoint_interval_s},
    {"checkpoints_max", spec.checkpoints_max},
    {"from_checkpoint", spec.from_checkpoint.empty() ? json(nullptr) : json(spec.from_checkpoint)}};
  if (record.error_reason)
    out["error"] = {{"code", record.error_reason->code}, {"message", record.error_reason->message}};
  return out;
}

json to_json(const schema::snapshot_record& record) {
  return json{{"id", record.id},
              {"kind", std::string(schema::to_string(record.kind))},
              {"sandbox_id", record.sandbox_id},
              {"template", record.template_name},
              {"runtime", record.runtime},
              {"worker_id", record.worker_id},
              {"memory_persisted", record.memory_persisted},
              {"size_bytes", record.size_bytes},
              {"label", record.label},
              {"automatic", record.automatic},
              {"created_at", timestamp_json(record.created_at_ms)},
              {"complete", record.complete}};
}

json to_json(const actors::process_view& process) {
  // The API's two states: starting counts as running, failed as exited.
  bool exited = schema::has_ended(process.state);
  // Killed by a signal: there is no exit code, only the signal.
  bool has_code = exited && process.signal == 0;
  return {{"process_id", process.process_id},
          {"pid", process.pid},
          {"state", exited ? "exited" : "running"},
          {"stdout_bytes", process.stdout_bytes},
          {"stderr_bytes", process.stderr_bytes},
          {"pty", process.pty},
          {"argv", process.argv},
          {"cmd", process.cmd.empty() ? json(nullptr) : json(process.cmd)},
          {"cwd", process.cwd},
          {"env", env_json(process.env)},
          {"tag", process.tag.empty() ? json(nullptr) : json(process.tag)},
          {"exit_code", has_code ? json(process.exit_code) : json(nullptr)},
          {"signal", exited && process.signal != 0 ? json(process.signal) : json(nullptr)},
          {"error", process.error.empty() ? json(nullptr) : json(process.error)},
          {"started_at", timestamp_json(process.started_at_ms)},
          {"ended_at", timestamp_json(process.ended_at_ms)}};
}

json to_json(const actors::file_entry& entry) {
  return {
    {"name", entry.name},
    {"type", entry.type},
    {"size_bytes", entry.size_bytes},
    {"mode", entry.mode},
    {"modified_at", timestamp_json(entry.modified_at_ms)},
    {"uid", entry.uid},
    {"gid", entry.gid},
    {"owner", entry.owner},
    {"group", entry.group},
    {"symlink_target", entry.symlink_target.empty() ? json(nullptr) : json(entry.symlink_target)}};
}

result<json> parse_object(std::string_view body) {
  if (body.empty())
    return bad("the request body is empty; send a JSON object");
  auto value = json::parse(body, nullptr, false);
  if (value.is_discarded())
    return bad("the request body is not valid JSON");
  if (!value.is_object())
    return bad("the request body must be a JSON object");
  return value;
}

/// The requests (what placement reserves), each at most its limit; absent:
/// 0, the worker's default (capped at the limit by the worker).
status read_requests(const json& body, schema::sandbox_spec& spec, const spec_limits& limits) {
  uint32_t disk_ceiling = spec.disk_mb != 0 ? spec.disk_mb : limits.disk_mb_max;
  auto cpu = read_uint(body, "cpu_request_millis", 1, spec.cpu_millis);
  auto memory = read_uint(body, "memory_request_mb", 1, spec.memory_mb);
  auto disk = read_uint(body, "disk_request_mb", 0, disk_ceiling);
  for (const auto* field : {&cpu, &memory, &disk})
    if (!*field)
      return make_status(field->code(),
                         field->error().message + " (a request is at most its limit)");
  spec.cpu_request_millis = static_cast<uint32_t>(cpu->value_or(0));
  spec.memory_request_mb = static_cast<uint32_t>(memory->value_or(0));
  spec.disk_request_mb = static_cast<uint32_t>(disk->value_or(0));
  return status::ok();
}

namespace {

/// The lifecycle policy fields of a create or a PATCH, each optional.
struct policy_fields {
  std::optional<std::string> on_idle; ///< checked: "suspend" or "delete"
  std::optional<uint32_t> max_lifetime_s;
  std::optional<uint32_t> checkpoint_interval_s;
  std::optional<uint32_t> checkpoints_max;
};

result<policy_fields> read_policy(const json& body, const spec_limits& limits) {
  auto lifetime = read_uint(body, "max_lifetime_s", 0, 365 * 24 * 3600);
  auto interval = read_uint(body, "checkpoint_interval_s", 0, 24 * 3600);
  auto kept = read_uint(body, "checkpoints_max", 1, checkpoints_max_limit);
  for (const auto* field : {&lifetime, &interval, &kept})
    if (!*field)
      return field->error();
  auto on_idle = read_text(body, "on_idle", limits);
  if (!on_idle)
    return on_idle.error();
  if (*on_idle && !schema::parse_idle_action(**on_idle))
    return bad("on_idle must be \"suspend\" or \"delete\"");
  auto narrow = [](const std::optional<uint64_t>& value) -> std::optional<uint32_t> {
    if (!value)
      return std::nullopt;
    return static_cast<uint32_t>(*value);
  };
  return policy_fields{*on_idle, narrow(*lifetime), narrow(*interval), narrow(*kept)};
}

} // namespace

result<schema::sandbox_spec> parse_sandbox_spec(const json& body, const spec_limits& limits) {
  schema::sandbox_spec spec;
  auto name = read_text(body, "template", limits);
  if (!name)
    return name.error();
  auto checkpoint = read_text(body, "from_checkpoint", limits);
  if (!checkpoint)
    return checkpoint.error();
  if (*checkpoint)
    spec.from_checkpoint = **checkpoint;
  // A sandbox from a checkpoint has the checkpoint's template (filled in by
  // the route, which reads the checkpoint).
  if ((!*name || (*name)->empty()) && spec.from_checkpoint.empty())
    return bad("template is required, e.g. {\"template\": \"base\"}, unless from_checkpoint "
               "names a checkpoint to start from");
  if (*name)
    spec.template_name = **name;
  // 10 mCPU is the smallest CPU quota the kernel takes (1 ms per 100 ms period).
  auto cpu = read_uint(body, "cpu_millis", 10, limits.cpu_millis_max);
  auto memory = read_uint(body, "memory_mb", 16, limits.memory_mb_max);
  auto disk = read_uint(body, "disk_mb", 0, limits.disk_mb_max);
  auto idle = read_uint(body, "idle_timeout_s", 0, 30 * 24 * 3600);
  for (const auto* field : {&cpu, &memory, &disk, &idle})
    if (!*field)
      return field->error();
  auto policy = read_policy(body, limits);
  if (!policy)
    return policy.error();
  spec.max_lifetime_s = policy->max_lifetime_s.value_or(0);
  spec.checkpoint_interval_s = policy->checkpoint_interval_s.value_or(0);
  spec.checkpoints_max = policy->checkpoints_max.value_or(spec.checkpoints_max);
  if (policy->on_idle)
    spec.on_idle = *schema::parse_idle_action(*policy->on_idle);
  spec.cpu_millis = static_cast<uint32_t>(cpu->value_or(spec.cpu_millis));
  spec.memory_mb = static_cast<uint32_t>(memory->value_or(spec.memory_mb));
  spec.disk_mb = static_cast<uint32_t>(disk->value_or(spec.disk_mb));
  spec.idle_timeout_s = static_cast<uint32_t>(idle->value_or(spec.idle_timeout_s));
  if (auto requests = read_requests(body, spec, limits); !requests)
    return requests;
  auto env = read_map(body, "env", limits);
  auto metadata = read_map(body, "metadata", limits);
  if (!env)
    return env.error();
  if (!metadata)
    return metadata.error();
  spec.env = env->value_or(std::map<std::string, std::string>{});
  spec.metadata = metadata->value_or(std::map<std::string, std::string>{});
  auto egress = read_egress(body, limits);
  if (!egress)
    return egress.error();
  if (*egress)
    spec.egress = **egress;
  return spec;
}

result<std::map<std::string, std::string>> parse_metadata(const json& body,
                                                          const spec_limits& limits) {
  auto metadata = read_map(body, "metadata", limits);
  if (!metadata)
    return metadata.error();
  return metadata->value_or(std::map<std::string, std::string>{});
}

result<actors::sandbox_patch> parse_sandbox_patch(const json& body, const spec_limits& limits) {
  actors::sandbox_patch patch;
  auto metadata = read_map(body, "metadata", limits);
  if (!metadata)
    return metadata.error();
  patch.metadata = *metadata;
  auto egress = read_egress(body, limits);
  if (!egress)
    return egress.error();
  patch.egress = *egress;
  auto idle = read_uint(body, "idle_timeout_s", 0, 30 * 24 * 3600);
  if (!idle)
    return idle.error();
  if (*idle)
    patch.idle_timeout_s = static_cast<uint32_t>(**idle);
  auto policy = read_policy(body, limits);
  if (!policy)
    return policy.error();
  patch.on_idle = policy->on_idle;
  patch.max_lifetime_s = policy->max_lifetime_s;
  patch.checkpoint_interval_s = policy->checkpoint_interval_s;
  patch.checkpoints_max = policy->checkpoints_max;
  if (!patch.metadata && !patch.egress && !patch.idle_timeout_s && !patch.on_idle
      && !patch.max_lifetime_s && !patch.checkpoint_interval_s && !patch.checkpoints_max)
    return bad("send at least one of metadata, egress, idle_timeout_s, on_idle, max_lifetime_s, "
               "checkpoint_interval_s, checkpoints_max");
  return patch;
}

result<actors::exec_spec> parse_exec_spec(const json& body, const spec_limits& limits) {
  actors::exec_spec spec;
  if (auto argv = body.find("argv"); argv != body.end() && !argv->is_null()) {
    if (!argv->is_array() || argv->empty() || argv->size() > limits.map_entries_max)
      return bad("argv must be a non-empty array of strings");
    for (const auto& arg : *argv) {
      if (!arg.is_string() || arg.get_ref<const std::string&>().size() > limits.text_bytes_max)
        return bad("argv must be a non-empty array of strings");
      spec.argv.push_back(arg.get<std::string>());
    }
  }
  auto cmd = read_text(body, "cmd", limits);
  auto cwd = read_text(body, "cwd", limits);
  auto user = read_text(body, "user", limits);
  for (const auto* field : {&cmd, &cwd, &user})
    if (!*field)
      return field->error();
  spec.cmd = cmd->value_or("");
  spec.cwd = cwd->value_or("");
  spec.user = user->value_or("");
  if (spec.argv.empty() == spec.cmd.empty())
    return bad("send exactly one of argv (an array) and cmd (a shell line)");
  auto env = read_map(body, "env", limits);
  if (!env)
    return env.error();
  for (auto& [key, value] : env->value_or(std::map<std::string, std::string>{}))
    spec.env.emplace_back(key, value);
  if (auto pty = body.find("pty"); pty != body.end() && !pty->is_null()) {
    if (!pty->is_object())
      return bad("pty must be an object {\"rows\": 24, \"cols\": 80}");
    auto rows = read_uint(*pty, "rows", 1, 1000);
    auto cols = read_uint(*pty, "cols", 1, 1000);
    if (!rows)
      return rows.error();
    if (!cols)
      return cols.error();
    spec.pty = true;
    spec.rows = static_cast<uint16_t>(rows->value_or(24));
    spec.cols = static_cast<uint16_t>(cols->value_or(80));
  }
  if (auto in = body.find("stdin"); in != body.end() && !in->is_null()) {
    if (!in->is_boolean())
      return bad("stdin must be true or false");
    spec.stdin_open = in->get<bool>();
  }
  auto timeout = read_uint(body, "timeout_s", 0, 7 * 24 * 3600);
  if (!timeout)
    return timeout.error();
  spec.timeout_s = static_cast<uint32_t>(timeout->value_or(0));
  auto tag = read_text(body, "tag", limits);
  if (!tag)
    return tag.error();
  spec.tag = tag->value_or("");
  return spec;
}

result<int32_t> parse_signal(const json& value) {
  static const std::map<std::string, int32_t> names = {
    {"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT},  {"KILL", SIGKILL},
    {"TERM", SIGTERM}, {"USR1", SIGUSR1}, {"USR2", SIGUSR2},  {"STOP", SIGSTOP},
    {"CONT", SIGCONT}, {"ALRM", SIGALRM}, {"WINCH", SIGWINCH}};
  if (value.is_number_integer()) {
    auto number = value.get<int64_t>();
    if (number < 1 || number > 64)
      return bad("signal must be 1..64 or a name such as TERM");
    return static_cast<int32_t>(number);
  }
  if (!value.is_string())
    return bad("signal must be a name such as \"TERM\" or a number");
  auto name = value.get<std::string>();
  if (name.rfind("SIG", 0) == 0)
    name = name.substr(3);
  auto found = names.find(name);
  if (found == names.end())
    return bad("unknown signal '" + value.get<std::string>() + "'; use e.g. TERM, KILL, INT");
  return found->second;
}

bool is_utf8(std::string_view bytes) noexcept {
  size_t i = 0;
  while (i < bytes.size()) {
    auto lead = static_cast<uint8_t>(bytes[i]);
    size_t extra = 0;
    if (lead < 0x80)
      extra = 0;
    else if ((lead >> 5) == 0x6)
      extra = 1;
    else if ((lead >> 4) == 0xE)
      extra = 2;
    else if ((lead >> 3) == 0x1E)
      extra = 3;
    else
      return false;
    if (bytes.size() - i <= extra)
      return false;
    for (size_t k = 1; k <= extra; ++k)
      if ((static_cast<uint8_t>(bytes[i + k]) >> 6) != 0x2)
        return false;
    i += extra + 1;
  }
  return true;
}

std::string base64_encode(std::string_view bytes) { return airlock::base64_encode(bytes); }

} // namespace airlock::gateway
