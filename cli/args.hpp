#pragma once
// The command line of `airlock`: a table of commands and their flags, and a
// parser that checks everything it can without the server (unknown flags,
// missing values, numbers, K=V pairs, the count of positional arguments), so
// that a usage error never reaches the network and always exits with 2.

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cli/config.hpp"
#include "schema/errc.hpp"

namespace airlock::cli {

enum class flag_kind {
  toggle,    ///< no value
  text,      ///< any value
  count,     ///< a non-negative integer
  key_value, ///< K=V with a non-empty K; repeatable
};

struct flag_spec {
  std::string_view name; ///< without "--"
  flag_kind kind = flag_kind::toggle;
  std::string_view value; ///< placeholder in help ("MB")
  std::string_view help;
  char short_name = 0;             ///< e.g. 't' for -t; 0: none
  uint64_t count_min = 0;          ///< a count's smallest value
  uint64_t count_max = UINT64_MAX; ///< a count's largest value
  bool required = false;           ///< the command needs this flag
};

struct command_spec {
  std::string_view name;
  std::string_view usage; ///< after "airlock NAME "
  std::string_view summary;
  std::vector<flag_spec> flags;
  size_t positionals_min = 0;
  size_t positionals_max = 0;
  bool takes_argv = false; ///< everything after "--" is the argv of a process (exec)
};

/// Every command, in the order `airlock --help` lists them.
const std::vector<command_spec>& command_specs();

/// The spec named `name`; nullptr when there is none.
const command_spec* find_command(std::string_view name);

/// A parsed command line. Flags are stored by name without "--"; a toggle's
/// value is "".
struct invocation {
  std::string command; ///< empty for plain `airlock --help`
  connection_flags connection;
  bool json = false;
  bool help = false;
  std::map<std::string, std::vector<std::string>, std::less<>> flags;
  std::vector<std::string> positionals;
  std::vector<std::string> argv; ///< after "--", for exec

  bool has(std::string_view flag) const { return flags.contains(flag); }
  /// The last value given for `flag`; nullopt when absent.
  std::optional<std::string> value(std::string_view flag) const;
  /// A count flag's value (validated by the parser); nullopt when absent.
  std::optional<uint64_t> number(std::string_view flag) const;
  /// K=V flags as a map (a repeated key: the last wins).
  std::map<std::string, std::string> pairs(std::string_view flag) const;
};

/// Parses `args` (without the program name). invalid_argument with a sentence
/// naming the offending argument for any usage error (a count out of its
/// flag's range and a missing required flag included). Global flags (--url,
/// --api-key, --config, --json, --help/-h) are accepted anywhere before "--".
/// `airlock help [COMMAND]` is the same as `airlock [COMMAND] --help`.
result<invocation> parse_args(std::span<const std::string> args);

/// The top-level help: commands, global flags, configuration.
std::string usage_text();

/// One command's help: usage line, summary and flags.
std::string command_help(const command_spec& spec);

} // namespace airlock::cli
