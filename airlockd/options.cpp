#include "airlockd/options.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <limits>

#include "airlockd/config_file.hpp"
#include "schema/egress_rules.hpp"

extern char** environ; // NOLINT: POSIX declares it nowhere in C++ headers

namespace airlock::airlockd {

namespace {

/// One option of a subcommand. The flag is the source of truth: the variable
/// is AIRLOCK_ + FLAG in upper case, the config key is the flag in snake_case,
/// so no option can lack either.
template <class O>
struct option_spec {
  std::string_view flag;       ///< without the leading "--"
  std::string_view value_name; ///< for usage: DIR, HOST:PORT, N, ...
  std::string_view help;
  status (*apply)(O& options, std::string_view value);
  std::string (*show)(const O& options); ///< the value as text, for the default column
  std::string_view default_doc = {};     ///< overrides show() where the default depends on the host
};

constexpr std::string_view config_flag = "config";
constexpr std::string_view data_dir_doc = "/var/lib/airlock as root, else ~/.local/share/airlock";

std::string env_name(std::string_view flag) {
  std::string name = "AIRLOCK_";
  for (char c : flag)
    name += c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return name;
}

std::string config_key(std::string_view flag) {
  std::string key(flag);
  std::replace(key.begin(), key.end(), '-', '_');
  return key;
}

status invalid(std::string message) {
  return make_status(errc::invalid_argument, std::move(message));
}

template <class T>
status set_number(T& field, std::string_view text, T min, T max) {
  T value{};
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size() || value < min
      || value > max) {
    return invalid("expected a whole number in " + std::to_string(min) + ".." + std::to_string(max)
                   + ", got '" + std::string(text) + "'");
  }
  field = value;
  return status::ok();
}

status set_bool(bool& field, std::string_view text) {
  if (text == "true" || text == "1") {
    field = true;
  } else if (text == "false" || text == "0") {
    field = false;
  } else {
    return invalid("expected true or false, got '" + std::string(text) + "'");
  }
  return status::ok();
}

status set_path(std::string& field, std::string_view text) {
  if (text.empty())
    return invalid("expected a path, got an empty value");
  field = std::string(text);
  return status::ok();
}

status set_endpoint(gateway::endpoint& field, std::string_view text) {
  auto parsed = gateway::parse_endpoint(text);
  if (!parsed)
    return parsed.error();
  field = *parsed;
  return status::ok();
}

status set_log_level(actors::log_level& field, std::string_view text) {
  auto parsed = actors::parse_log_level(text);
  if (!parsed)
    return parsed.error();
  field = *parsed;
  return status::ok();
}

status set_name(std::string& field, std::string_view text) {
  bool ok = !text.empty() && text.size() <= 63 && std::all_of(text.begin(), text.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
  });
  if (!ok)
    return invalid("expected 1 to 63 letters, digits, '-', '_' or '.', got '" + std::string(text)
                   + "'");
  field = std::string(text);
  return status::ok();
}

template <class T>
std::string show_number(T value) {
  return std::to_string(value);
}

/// Options every subcommand has: log level and the HTTP listener's limits.
template <class O>
void add_common_specs(std::vector<option_spec<O>>& specs) {
  using limits = std::numeric_limits<uint32_t>;
  specs.push_back({"log-level", "LEVEL",
                   "least severe log level written: debug, info, warn or error",
                   [](O& o, std::string_view v) { return set_log_level(o.log_level, v); },
                   [](const O& o) { return std::string(actors::to_string(o.log_level)); }});
  specs.push_back(
    {"http-threads", "N", "threads serving HTTP",
     [](O& o, std::string_view v) { return set_number<size_t>(o.http.threads, v, 1, 256); },
     [](const O& o) { return show_number(o.http.threads); }});
  specs.push_back({"http-connections-max", "N",
                   "open HTTP connections; one more is answered 503 and closed",
                   [](O& o, std::string_view v) {
                     return set_number<size_t>(o.http.connections_max, v, 1, 1'000'000);
                   },
                   [](const O& o) { return show_number(o.http.connections_max); }});
  specs.push_back({"http-request-timeout-ms", "MS",
                   "time to receive a whole request once it has started, and to send a response",
                   [](O& o, std::string_view v) {
                     return set_number<uint32_t>(o.http.request_timeout_ms, v, 1, limits::max());
                   },
                   [](const O& o) { return show_number(o.http.request_timeout_ms); }});
  specs.push_back({"http-idle-timeout-ms", "MS",
                   "time an open connection may wait for its next request",
                   [](O& o, std::string_view v) {
                     return set_number<uint32_t>(o.http.idle_timeout_ms, v, 1, limits::max());
                   },
                   [](const O& o) { return show_number(o.http.idle_timeout_ms); }});
  specs.push_back({"http-header-bytes-max", "BYTES",
                   "largest request line plus headers; larger requests get 431",
                   [](O& o, std::string_view v) {
                     return set_number<uint32_t>(o.http.header_bytes_max, v, 256, 1u << 20);
                   },
                   [](const O& o) { return show_number(o.http.header_bytes_max); }});
  specs.push_back({"http-body-bytes-max", "BYTES", "largest request body; larger bodies get 413",
                   [](O& o, std::string_view v) {
                     return set_number<uint64_t>(o.http.body_bytes_max, v, 0, uint64_t{1} << 32);
                   },
                   [](const O& o) { return show_number(o.http.body_bytes_max); }});
  specs.push_back({"http-keep-alive", "BOOL", "keep HTTP connections open between requests",
                   [](O& o, std::string_view v) { return set_bool(o.http.keep_alive, v); },
                   [](const O& o) { return std::string(o.http.keep_alive ? "true" : "false"); }});
  specs.push_back({"shutdown-timeout-ms", "MS",
                   "on SIGTERM, how long requests in flight may take before they are cut off",
                   [](O& o, std::string_view v) {
                     return set_number<uint32_t>(o.http.shutdown_timeout_ms, v, 0, 600'000);
                   },
                   [](const O& o) { return show_number(o.http.shutdown_timeout_ms); }});
}

template <class O>
option_spec<O> data_dir_spec(std::string_view help) {
  return {"data-dir",
          "DIR",
          help,
          [](O& o, std::string_view v) { return set_path(o.data_dir, v); },
          [](const O& o) { return o.data_dir; },
          data_dir_doc};
}

template <class O>
option_spec<O> cli_config_spec() {
  return {"cli-config", "FILE",
          "where the first start writes the CLI's url and admin key (mode 0600)",
          [](O& o, std::string_view v) { return set_path(o.cli_config, v); },
          [](const O& o) { return o.cli_config; },
          "$XDG_CONFIG_HOME/airlock/config.json, else ~/.config/airlock/config.json"};
}

} // namespace

std::vector<std::string> split_list(std::string_view text, char separator) {
  std::vector<std::string> out;
  while (!text.empty()) {
    auto at = text.find(separator);
    if (auto item = text.substr(0, at); !item.empty())
      out.emplace_back(item);
    text = at == std::string_view::npos ? std::string_view{} : text.substr(at + 1);
  }
  return out;
}

result<std::map<std::string, schema::egress_policy>> parse_template_egress(std::string_view text) {
  std::map<std::string, schema::egress_policy> out;
  auto bad = [&text](const std::string& why) {
    return make_status(errc::invalid_argument,
                       "template egress '" + std::string(text) + "': " + why
                         + " (expected NAME=PROFILE[:HOST,...];... e.g. base=open)");
  };
  for (std::string_view item : split_list(text, ';')) {
    auto equals = item.find('=');
    if (equals == std::string_view::npos || equals == 0)
      return bad("'" + std::string(item) + "' has no NAME=");
    auto name = std::string(item.substr(0, equals));
    auto rest = item.substr(equals + 1);
    auto colon = rest.find(':');
    auto profile = schema::parse_egress_profile(rest.substr(0, colon));
    if (!profile)
      return bad("profile of " + name + " must be none, allowlist or open");
    schema::egress_policy policy;
    policy.profile = *profile;
    if (colon != std::string_view::npos)
      policy.allow = split_list(rest.substr(colon + 1), ',');
    if (auto valid = schema::validate_egress_policy(policy); !valid)
      return bad(name + ": " + valid.message);
    out[name] = std::move(policy);
  }
  return out;
}

namespace {

/// The control plane's settings (serve, control).
template <class O>
void add_control_settings_specs(std::vector<option_spec<O>>& specs) {
  specs.push_back({"audit-retention-hours", "HOURS", "audit records older than this are deleted",
                   [](O& o, std::string_view v) {
                     return set_number<uint32_t>(o.control.audit_retention_hours, v, 1, 876'000);
                   },
                   [](const O& o) { return show_number(o.control.audit_retention_hours); }});
  specs.push_back({"template-egress", "RULES",
                   "egress per template when a create names none: base=open;t=allowlist:a.com,*.b.org",
                   [](O& o, std::string_view v) {
                     auto parsed = parse_template_egress(v);
                     if (!parsed)
                       return parsed.error();
                     o.control.template_egress = std::string(v);
                     return status::ok();
                   },
                   [](const O& o) { return o.control.template_egress; }, "none"});
}

/// The egress gateway's options (serve, worker).
template <class O>
void add_egress_specs(std::vector<option_spec<O>>& specs) {
  specs.push_back({"egress", "BOOL", "run the egress gateway (false: nothing leaves a sandbox)",
                   [](O& o, std::string_view v) { return set_bool(o.sandboxes.egress, v); },
                   [](const O& o) { return std::string(o.sandboxes.egress ? "true" : "false"); }});
  specs.push_back({"egress-proxy-port", "PORT", "the gateway's proxy port; 0 takes a free port",
                   [](O& o, std::string_view v) {
                     return set_number<uint16_t>(o.sandboxes.egress_proxy_port, v, 0, 65535);
                   },
                   [](const O& o) { return show_number(o.sandboxes.egress_proxy_port); }});
  specs.push_back({"egress-dns-port", "PORT", "the gateway's DNS port; 0 takes a free port",
                   [](O& o, std::string_view v) {
                     return set_number<uint16_t>(o.sandboxes.egress_dns_port, v, 0, 65535);
                   },
                   [](const O& o) { return show_number(o.sandboxes.egress_dns_port); }});
  specs.push_back({"egress-hosts-file", "FILE", "static name map the gateway resolves with",
                   [](O& o, std::string_view v) {
                     return set_path(o.sandboxes.egress_hosts_file, v);
                   },
                   [](const O& o) { return o.sandboxes.egress_hosts_file; }, "none"});
  specs.push_back({"egress-upstream-ca", "FILE", "extra CA certificates trusted for upstream TLS",
                   [](O& o, std::string_view v) {
                     return set_path(o.sandboxes.egress_upstream_ca, v);
                   },
                   [](const O& o) { return o.sandboxes.egress_upstream_ca; }, "none"});
  specs.push_back({"egress-allow-private", "CIDRS",
                   "private ranges (comma-separated) sandboxes may reach by name",
                   [](O& o, std::string_view v) {
                     o.sandboxes.egress_allow_private = std::string(v);
                     return status::ok();
                   },
                   [](const O& o) { return o.sandboxes.egress_allow_private; }, "none"});
}

/// Options of the hosts that run sandboxes (serve, worker).
template <class O>
void add_sandbox_host_specs(std::vector<option_spec<O>>& specs) {
  specs.push_back({"instance", "NAME",
                   "names this host's nftables table, cgroup parent and veth prefix",
                   [](O& o, std::string_view v) { return set_name(o.sandboxes.instance, v); },
                   [](const O& o) { return o.sandboxes.instance; }});
  specs.push_back({"veth-prefix", "XY", "first two characters of the host-side veth names",
                   [](O& o, std::string_view v) {
                     bool ok = v.size() == 2 && std::all_of(v.begin(), v.end(), [](char c) {
                       return std::islower(static_cast<unsigned char>(c)) != 0;
                     });
                     if (!ok)
                       return invalid("expected two lower-case letters, got '" + std::string(v) +
                                      "'");
                     o.sandboxes.veth_prefix = std::string(v);
                     return status::ok();
                   },
                   [](const O& o) { return o.sandboxes.veth_prefix; }});
  specs.push_back({"address-pool", "CIDR", "IPv4 block the sandboxes' networks come from",
                   [](O& o, std::string_view v) { return set_path(o.sandboxes.address_pool, v); },
                   [](const O& o) { return o.sandboxes.address_pool; }});
  specs.push_back({"uid-base", "N", "first host uid/gid mapped into sandboxes (65536 each)",
                   [](O& o, std::string_view v) {
                     return set_number<uint32_t>(o.sandboxes.uid_base, v, 65'536, 4'000'000'000);
                   },
                   [](const O& o) { return show_number(o.sandboxes.uid_base); }});
  specs.push_back({"guest-binary", "FILE", "the airlock-guest binary put into templates",
                   [](O& o, std::string_view v) { return set_path(o.sandboxes.guest_binary, v); },
                   [](const O& o) { return o.sandboxes.guest_binary; },
                   "airlock-guest next to airlockd, else ../guest/airlock-guest"});
  specs.push_back({"image-size-mb", "MB",
                   "btrfs image created when the data directory is not on btrfs",
                   [](O& o, std::string_view v) {
                     return set_number<uint32_t>(o.sandboxes.image_size_mb, v, 512, 16'777'216);
                   },
                   [](const O& o) { return show_number(o.sandboxes.image_size_mb); }});
  specs.push_back({"sandboxes-max", "N", "sandboxes this host runs at once",
                   [](O& o, std::string_view v) {
                     return set_number<uint32_t>(o.sandboxes.sandboxes_max, v, 1, 100'000);
                   },
                   [](const O& o) { return show_number(o.sandboxes.sandboxes_max); }});
  add_egress_specs(specs);
}

std::vector<option_spec<serve_options>> serve_specs() {
  using opts = serve_options;
  std::vector<option_spec<opts>> specs;
  specs.push_back(data_dir_spec<opts>("root of the durable state; created with mode 0700"));
  specs.push_back({"listen", "HOST:PORT", "address of the HTTP listener; port 0 takes a free port",
                   [](opts& o, std::string_view v) { return set_endpoint(o.listen, v); },
                   [](const opts& o) { return gateway::to_string(o.listen); }});
  specs.push_back(cli_config_spec<opts>());
  add_common_specs(specs);
  add_sandbox_host_specs(specs);
  add_control_settings_specs(specs);
  return specs;
}

std::vector<option_spec<control_options>> control_specs() {
  using opts = control_options;
  std::vector<option_spec<opts>> specs;
  specs.push_back(data_dir_spec<opts>("root of the control plane's durable state; created 0700"));
  specs.push_back({"listen", "HOST:PORT", "address of the HTTP listener; port 0 takes a free port",
                   [](opts& o, std::string_view v) { return set_endpoint(o.listen, v); },
                   [](const opts& o) { return gateway::to_string(o.listen); }});
  specs.push_back(
    {"cluster-listen", "HOST:PORT",
     "address workers join (CAF cluster transport); port 0 takes a free port",
     [](opts& o, std::string_view v) { return set_endpoint(o.cluster_listen, v); },
     [](const opts& o) { return gateway::to_string(o.cluster_listen); }});
  specs.push_back(cli_config_spec<opts>());
  add_common_specs(specs);
  add_control_settings_specs(specs);
  return specs;
}

std::vector<option_spec<worker_options>> worker_specs() {
  using opts = worker_options;
  std::vector<option_spec<opts>> specs;
  specs.push_back({"join", "HOST:PORT", "the control plane's cluster address (required)",
                   [](opts& o, std::string_view v) { return set_endpoint(o.join, v); },
                   [](const opts&) { return std::string(); }, "none: required"});
  specs.push_back(data_dir_spec<opts>("root of the worker's local state; created 0700"));
  specs.push_back({"data-listen", "HOST:PORT", "address of the worker's data-plane listener",
                   [](opts& o, std::string_view v) { return set_endpoint(o.data_listen, v); },
                   [](const opts& o) { return gateway::to_string(o.data_listen); }});
  specs.push_back({"name", "NAME", "the worker's name in the cluster",
                   [](opts& o, std::string_view v) { return set_name(o.name, v); },
                   [](const opts& o) { return o.name; }, "the host name"});
  add_common_specs(specs);
  add_sandbox_host_specs(specs);
  return specs;
}

template <class O>
const option_spec<O>* find_spec(const std::vector<option_spec<O>>& specs, std::string_view flag) {
  for (const auto& spec : specs) {
    if (spec.flag == flag)
      return &spec;
  }
  return nullptr;
}

/// A flag and its value as given on the command line, in order.
template <class O>
struct given_flag {
  const option_spec<O>* spec;
  std::string value;
};

template <class O>
struct split_args {
  std::vector<given_flag<O>> flags;
  std::optional<std::string> config_file;
  bool help = false;
};

/// Accepts `--flag VALUE` and `--flag=VALUE`; rejects anything else.
template <class O>
result<split_args<O>> split(const std::vector<option_spec<O>>& specs,
                            std::span<const std::string> args) {
  split_args<O> out;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string_view arg = args[i];
    if (arg == "-h" || arg == "--help") {
      out.help = true;
      continue;
    }
    if (!arg.starts_with("--") || arg.size() == 2)
      return invalid("unexpected argument '" + std::string(arg) + "'");
    std::string_view name = arg.substr(2);
    std::optional<std::string> value;
    if (auto eq = name.find('='); eq != std::string_view::npos) {
      value = std::string(name.substr(eq + 1));
      name = name.substr(0, eq);
    }
    const option_spec<O>* spec = find_spec(specs, name);
    if (spec == nullptr && name != config_flag)
      return invalid("unknown flag --" + std::string(name));
    if (!value) {
      if (i + 1 >= args.size())
        return invalid("--" + std::string(name) + " needs a value");
      value = args[++i];
    }
    if (spec == nullptr)
      out.config_file = std::move(*value);
    else
      out.flags.push_back({spec, std::move(*value)});
  }
  return out;
}

template <class O>
status apply_config_file(const std::vector<option_spec<O>>& specs, const std::string& path,
                         O& options) {
  auto entries = load_config_file(path);
  if (!entries)
    return entries.error();
  for (const auto& [key, value] : *entries) {
    const option_spec<O>* spec = nullptr;
    for (const auto& candidate : specs) {
      if (config_key(candidate.flag) == key)
        spec = &candidate;
    }
    std::string where = "config file " + path + ": ";
    if (spec == nullptr)
      return invalid(where.append("unknown key '").append(key).append("'"));
    if (auto applied = spec->apply(options, value); !applied)
      return invalid(where.append(key).append(": ").append(applied.message));
  }
  return status::ok();
}

template <class O>
status apply_environment(const std::vector<option_spec<O>>& specs, const process_env& env,
                         O& options) {
  for (const auto& spec : specs) {
    std::string name = env_name(spec.flag);
    if (auto value = env.get(name)) {
      if (auto applied = spec.apply(options, *value); !applied)
        return invalid(name + ": " + applied.message);
    }
  }
  return status::ok();
}

/// The precedence rule of this file: defaults < config file < environment < flags.
template <class O>
result<command_line<O>> parse_with(const std::vector<option_spec<O>>& specs,
                                   std::span<const std::string> args, const process_env& env,
                                   O defaults) {
  auto given = split(specs, args);
  if (!given)
    return given.error();
  command_line<O> out{std::move(defaults), given->help, {}};
  if (out.help)
    return out;
  if (auto path = given->config_file ? given->config_file : env.get(env_name(config_flag))) {
    if (auto applied = apply_config_file(specs, *path, out.options); !applied)
      return applied;
    out.config_file = *path;
  }
  if (auto applied = apply_environment(specs, env, out.options); !applied)
    return applied;
  for (const auto& flag : given->flags) {
    if (auto applied = flag.spec->apply(out.options, flag.value); !applied)
      return invalid("--" + std::string(flag.spec->flag) + ": " + applied.message);
  }
  return out;
}

template <class O>
std::vector<option_info> describe(const std::vector<option_spec<O>>& specs, const O& defaults) {
  std::vector<option_info> out;
  out.push_back({"--config", env_name(config_flag), "", "FILE", "none",
                 "JSON file of option values, keys as in this list"});
  for (const auto& spec : specs) {
    std::string shown =
      spec.default_doc.empty() ? spec.show(defaults) : std::string(spec.default_doc);
    out.push_back({"--" + std::string(spec.flag), env_name(spec.flag), config_key(spec.flag),
                   std::string(spec.value_name), std::move(shown), std::string(spec.help)});
  }
  return out;
}

std::string_view summary_of(std::string_view command) {
  if (command == "serve")
    return "Runs the control plane and a local worker in one process.";
  if (command == "control")
    return "Runs the control plane alone; workers join it on --cluster-listen.";
  return "Runs a worker that joins a control plane (--join) and serves its sandboxes' data "
         "plane.";
}

} // namespace

std::optional<std::string> process_env::get(std::string_view name) const {
  auto found = variables.find(name);
  if (found == variables.end() || found->second.empty())
    return std::nullopt;
  return found->second;
}

process_env current_process_env() {
  process_env env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    std::string_view text(*entry);
    auto eq = text.find('=');
    if (eq != std::string_view::npos)
      env.variables.emplace(std::string(text.substr(0, eq)), std::string(text.substr(eq + 1)));
  }
  env.is_root = ::geteuid() == 0;
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) == 0)
    env.hostname = host;
  return env;
}

std::string default_data_dir(const process_env& env) {
  if (env.is_root)
    return "/var/lib/airlock";
  return env.get("HOME").value_or(".") + "/.local/share/airlock";
}

std::string default_cli_config(const process_env& env) {
  if (auto xdg = env.get("XDG_CONFIG_HOME"))
    return *xdg + "/airlock/config.json";
  return env.get("HOME").value_or(".") + "/.config/airlock/config.json";
}

result<command_line<serve_options>> parse_serve(std::span<const std::string> args,
                                                const process_env& env) {
  serve_options defaults;
  defaults.data_dir = default_data_dir(env);
  defaults.cli_config = default_cli_config(env);
  return parse_with(serve_specs(), args, env, std::move(defaults));
}

result<command_line<control_options>> parse_control(std::span<const std::string> args,
                                                    const process_env& env) {
  control_options defaults;
  defaults.data_dir = default_data_dir(env);
  defaults.cli_config = default_cli_config(env);
  return parse_with(control_specs(), args, env, std::move(defaults));
}

result<command_line<worker_options>> parse_worker(std::span<const std::string> args,
                                                  const process_env& env) {
  worker_options defaults;
  defaults.data_dir = default_data_dir(env);
  defaults.name = env.hostname.empty() ? "worker" : env.hostname;
  auto parsed = parse_with(worker_specs(), args, env, std::move(defaults));
  if (parsed && !parsed->help) {
    if (parsed->options.join.host.empty())
      return invalid("worker needs the control plane's address: --join HOST:PORT "
                     "(or AIRLOCK_JOIN)");
    if (parsed->options.join.port == 0)
      return invalid("--join: the control plane's port cannot be 0");
  }
  return parsed;
}

std::vector<option_info> describe_options(std::string_view command) {
  if (command == "serve")
    return describe(serve_specs(), serve_options{});
  if (command == "control")
    return describe(control_specs(), control_options{});
  if (command == "worker")
    return describe(worker_specs(), worker_options{});
  return {};
}

std::string command_usage(std::string_view command) {
  std::string text = "usage: airlockd " + std::string(command) + " [flags]\n\n"
                     + std::string(summary_of(command)) + "\n\n"
                     + "Flags (each also set by its environment variable, or by its key in the\n"
                       "--config file; flags beat variables, variables beat the file):\n";
  for (const auto& option : describe_options(command)) {
    text += "  " + option.flag + " " + option.value_name + "\n      " + option.help + "\n      ["
            + option.env + "; default: " + option.default_text + "]\n";
  }
  text += "  -h, --help\n      print this text\n";
  return text;
}

std::string general_usage() {
  return "usage: airlockd COMMAND [flags]\n\n"
         "Commands:\n"
         "  serve     control plane and a local worker in one process\n"
         "  control   the control plane alone, for a cluster\n"
         "  worker    a worker that joins a control plane (--join HOST:PORT)\n"
         "  version   print the version and git commit\n\n"
         "Run 'airlockd COMMAND --help' for a command's flags.\n";
}

} // namespace airlock::airlockd
