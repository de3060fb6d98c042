#pragma once
// What the files that read airlockd's options share (internal to airlockd/:
// option_values.cpp parses single values, option_specs.cpp holds the option
// tables of serve, control and worker, options.cpp layers defaults, config
// file, environment and flags). Not a public header: options.hpp is the
// contract.

#include <charconv>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "actors/log.hpp"
#include "airlockd/options.hpp"
#include "gateway/endpoint.hpp"
#include "schema/errc.hpp"

namespace airlock::airlockd::option_detail {

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

/// invalid_argument with `message`.
status invalid(std::string message);

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

status set_bool(bool& field, std::string_view text);
status set_path(std::string& field, std::string_view text);
status set_endpoint(gateway::endpoint& field, std::string_view text);
status set_log_level(actors::log_level& field, std::string_view text);
status set_name(std::string& field, std::string_view text);
/// A join token of the right shape (actors/join_tokens.hpp).
status set_join_token(std::string& field, std::string_view text);
/// http://HOST:PORT with an optional trailing slash (dropped).
status set_http_url(std::string& field, std::string_view text);

/// The options of each subcommand (option_specs.cpp), in the order usage lists them.
std::vector<option_spec<serve_options>> serve_specs();
std::vector<option_spec<control_options>> control_specs();
std::vector<option_spec<worker_options>> worker_specs();

} // namespace airlock::airlockd::option_detail
