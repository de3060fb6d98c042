#pragma once
// The --config file: a flat JSON object of option values, keyed like the
// flags in snake_case ({"listen": "0.0.0.0:7070", "http_threads": 4}).

#include <string>
#include <utility>
#include <vector>

#include "schema/errc.hpp"

namespace airlock::airlockd {

/// The file's entries as (key, value text) in file order; numbers and
/// booleans become their JSON text. invalid_argument, naming the file, when it
/// cannot be read, is not a JSON object, or holds a value that is not a
/// string, number or boolean.
result<std::vector<std::pair<std::string, std::string>>> load_config_file(const std::string& path);

} // namespace airlock::airlockd
