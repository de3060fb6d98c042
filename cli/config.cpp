#include "cli/config.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace airlock::cli {

namespace {

/// The file airlockd writes is under 1 KiB; a larger one is a wrong path.
constexpr std::uintmax_t config_bytes_max = 1 << 20;

status bad_file(const std::string& path, const std::string& why) {
  return make_status(errc::invalid_argument, "config file " + path + ": " + why);
}

/// The text of a small file; `what` names it in errors ("config file X: ...").
result<std::string> read_small_file(const std::string& path, const std::string& what) {
  auto bad = [&](const std::string& why) {
    return make_status(errc::invalid_argument, what + " " + path + ": " + why);
  };
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    return bad("does not exist");
  auto size = std::filesystem::file_size(path, ec);
  if (ec)
    return bad("cannot be read (is it a directory?)");
  if (size > config_bytes_max)
    return bad("is larger than 1 MiB");
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return bad("cannot be read");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

/// The file's JSON object; an empty object when `optional` and it does not exist.
result<nlohmann::json> load_file(const std::string& path, bool optional) {
  std::error_code ec;
  if (optional && !std::filesystem::exists(path, ec))
    return nlohmann::json::object();
  auto text = read_small_file(path, "config file");
  if (!text)
    return text.error();
  auto doc = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object())
    return bad_file(path, "must hold a JSON object such as {\"url\": ..., \"api_key\": ...}");
  for (const char* key : {"url", "api_key", "ca_file"}) {
    if (doc.contains(key) && !doc[key].is_string())
      return bad_file(path, std::string(key) + " must be a string");
  }
  return doc;
}

std::string without_trailing_slash(std::string url) {
  while (!url.empty() && url.back() == '/')
    url.pop_back();
  return url;
}

} // namespace

std::optional<std::string> env_get(const env_map& env, std::string_view name) {
  auto it = env.find(name);
  if (it == env.end() || it->second.empty())
    return std::nullopt;
  return it->second;
}

std::string default_config_path(const env_map& env) {
  if (auto xdg = env_get(env, "XDG_CONFIG_HOME"))
    return *xdg + "/airlock/config.json";
  return env_get(env, "HOME").value_or(".") + "/.config/airlock/config.json";
}

result<connection_config> resolve_connection(const connection_flags& flags, const env_map& env) {
  connection_config config;
  bool named = flags.config_path.has_value();
  config.config_path = flags.config_path.value_or(
    env_get(env, "AIRLOCK_CLI_CONFIG").value_or(default_config_path(env)));
  auto file = load_file(config.config_path, !named);
  if (!file)
    return file.error();
  if (file->contains("url"))
    config.url = (*file)["url"].get<std::string>();
  if (file->contains("api_key"))
    config.api_key = (*file)["api_key"].get<std::string>();
  if (file->contains("ca_file"))
    config.ca_file = (*file)["ca_file"].get<std::string>();
  if (auto ca_file = env_get(env, "AIRLOCK_CA_FILE"))
    config.ca_file = *ca_file;
  if (flags.ca_file)
    config.ca_file = *flags.ca_file;
  if (auto url = env_get(env, "AIRLOCK_URL"))
    config.url = *url;
  if (auto key = env_get(env, "AIRLOCK_API_KEY"))
    config.api_key = *key;
  if (flags.url)
    config.url = *flags.url;
  if (flags.api_key)
    config.api_key = *flags.api_key;
  config.url = without_trailing_slash(std::move(config.url));
  return config;
}

result<std::string> read_ca_file(const std::string& path) {
  auto text = read_small_file(path, "CA file");
  if (!text)
    return text.error();
  if (text->find("-----BEGIN CERTIFICATE-----") == std::string::npos)
    return make_status(errc::invalid_argument,
                       "CA file " + path
                         + ": holds no PEM certificate (-----BEGIN CERTIFICATE-----)");
  return text;
}

} // namespace airlock::cli
