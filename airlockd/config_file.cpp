#include "airlockd/config_file.hpp"

#include <fstream>

#include <nlohmann/json.hpp>

namespace airlock::airlockd {

namespace {

/// Config files are small; a larger one is a mistake (a wrong path), not config.
constexpr std::streamsize config_file_bytes_max = 1 << 20;

status bad_file(const std::string& path, const std::string& why) {
  return make_status(errc::invalid_argument, "config file " + path + ": " + why);
}

} // namespace

result<std::vector<std::pair<std::string, std::string>>> load_config_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return bad_file(path, "cannot be read");
  std::string text(static_cast<size_t>(config_file_bytes_max) + 1, '\0');
  in.read(text.data(), config_file_bytes_max + 1);
  if (in.bad())
    return bad_file(path, "cannot be read");
  if (in.gcount() > config_file_bytes_max)
    return bad_file(path, "is larger than 1 MiB");
  text.resize(static_cast<size_t>(in.gcount()));

  nlohmann::ordered_json doc =
    nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded())
    return bad_file(path, "is not valid JSON");
  if (!doc.is_object())
    return bad_file(path, "must hold a JSON object of option values");

  std::vector<std::pair<std::string, std::string>> entries;
  for (const auto& [key, value] : doc.items()) {
    if (value.is_string())
      entries.emplace_back(key, value.get<std::string>());
    else if (value.is_number() || value.is_boolean())
      entries.emplace_back(key, value.dump());
    else
      return bad_file(path, key + ": expected a string, number or boolean");
  }
  return entries;
}

} // namespace airlock::airlockd
