// The operator's cluster commands: calls to the control plane's API with the
// admin key of AIRLOCK_API_KEY or the CLI's config file.
// - `airlockd token create [--ttl DURATION] [--name NAME] [--url URL]`
//   (POST /v1/cluster/tokens) prints the token alone on stdout (for
//   `TOKEN=$(airlockd token create)`), its details on stderr;
// - `airlockd worker remove ID [--url URL]` (DELETE /v1/workers/{id}).

#include <charconv>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "airlockd/admin_key.hpp"
#include "airlockd/commands.hpp"
#include "airlockd/http_call.hpp"

namespace airlock::airlockd {

namespace {

using nlohmann::json;

constexpr int exit_failure = 1;
constexpr int exit_usage = 2;
constexpr std::chrono::seconds call_timeout{30};

/// "90", "90s", "15m", "1h", "7d" as seconds; nullopt for anything else.
std::optional<int64_t> parse_duration(std::string_view text) {
  int64_t unit = 1;
  if (!text.empty()) {
    switch (text.back()) {
      case 's': unit = 1; break;
      case 'm': unit = 60; break;
      case 'h': unit = 3600; break;
      case 'd': unit = 86400; break;
      default: unit = 0; break;
    }
    if (unit != 0)
      text.remove_suffix(1);
    else
      unit = 1;
  }
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size() || value <= 0
      || value > 365 * 86400)
    return std::nullopt;
  return value * unit;
}

/// The control plane's URL and the admin key: `url` (a flag) or
/// AIRLOCK_URL, AIRLOCK_API_KEY, else the CLI config file. A sentence naming
/// what is missing otherwise.
result<std::pair<std::string, std::string>> admin_endpoint(std::string url,
                                                           const process_env& env) {
  if (url.empty())
    url = env.get("AIRLOCK_URL").value_or("");
  std::string key = env.get("AIRLOCK_API_KEY").value_or("");
  if (url.empty() || key.empty()) {
    const std::string path = env.get("AIRLOCK_CLI_CONFIG").value_or(default_cli_config(env));
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    auto config = json::parse(text.str(), nullptr, false);
    if (config.is_object()) {
      if (url.empty())
        url = config.value("url", "");
      if (key.empty())
        key = config.value("api_key", "");
    }
    if (url.empty() || key.empty())
      return make_status(errc::invalid_argument,
                         std::string("no ") + (url.empty() ? "control plane URL" : "admin key")
                           + ": set " + (url.empty() ? "--url or AIRLOCK_URL" : "AIRLOCK_API_KEY")
                           + ", or run it where the control plane wrote " + path);
  }
  if (url.back() == '/')
    url.pop_back();
  return std::pair{std::move(url), std::move(key)};
}

/// The message of a control plane's {"error": {...}} answer, else its body.
std::string message_of(const http_answer& answer) {
  auto body = json::parse(answer.body, nullptr, false);
  if (body.is_object() && body.contains("error") && body["error"].is_object())
    return body["error"].value("message", answer.body);
  return answer.body;
}

} // namespace

std::string token_usage() {
  return "usage: airlockd token create [--ttl DURATION] [--name NAME] [--url URL]\n\n"
         "Prints a single-use join token for one worker (it pins this control plane's CA):\n"
         "  airlockd worker --join HOST:CLUSTER_PORT --control-url URL --token TOKEN\n\n"
         "  --ttl DURATION  how long the token may be used: 90s, 15m, 1h (default), 7d at most\n"
         "  --name NAME     a label shown with the token\n"
         "  --url URL       the control plane's API (default: AIRLOCK_URL, else the CLI config)\n"
         "The admin key comes from AIRLOCK_API_KEY, else the CLI config file\n"
         "(AIRLOCK_CLI_CONFIG, default ~/.config/airlock/config.json).\n";
}

int run_token(std::span<const std::string> args, const process_env& env, std::ostream& out,
              std::ostream& err) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    (args.empty() ? err : out) << token_usage();
    return args.empty() ? exit_usage : 0;
  }
  if (args[0] != "create") {
    err << "airlockd token: unknown subcommand '" << args[0] << "'\n\n" << token_usage();
    return exit_usage;
  }
  json request = json::object();
  std::string url;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& flag = args[i];
    if (flag == "--help" || flag == "-h") {
      out << token_usage();
      return 0;
    }
    if (i + 1 >= args.size() || (flag != "--ttl" && flag != "--name" && flag != "--url")) {
      err << "airlockd token create: "
          << (i + 1 >= args.size() ? "missing value for " : "unknown flag ") << flag << "\n\n"
          << token_usage();
      return exit_usage;
    }
    const std::string& value = args[++i];
    if (flag == "--ttl") {
      auto seconds = parse_duration(value);
      if (!seconds) {
        err << "airlockd token create: --ttl: expected a duration such as 90s, 15m, 1h or 7d, "
               "got '"
            << value << "'\n";
        return exit_usage;
      }
      request["ttl_s"] = *seconds;
    } else if (flag == "--name") {
      request["name"] = value;
    } else {
      url = value;
    }
  }
  auto endpoint = admin_endpoint(url, env);
  if (!endpoint) {
    err << "airlockd token create: " << endpoint.error().message << "\n";
    return exit_usage;
  }
  const auto& [base, key] = *endpoint;
  auto answer = http_call(base, "POST", "/v1/cluster/tokens", request.dump(), key, call_timeout);
  if (!answer) {
    err << "airlockd token create: " << answer.error().message << "\n";
    return exit_failure;
  }
  auto body = json::parse(answer->body, nullptr, false);
  if (answer->status != 201 || !body.is_object() || !body.contains("token")) {
    err << "airlockd token create: the control plane at " << base << " answered " << answer->status
        << ": " << message_of(*answer) << "\n";
    return exit_failure;
  }
  out << body["token"].get<std::string>() << std::endl;
  err << "expires at " << body.value("expires_at", "?") << "; pins the control-plane CA "
      << body.value("ca_fingerprint", "?") << "\n"
      << "join with: airlockd worker --join HOST:CLUSTER_PORT --control-url " << base
      << " --token TOKEN\n";
  return 0;
}

std::string worker_remove_usage() {
  return "usage: airlockd worker remove ID [--url URL]\n\n"
         "Forgets a lost worker and revokes its certificate: its next connection is refused.\n"
         "Stop the worker first (a ready worker is not removed).\n";
}

int run_worker_remove(std::span<const std::string> args, const process_env& env, std::ostream& out,
                      std::ostream& err) {
  std::string id;
  std::string url;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--help" || args[i] == "-h") {
      out << worker_remove_usage();
      return 0;
    }
    if (args[i] == "--url" && i + 1 < args.size()) {
      url = args[++i];
    } else if (id.empty() && !args[i].starts_with("-")) {
      id = args[i];
    } else {
      err << "airlockd worker remove: unexpected '" << args[i] << "'\n\n" << worker_remove_usage();
      return exit_usage;
    }
  }
  if (id.empty() || id.find_first_of("/?#% ") != std::string::npos) {
    err << "airlockd worker remove: give the worker's id (GET /v1/workers lists them)\n\n"
        << worker_remove_usage();
    return exit_usage;
  }
  auto endpoint = admin_endpoint(url, env);
  if (!endpoint) {
    err << "airlockd worker remove: " << endpoint.error().message << "\n";
    return exit_usage;
  }
  const auto& [base, key] = *endpoint;
  auto answer = http_call(base, "DELETE", "/v1/workers/" + id, {}, key, call_timeout);
  if (!answer) {
    err << "airlockd worker remove: " << answer.error().message << "\n";
    return exit_failure;
  }
  if (answer->status != 200) {
    err << "airlockd worker remove: the control plane at " << base << " answered " << answer->status
        << ": " << message_of(*answer) << "\n";
    return exit_failure;
  }
  out << "removed " << id << "; its certificate is revoked" << std::endl;
  return 0;
}

} // namespace airlock::airlockd
