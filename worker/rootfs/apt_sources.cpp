#include "worker/rootfs/apt_sources.hpp"

#include <algorithm>
#include <cctype>
#include <vector>

#include "worker/rootfs/fs_util.hpp"

namespace airlock::worker {

namespace {

std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    auto nl = text.find('\n');
    auto line = text.substr(0, nl);
    if (!line.empty() && line.back() == '\r')
      line.remove_suffix(1);
    lines.push_back(line);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
  }
  return lines;
}

std::vector<std::string_view> split_words(std::string_view text) {
  std::vector<std::string_view> words;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i])))
      ++i;
    size_t start = i;
    while (i < text.size() && !std::isspace(static_cast<unsigned char>(text[i])))
      ++i;
    if (i > start)
      words.push_back(text.substr(start, i - start));
  }
  return words;
}

std::string_view strip_comment(std::string_view line) { return line.substr(0, line.find('#')); }

bool contains(const std::vector<std::string_view>& words, std::string_view word) {
  return std::find(words.begin(), words.end(), word) != words.end();
}

// debootstrap fetches over http(s), ftp or from a local path.
bool usable_uri(std::string_view uri) {
  for (std::string_view scheme : {"http://", "https://", "ftp://", "file:/"})
    if (uri.substr(0, scheme.size()) == scheme)
      return true;
  return false;
}

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front())))
    text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())))
    text.remove_suffix(1);
  return text;
}

struct stanza {
  std::string types, uris, suites, components, enabled = "yes";
};

// Folds continuation lines into their field and keeps the fields we need.
std::optional<std::string> match_stanza(const stanza& fields, std::string_view suite) {
  auto types = split_words(fields.types);
  auto suites = split_words(fields.suites);
  auto components = split_words(fields.components);
  if (lower(trim(fields.enabled)) == "no" || !contains(types, "deb") || !contains(suites, suite)
      || !contains(components, "main"))
    return std::nullopt;
  for (auto uri : split_words(fields.uris))
    if (usable_uri(uri))
      return std::string(uri);
  return std::nullopt;
}

} // namespace

std::optional<std::string> find_mirror_in_list(std::string_view text, std::string_view suite) {
  for (auto line : split_lines(text)) {
    line = strip_comment(line);
    // [arch=amd64 signed-by=...] may hold spaces: drop the whole bracket.
    std::string flat(line);
    auto open = flat.find('[');
    auto close = flat.find(']', open == std::string::npos ? 0 : open);
    if (open != std::string::npos && close != std::string::npos)
      flat.erase(open, close - open + 1);
    auto words = split_words(flat);
    if (words.size() < 4 || words[0] != "deb" || !usable_uri(words[1]) || words[2] != suite)
      continue;
    if (std::find(words.begin() + 3, words.end(), "main") != words.end())
      return std::string(words[1]);
  }
  return std::nullopt;
}

std::optional<std::string> find_mirror_in_deb822(std::string_view text, std::string_view suite) {
  stanza current;
  std::string* last = nullptr;
  auto lines = split_lines(text);
  lines.emplace_back(); // a final blank line ends the last stanza
  for (auto line : lines) {
    if (!line.empty() && line.front() == '#')
      continue;
    if (trim(line).empty()) {
      if (auto found = match_stanza(current, suite))
        return found;
      current = stanza{};
      last = nullptr;
      continue;
    }
    if (std::isspace(static_cast<unsigned char>(line.front()))) {
      if (last != nullptr)
        (*last += ' ') += std::string(trim(line));
      continue;
    }
    auto colon = line.find(':');
    if (colon == std::string_view::npos)
      continue;
    auto key = lower(trim(line.substr(0, colon)));
    auto value = std::string(trim(line.substr(colon + 1)));
    last = key == "types"        ? &current.types
           : key == "uris"       ? &current.uris
           : key == "suites"     ? &current.suites
           : key == "components" ? &current.components
           : key == "enabled"    ? &current.enabled
                                 : nullptr;
    if (last != nullptr)
      *last = value;
  }
  return std::nullopt;
}

result<std::string> find_host_mirror(const std::filesystem::path& apt_dir, std::string_view suite) {
  std::vector<std::filesystem::path> files{apt_dir / "sources.list"};
  if (auto names = list_dir(apt_dir / "sources.list.d"))
    for (const auto& name : *names) {
      auto ends = [&name](std::string_view suffix) {
        return name.size() > suffix.size()
               && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
      };
      if (ends(".list") || ends(".sources"))
        files.push_back(apt_dir / "sources.list.d" / name);
    }
  std::string read;
  for (const auto& file : files) {
    auto text = read_file(file);
    if (!text)
      continue;
    read += " " + file.string();
    bool deb822 = file.extension() == ".sources";
    auto found = deb822 ? find_mirror_in_deb822(*text, suite) : find_mirror_in_list(*text, suite);
    if (found)
      return *found;
  }
  return make_status(errc::not_found,
                     "no Debian '" + std::string(suite)
                       + "' main source in the host's apt "
                         "configuration (read:"
                       + (read.empty() ? std::string(" nothing") : read)
                       + "); set template_options.mirror, e.g. http://deb.debian.org/debian");
}

} // namespace airlock::worker
