// `airlockd token create [--ttl DURATION] [--name NAME] [--url URL]`: asks
// the control plane for a join token (POST /v1/cluster/tokens) with the admin
// key of the CLI's config file or AIRLOCK_API_KEY, and prints the token alone
// on stdout (for `TOKEN=$(airlockd token create)`), its details on stderr.

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
  std::string url = env.get("AIRLOCK_URL").value_or("");
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
        err << "airlockd token create: --ttl: expected a duration such as 90s, 15m, 1h or 7d, got '"
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
    if (url.empty() || key.empty()) {
      err << "airlockd token create: no " << (url.empty() ? "control plane URL" : "admin key")
          << ": set " << (url.empty() ? "--url or AIRLOCK_URL" : "AIRLOCK_API_KEY")
          << ", or run it where the control plane wrote " << path << "\n";
      return exit_usage;
    }
  }
  if (!url.empty() && url.back() == '/')
    url.pop_back();
  auto answer =
    http_call(url, "POST", "/v1/cluster/tokens", request.dump(), key, std::chrono::seconds(30));
  if (!answer) {
    err << "airlockd token create: " << answer.error().message << "\n";
    return exit_failure;
  }
  auto body = json::parse(answer->body, nullptr, false);
  if (answer->status != 201 || !body.is_object() || !body.contains("token")) {
    std::string message = answer->body;
    if (body.is_object() && body.contains("error") && body["error"].is_object())
      message = body["error"].value("message", message);
    err << "airlockd token create: the control plane at " << url << " answered " << answer->status
        << ": " << message << "\n";
    return exit_failure;
  }
  out << body["token"].get<std::string>() << std::endl;
  err << "expires at " << body.value("expires_at", "?") << "; pins the control-plane CA "
      << body.value("ca_fingerprint", "?") << "\n"
      << "join with: airlockd worker --join HOST:CLUSTER_PORT --control-url " << url
      << " --token TOKEN\n";
  return 0;
}

} // namespace airlock::airlockd
