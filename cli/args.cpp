#include "cli/args.hpp"

#include <algorithm>
#include <charconv>
#include <sstream>

namespace airlock::cli {

namespace {

const flag_spec wait_flag{"wait", flag_kind::toggle, "", "wait until the operation has ended"};

/// Most sandboxes one fork makes (API.md: count is 1..64).
constexpr uint64_t fork_count_max = 64;

std::vector<command_spec> make_specs() {
  return {
    {"create",
     "[flags]",
     "create a sandbox and print its id",
     {{"template", flag_kind::text, "NAME", "template to start from (default: base)"},
      {"cpu", flag_kind::count, "MILLIS", "CPU in thousandths of a core"},
      {"memory", flag_kind::count, "MB", "memory in MiB"},
      {"disk", flag_kind::count, "MB", "disk in MiB"},
      {"idle-timeout", flag_kind::count, "S", "seconds idle before the sandbox is suspended"},
      {"env", flag_kind::key_value, "K=V", "environment variable (repeatable)"},
      {"metadata", flag_kind::key_value, "K=V", "metadata entry (repeatable)"},
      wait_flag}},
    {"ls",
     "[flags]",
     "list sandboxes",
     {{"state", flag_kind::text, "STATE", "only sandboxes in this state"},
      {"metadata", flag_kind::key_value, "K=V", "only sandboxes with this metadata (repeatable)"},
      {"limit", flag_kind::count, "N", "at most N sandboxes (default: all)"}}},
    {"get", "ID", "show one sandbox", {}, 1, 1},
    {"exec",
     "ID [flags] -- ARGV...",
     "run a process in a sandbox, stream its output, exit with its code",
     {{"tty", flag_kind::toggle, "", "allocate a terminal (raw mode on the local one)", 't'},
      {"env", flag_kind::key_value, "K=V", "environment variable (repeatable)"},
      {"cwd", flag_kind::text, "DIR", "working directory"},
      {"user", flag_kind::text, "USER", "user to run as"},
      {"stdin", flag_kind::toggle, "", "copy this command's stdin to the process", 'i'}},
     1,
     1,
     true},
    {"cp",
     "SRC DST",
     "copy a file into (DST = ID:/path) or out of (SRC = ID:/path) a sandbox; - is stdin/stdout",
     {},
     2,
     2},
    {"pause", "ID [--wait]", "pause a sandbox; prints the operation id", {wait_flag}, 1, 1},
    {"resume",
     "ID [--wait]",
     "resume a paused sandbox; prints the operation id",
     {wait_flag},
     1,
     1},
    {"rm", "ID [--wait]", "destroy a sandbox; prints the operation id", {wait_flag}, 1, 1},
    {"suspend",
     "ID [--wait]",
     "suspend a sandbox to a snapshot, freeing its worker; prints the operation id",
     {wait_flag},
     1,
     1},
    {"wake", "ID [--wait]", "wake a suspended sandbox; prints the operation id", {wait_flag}, 1, 1},
    {"restore",
     "ID [--checkpoint CKPT] [--wait]",
     "restore a suspended sandbox or roll it back to a checkpoint; prints the operation id",
     {{"checkpoint", flag_kind::text, "CKPT", "roll back to this checkpoint of the sandbox"},
      wait_flag},
     1,
     1},
    {"checkpoint",
     "ID [--label TEXT] [--wait]",
     "checkpoint a sandbox's files; prints the operation id (--wait: then the checkpoint id)",
     {{"label", flag_kind::text, "TEXT", "a label for the checkpoint (at most 256 bytes)"},
      wait_flag},
     1,
     1},
    {"checkpoints", "ID", "list a sandbox's checkpoints", {}, 1, 1},
    {"rm-checkpoint",
     "CKPT [--wait]",
     "delete a checkpoint; prints the operation id",
     {wait_flag},
     1,
     1},
    {"fork",
     "ID -n N [--wait]",
     "copy a sandbox N times; prints the operation id (--wait: then the new sandbox ids)",
     {{.name = "count",
       .kind = flag_kind::count,
       .value = "N",
       .help = "how many sandboxes to make, 1 to 64 (required)",
       .short_name = 'n',
       .count_min = 1,
       .count_max = fork_count_max,
       .required = true},
      wait_flag},
     1,
     1},
    {"template",
     "ls | get NAME | build NAME --from T|--debootstrap SUITE [--run CMD]... | push NAME FILE "
     "--format F | log NAME VERSION | rm NAME [--version N] | pool NAME [SIZE]",
     "manage templates: list them, show one, build a version from a recipe or upload an image "
     "as one, read a build's log, delete, show or size the warm pool",
     {{"format", flag_kind::text, "F", "push: oci (OCI layout tar), docker (docker save) or tar"},
      {"start-cmd", flag_kind::text, "CMD",
       "push, build: run this at each start (push: instead of the image's)"},
      {"from", flag_kind::text, "T[:N]", "build: start from this template's version"},
      {"debootstrap", flag_kind::text, "SUITE", "build: start from a debootstrap of this suite"},
      {"package", flag_kind::text, "P", "build: a package for --debootstrap (repeatable)"},
      {"run", flag_kind::text, "CMD", "build: a shell line run as root (repeatable, in order)"},
      {"env", flag_kind::key_value, "K=V", "build: an environment default (repeatable)"},
      {"workdir", flag_kind::text, "DIR", "build: the working directory default"},
      {"user", flag_kind::text, "USER", "build: the user default"},
      {"ready-cmd", flag_kind::text, "CMD", "build: must succeed before the version is ready"},
      {"egress", flag_kind::text, "PROFILE",
       "build: the run steps' egress (none, allowlist, open)"},
      {"allow", flag_kind::text, "HOST", "build: a host the allowlist egress reaches (repeatable)"},
      {"version", flag_kind::count, "N", "rm: only this version"},
      {"cpu", flag_kind::count, "MILLIS", "pool: the members' CPU limit"},
      {"memory", flag_kind::count, "MB", "pool: the members' memory limit"},
      {"disk", flag_kind::count, "MB", "pool: the members' disk limit"},
      wait_flag},
     1,
     3},
    {"ops",
     "[flags]",
     "list operations",
     {{"target", flag_kind::text, "ID", "only operations on this sandbox"},
      {"state", flag_kind::text, "STATE", "only operations in this state"},
      {"limit", flag_kind::count, "N", "at most N operations (default: all)"}}},
    {"wait",
     "OP_ID [--timeout S]",
     "wait for an operation; exit 0 when it succeeded, 1 otherwise",
     {{"timeout", flag_kind::count, "S", "give up after S seconds (default: 600)"}},
     1,
     1},
  };
}

const std::vector<flag_spec>& global_flags() {
  static const std::vector<flag_spec> flags{
    {"url", flag_kind::text, "URL", "airlockd's address (else $AIRLOCK_URL, else the config file)"},
    {"api-key", flag_kind::text, "KEY", "API key (else $AIRLOCK_API_KEY, else the config file)"},
    {"config", flag_kind::text, "FILE",
     "config file (else $AIRLOCK_CLI_CONFIG, else ~/.config/airlock/config.json)"},
    {"ca-file", flag_kind::text, "FILE",
     "CA certificates (PEM) an https airlockd's certificate must chain to (else $AIRLOCK_CA_FILE, "
     "else the config file's ca_file, else the system's)"},
    {"json", flag_kind::toggle, "", "print the server's JSON instead of a table"},
    {"help", flag_kind::toggle, "", "show help", 'h'},
  };
  return flags;
}

status usage_error(const std::string& why) { return make_status(errc::invalid_argument, why); }

const flag_spec* find_flag(const std::vector<flag_spec>& flags, std::string_view name,
                           char short_name) {
  for (const auto& flag : flags) {
    if ((short_name == 0 && flag.name == name)
        || (short_name != 0 && flag.short_name == short_name))
      return &flag;
  }
  return nullptr;
}

/// "--name", or "-n/--name" for a flag with a short form.
std::string shown_name(const flag_spec& flag) {
  std::string shown = "--" + std::string(flag.name);
  return flag.short_name == 0 ? shown : std::string("-") + flag.short_name + "/" + shown;
}

status check_value(const flag_spec& flag, const std::string& value) {
  if (flag.kind == flag_kind::count) {
    uint64_t number = 0;
    auto [end, problem] = std::from_chars(value.data(), value.data() + value.size(), number);
    if (value.empty() || problem != std::errc{} || end != value.data() + value.size())
      return usage_error("--" + std::string(flag.name) + " takes a non-negative integer, not '"
                         + value + "'");
    if (number < flag.count_min || number > flag.count_max)
      return usage_error(shown_name(flag) + " takes an integer from "
                         + std::to_string(flag.count_min) + " to " + std::to_string(flag.count_max)
                         + ", not '" + value + "'");
  }
  if (flag.kind == flag_kind::key_value
      && (value.find('=') == std::string::npos || value[0] == '='))
    return usage_error("--" + std::string(flag.name) + " takes KEY=VALUE, not '" + value + "'");
  return status::ok();
}

void store(invocation& inv, const flag_spec& flag, std::string value) {
  if (flag.name == "url")
    inv.connection.url = value;
  else if (flag.name == "api-key")
    inv.connection.api_key = value;
  else if (flag.name == "config")
    inv.connection.config_path = value;
  else if (flag.name == "ca-file")
    inv.connection.ca_file = value;
  else if (flag.name == "json")
    inv.json = true;
  else if (flag.name == "help")
    inv.help = true;
  else
    inv.flags[std::string(flag.name)].push_back(std::move(value));
}

/// One flag argument at args[i] (which starts with '-'); advances i past its value.
status take_flag(invocation& inv, const command_spec* spec, std::span<const std::string> args,
                 size_t& i) {
  const std::string& arg = args[i];
  bool long_form = arg.starts_with("--");
  std::string name = long_form ? arg.substr(2, arg.find('=') - 2) : arg.substr(1);
  if (!long_form && name.size() != 1)
    return usage_error("unknown flag " + arg + " (short flags stand alone: -t -i)");
  char short_name = long_form ? 0 : name[0];
  const flag_spec* flag = find_flag(global_flags(), name, short_name);
  if (!flag && spec)
    flag = find_flag(spec->flags, name, short_name);
  if (!flag)
    return usage_error("unknown flag " + arg
                       + (spec ? " for `airlock " + std::string(spec->name) + "`" : std::string())
                       + "; see --help");
  std::optional<std::string> value;
  if (long_form && arg.find('=') != std::string::npos)
    value = arg.substr(arg.find('=') + 1);
  if (flag->kind == flag_kind::toggle) {
    if (value)
      return usage_error("--" + std::string(flag->name) + " takes no value");
    store(inv, *flag, "");
    return status::ok();
  }
  if (!value) {
    if (i + 1 >= args.size())
      return usage_error("--" + std::string(flag->name) + " needs a value ("
                         + std::string(flag->value) + ")");
    value = args[++i];
  }
  if (auto checked = check_value(*flag, *value); !checked)
    return checked;
  store(inv, *flag, std::move(*value));
  return status::ok();
}

/// The count of positional arguments, the argv and the required flags.
status check_complete(const invocation& inv, const command_spec& spec) {
  auto count = inv.positionals.size();
  std::string usage = "usage: airlock " + std::string(spec.name) + " " + std::string(spec.usage);
  if (count < spec.positionals_min)
    return usage_error("missing arguments; " + usage);
  if (count > spec.positionals_max)
    return usage_error("unexpected argument '" + inv.positionals[spec.positionals_max] + "'; "
                       + usage);
  if (spec.takes_argv && inv.argv.empty())
    return usage_error("missing the command to run after --; " + usage);
  for (const auto& flag : spec.flags) {
    if (flag.required && !inv.has(flag.name))
      return usage_error("missing " + shown_name(flag) + " " + std::string(flag.value) + "; "
                         + usage);
  }
  return status::ok();
}

} // namespace

const std::vector<command_spec>& command_specs() {
  static const std::vector<command_spec> specs = make_specs();
  return specs;
}

const command_spec* find_command(std::string_view name) {
  for (const auto& spec : command_specs()) {
    if (spec.name == name)
      return &spec;
  }
  return nullptr;
}

std::optional<std::string> invocation::value(std::string_view flag) const {
  auto it = flags.find(flag);
  if (it == flags.end() || it->second.empty())
    return std::nullopt;
  return it->second.back();
}

std::optional<uint64_t> invocation::number(std::string_view flag) const {
  auto text = value(flag);
  if (!text)
    return std::nullopt;
  uint64_t number = 0;
  std::from_chars(text->data(), text->data() + text->size(), number);
  return number;
}

std::map<std::string, std::string> invocation::pairs(std::string_view flag) const {
  std::map<std::string, std::string> out;
  auto it = flags.find(flag);
  if (it == flags.end())
    return out;
  for (const auto& pair : it->second) {
    auto eq = pair.find('=');
    out[pair.substr(0, eq)] = pair.substr(eq + 1);
  }
  return out;
}

result<invocation> parse_args(std::span<const std::string> args) {
  invocation inv;
  const command_spec* spec = nullptr;
  bool after_dashes = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (after_dashes) {
      (spec && spec->takes_argv ? inv.argv : inv.positionals).push_back(arg);
    } else if (arg == "--") {
      after_dashes = true;
    } else if (arg.size() > 1 && arg[0] == '-') {
      if (auto taken = take_flag(inv, spec, args, i); !taken)
        return taken;
    } else if (!spec && inv.command.empty() && arg == "help") {
      inv.help = true;
      inv.command = "help";
    } else if (!spec && (inv.command.empty() || inv.command == "help")) {
      spec = find_command(arg);
      if (!spec)
        return usage_error("unknown command '" + arg + "'; see airlock --help");
      inv.command = arg;
    } else if (!spec) {
      return usage_error("unexpected argument '" + arg + "'; see airlock --help");
    } else {
      inv.positionals.push_back(arg);
    }
  }
  if (inv.command == "help")
    inv.command.clear();
  if (inv.help)
    return inv;
  if (!spec)
    return usage_error("no command given; see airlock --help");
  if (auto complete = check_complete(inv, *spec); !complete)
    return complete;
  return inv;
}

std::string usage_text() {
  std::ostringstream out;
  out << "usage: airlock [--url URL] [--api-key KEY] [--json] COMMAND [ARGS]\n\n"
         "Drives airlockd over its HTTP API.\n\ncommands:\n";
  size_t name_width = 0;
  for (const auto& spec : command_specs())
    name_width = std::max(name_width, spec.name.size());
  for (const auto& spec : command_specs()) {
    out << "  " << spec.name << std::string(name_width - spec.name.size() + 2, ' ') << spec.summary
        << "\n";
  }
  out << "\nglobal flags:\n";
  for (const auto& flag : global_flags()) {
    std::string head =
      "  --" + std::string(flag.name) + (flag.value.empty() ? "" : " " + std::string(flag.value));
    out << head << std::string(head.size() < 18 ? 18 - head.size() : 1, ' ') << flag.help << "\n";
  }
  out << "\n`airlock COMMAND --help` shows a command's flags. Exit status: 0 success, 1 an API\n"
         "or connection error, 2 a usage error; exec exits with the process's status.\n";
  return out.str();
}

std::string command_help(const command_spec& spec) {
  std::ostringstream out;
  out << "usage: airlock " << spec.name << " " << spec.usage << "\n\n" << spec.summary << "\n";
  if (!spec.flags.empty())
    out << "\nflags:\n";
  for (const auto& flag : spec.flags) {
    std::string head = "  ";
    if (flag.short_name != 0)
      head += std::string("-") + flag.short_name + ", ";
    head +=
      "--" + std::string(flag.name) + (flag.value.empty() ? "" : " " + std::string(flag.value));
    out << head << std::string(head.size() < 22 ? 22 - head.size() : 1, ' ') << flag.help << "\n";
  }
  out << "\nglobal flags: --url URL, --api-key KEY, --config FILE, --json (see airlock --help)\n";
  return out.str();
}

} // namespace airlock::cli
