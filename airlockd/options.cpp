#include "airlockd/options.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <optional>
#include <string>
#include <vector>

#include "airlockd/config_file.hpp"
#include "airlockd/option_spec.hpp"

extern char** environ; // NOLINT: POSIX declares it nowhere in C++ headers

namespace airlock::airlockd {

namespace {

using option_detail::control_specs;
using option_detail::invalid;
using option_detail::option_spec;
using option_detail::serve_specs;
using option_detail::worker_specs;

constexpr std::string_view config_flag = "config";

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

namespace {

/// --tls-cert and --tls-key come together.
template <class Options>
result<command_line<Options>> with_whole_tls(result<command_line<Options>> parsed) {
  if (!parsed || parsed->help || !parsed->options.http.tls)
    return parsed;
  const auto& tls = *parsed->options.http.tls;
  if (tls.certificate_file.empty() || tls.key_file.empty())
    return invalid("--tls-cert and --tls-key go together: give both (or AIRLOCK_TLS_CERT and "
                   "AIRLOCK_TLS_KEY), or neither for plain HTTP");
  return parsed;
}

} // namespace

result<command_line<serve_options>> parse_serve(std::span<const std::string> args,
                                                const process_env& env) {
  serve_options defaults;
  defaults.data_dir = default_data_dir(env);
  defaults.cli_config = default_cli_config(env);
  return with_whole_tls(parse_with(serve_specs(), args, env, std::move(defaults)));
}

result<command_line<control_options>> parse_control(std::span<const std::string> args,
                                                    const process_env& env) {
  control_options defaults;
  defaults.data_dir = default_data_dir(env);
  defaults.cli_config = default_cli_config(env);
  return with_whole_tls(parse_with(control_specs(), args, env, std::move(defaults)));
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
    if (!parsed->options.token.empty() && parsed->options.control_url.empty())
      return invalid("--token is redeemed at the control plane's API: give --control-url "
                     "http://HOST:PORT (or AIRLOCK_CONTROL_URL) too");
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
         "  token     token create: a join token for one worker (control plane)\n"
         "  worker remove ID   forget a lost worker and revoke its certificate\n"
         "  version   print the version and git commit\n\n"
         "Run 'airlockd COMMAND --help' for a command's flags.\n";
}

} // namespace airlock::airlockd
