#pragma once
// Where the CLI finds airlockd and its API key. Each setting is taken from the
// first of these that has it:
//
//   --url / --api-key  >  AIRLOCK_URL / AIRLOCK_API_KEY  >  config file  >  built-in default
//
// The config file is the one `airlockd serve` writes on its first start
// ({"url": ..., "api_key": ...}, mode 0600): --config FILE, else
// $AIRLOCK_CLI_CONFIG, else $XDG_CONFIG_HOME/airlock/config.json, else
// $HOME/.config/airlock/config.json. airlockd has its own copy of that path
// rule (airlockd/options.cpp, default_cli_config); the CLI does not link
// airlockd, so the rule is repeated here and both must change together.

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "schema/errc.hpp"

namespace airlock::cli {

/// The process environment, passed in so that tests choose it.
using env_map = std::map<std::string, std::string, std::less<>>;

/// The variable's value; nullopt when unset or empty.
std::optional<std::string> env_get(const env_map& env, std::string_view name);

/// $XDG_CONFIG_HOME/airlock/config.json, else $HOME/.config/airlock/config.json.
std::string default_config_path(const env_map& env);

/// What the command line said about the connection (absent: not given).
struct connection_flags {
  std::optional<std::string> url;
  std::optional<std::string> api_key;
  std::optional<std::string> config_path;
  std::optional<std::string> ca_file;
};

struct connection_config {
  std::string url = "http://127.0.0.1:7070"; ///< without a trailing '/'
  std::string api_key;                       ///< empty: none found anywhere
  std::string config_path;                   ///< the file consulted (it may not exist)
  /// PEM certificates an https control plane's certificate must chain to;
  /// empty: the system's trust store.
  std::string ca_file;
};

/// Resolves the settings by the precedence above. A missing default config
/// file is fine (the defaults apply); invalid_argument naming the file when a
/// file that exists cannot be read or is not a JSON object with string values,
/// or when --config names a file that does not exist.
result<connection_config> resolve_connection(const connection_flags& flags, const env_map& env);

/// The PEM certificates of a CA file (at most 1 MiB); invalid_argument naming
/// the file when it cannot be read or holds no certificate.
result<std::string> read_ca_file(const std::string& path);

} // namespace airlock::cli
