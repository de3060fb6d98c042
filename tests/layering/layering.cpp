#include "tests/layering/layering.hpp"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string_view>
#include <tuple>
#include <utility>

namespace airlock::layering {

namespace fs = std::filesystem;

namespace {

std::string trim(std::string_view text) {
  size_t begin = 0;
  size_t end = text.size();
  while (begin < end && std::isspace(static_cast<unsigned char>(text[begin])))
    ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(text[end - 1])))
    --end;
  return std::string(text.substr(begin, end - begin));
}

std::vector<std::string> split_words(std::string_view text) {
  std::vector<std::string> words;
  std::istringstream in{std::string(text)};
  for (std::string word; in >> word;)
    words.push_back(word);
  return words;
}

std::string join(const std::set<std::string>& names) {
  std::string out;
  for (const auto& name : names)
    out += (out.empty() ? "" : " ") + name;
  return out.empty() ? "nothing" : out;
}

std::optional<std::string> read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return std::nullopt;
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

/// "worker/runtime" -> "airlock_worker_runtime".
std::string target_of(const std::string& library) {
  std::string out = "airlock_" + library;
  std::replace(out.begin(), out.end(), '/', '_');
  return out;
}

violation make(std::string file, size_t line, std::string from, std::string to,
               const std::string& what) {
  violation v{std::move(file), line, std::move(from), std::move(to), {}};
  v.message = v.file + ":" + std::to_string(v.line) + ": " + v.from
              + (v.to.empty() ? "" : " -> " + v.to) + ": " + what;
  return v;
}

// ---- rules ----

void close_over(rules& out) {
  for (const auto& library : out.libraries) {
    std::set<std::string>& reach = out.allowed[library];
    std::vector<std::string> stack(out.direct[library].begin(), out.direct[library].end());
    while (!stack.empty()) {
      std::string next = stack.back();
      stack.pop_back();
      if (!reach.insert(next).second)
        continue;
      for (const auto& dep : out.direct[next])
        stack.push_back(dep);
    }
  }
}

} // namespace

bool rules::allows(const std::string& from, const std::string& to) const {
  auto it = allowed.find(from);
  return it != allowed.end() && it->second.count(to) > 0;
}

rules parse_rules(const std::string& text, const std::string& shown_path) {
  rules out;
  std::map<std::string, size_t>& line_of = out.line;
  std::istringstream in(text);
  size_t number = 0;
  for (std::string raw; std::getline(in, raw);) {
    ++number;
    std::string line = trim(raw.substr(0, raw.find('#')));
    if (line.empty())
      continue;
    auto colon = line.find(':');
    std::string name = trim(line.substr(0, colon));
    if (colon == std::string::npos || name.empty() || name.find(' ') != std::string::npos) {
      out.errors.push_back(make(shown_path, number, name, "",
                                "expected `folder: folders it may depend on` in " + shown_path));
      continue;
    }
    if (line_of.count(name) > 0) {
      out.errors.push_back(make(shown_path, number, name, "",
                                name + " has a line already (line " + std::to_string(line_of[name])
                                  + ") in " + shown_path));
      continue;
    }
    line_of[name] = number;
    out.libraries.push_back(name);
    auto& deps = out.direct[name];
    for (const auto& dep : split_words(line.substr(colon + 1)))
      deps.insert(dep);
  }
  for (const auto& library : out.libraries) {
    for (const auto& dep : out.direct[library]) {
      if (dep == library || line_of.count(dep) == 0)
        out.errors.push_back(make(shown_path, line_of[library], library, dep,
                                  dep == library
                                    ? "a library cannot depend on itself in " + shown_path
                                    : dep + " has no line of its own in " + shown_path));
    }
  }
  close_over(out);
  for (const auto& library : out.libraries) {
    if (out.allowed[library].count(library) > 0)
      out.errors.push_back(make(shown_path, line_of[library], library, library,
                                "the rules in " + shown_path + " make a cycle through " + library));
  }
  return out;
}

namespace {

// ---- CMake files ----

struct token {
  std::string text;
  size_t line = 0;
};

/// Words, quoted strings and parentheses with their lines; comments dropped.
std::vector<token> lex_cmake(const std::string& text) {
  std::vector<token> out;
  size_t line = 1;
  std::string word;
  size_t word_line = 0;
  auto flush = [&out, &word, &word_line] {
    if (!word.empty())
      out.push_back({word, word_line});
    word.clear();
  };
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '#') {
      flush();
      bool bracket = text.compare(i, 3, "#[[") == 0;
      size_t end = bracket ? text.find("]]", i) : text.find('\n', i);
      end = end == std::string::npos ? text.size() : end;
      line +=
        static_cast<size_t>(std::count(text.begin() + static_cast<std::ptrdiff_t>(i),
                                       text.begin() + static_cast<std::ptrdiff_t>(end), '\n'));
      i = bracket ? end + 1 : end - 1;
    } else if (c == '"') {
      flush();
      size_t start_line = line;
      std::string quoted;
      for (++i; i < text.size() && text[i] != '"'; ++i) {
        if (text[i] == '\\' && i + 1 < text.size())
          quoted += text[++i];
        else
          quoted += text[i];
        if (text[i] == '\n')
          ++line;
      }
      out.push_back({quoted, start_line});
    } else if (c == '(' || c == ')') {
      flush();
      out.push_back({std::string(1, c), line});
    } else if (std::isspace(static_cast<unsigned char>(c))) {
      flush();
      if (c == '\n')
        ++line;
    } else {
      if (word.empty())
        word_line = line;
      word += c;
    }
  }
  flush();
  return out;
}

struct command {
  std::string name; ///< lower case
  std::vector<token> args;
};

std::vector<command> parse_cmake(const std::string& text) {
  std::vector<token> tokens = lex_cmake(text);
  std::vector<command> out;
  for (size_t i = 0; i + 1 < tokens.size(); ++i) {
    if (tokens[i + 1].text != "(" || tokens[i].text == "(" || tokens[i].text == ")")
      continue;
    command cmd;
    cmd.name = tokens[i].text;
    std::transform(cmd.name.begin(), cmd.name.end(), cmd.name.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    int depth = 0;
    size_t j = i + 1;
    for (; j < tokens.size(); ++j) {
      if (tokens[j].text == "(" && ++depth == 1)
        continue;
      if (tokens[j].text == ")" && --depth == 0)
        break;
      cmd.args.push_back(tokens[j]);
    }
    out.push_back(std::move(cmd));
    i = j;
  }
  return out;
}

/// "$<TARGET_FILE:airlock_guest>" -> "airlock_guest"; variables -> "".
std::string link_name(const std::string& arg) {
  if (arg.find("${") != std::string::npos)
    return {};
  if (arg.rfind("$<", 0) == 0) {
    auto colon = arg.rfind(':');
    if (colon == std::string::npos)
      return {};
    std::string name = arg.substr(colon + 1);
    while (!name.empty() && name.back() == '>')
      name.pop_back();
    return name;
  }
  return arg;
}

bool is_link_keyword(const std::string& arg) {
  static const std::set<std::string> keywords{
    "PUBLIC", "PRIVATE",   "INTERFACE", "LINK_PUBLIC", "LINK_PRIVATE", "LINK_INTERFACE_LIBRARIES",
    "debug",  "optimized", "general"};
  return keywords.count(arg) > 0;
}

struct link_edge {
  std::string file;
  size_t line = 0;
  std::string from; ///< library folder
  std::string name; ///< the target as written (resolved)
};

struct include_edge {
  std::string file;
  size_t line = 0;
  std::string from;
  std::string path;
};

bool is_source(const fs::path& path) {
  static const std::set<std::string> extensions{".hpp", ".cpp", ".h", ".cc", ".cxx", ".hh", ".ipp"};
  return extensions.count(path.extension().string()) > 0;
}

bool is_cmake(const fs::path& path) {
  return path.filename() == "CMakeLists.txt" || path.extension() == ".cmake";
}

std::vector<include_edge> read_includes(const std::string& text, const std::string& file,
                                        const std::string& from) {
  std::vector<include_edge> out;
  std::istringstream in(text);
  size_t number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    std::string_view rest = line;
    auto skip_space = [&rest] {
      while (!rest.empty() && (rest.front() == ' ' || rest.front() == '\t'))
        rest.remove_prefix(1);
    };
    skip_space();
    if (rest.empty() || rest.front() != '#')
      continue;
    rest.remove_prefix(1);
    skip_space();
    if (rest.substr(0, 7) != "include")
      continue;
    rest.remove_prefix(7);
    skip_space();
    if (rest.empty() || rest.front() != '"')
      continue;
    rest.remove_prefix(1);
    auto close = rest.find('"');
    if (close == std::string_view::npos)
      continue;
    out.push_back({file, number, from, std::string(rest.substr(0, close))});
  }
  return out;
}

/// Everything the walk of the tree found.
struct tree {
  std::set<std::string> outsiders;                    ///< top folders with CMake, not libraries
  std::map<std::string, std::string> target_home;     ///< target -> library folder
  std::map<std::string, std::string> outsider_target; ///< target -> outsider folder
  std::vector<link_edge> links;
  std::vector<include_edge> includes;
  std::vector<violation> unnamed; ///< unnamed libraries, root include directories
};

class checker {
public:
  checker(fs::path root, rules r, std::string rules_shown)
      : root_(std::move(root)), rules_(std::move(r)), shown_(std::move(rules_shown)) {
    for (const auto& library : rules_.libraries)
      tree_.target_home[target_of(library)] = library;
  }

  report run() {
    report out;
    out.violations = rules_.errors;
    for (const auto& library : rules_.libraries) {
      if (!fs::is_directory(root_ / library))
        out.violations.push_back(
          make(shown_, rules_.line.at(library), library, "",
               "no folder " + library + " for the library named in " + shown_));
    }
    walk(out);
    for (const auto& v : tree_.unnamed)
      out.violations.push_back(v);
    check_links(out);
    check_includes(out);
    std::sort(out.violations.begin(), out.violations.end(),
              [](const violation& a, const violation& b) {
                return std::tie(a.file, a.line, a.message) < std::tie(b.file, b.line, b.message);
              });
    return out;
  }

private:
  /// The library whose folder is the longest prefix of `path` ("" if none).
  std::string owner_of(const std::string& path) const {
    std::string best;
    for (const auto& library : rules_.libraries) {
      if (path.size() > library.size() && path.compare(0, library.size(), library) == 0
          && path[library.size()] == '/' && library.size() > best.size())
        best = library;
    }
    return best;
  }

  std::string relative(const fs::path& path) const {
    return path.lexically_relative(root_).generic_string();
  }

  void walk(report& out) {
    std::set<std::string> tops;
    for (const auto& library : rules_.libraries)
      tops.insert(library.substr(0, library.find('/')));
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(root_, ec)) {
      std::string name = entry.path().filename().string();
      if (!entry.is_directory() || name.empty() || name.front() == '.')
        continue;
      if (tops.count(name) == 0 && fs::exists(entry.path() / "CMakeLists.txt"))
        tree_.outsiders.insert(name);
    }
    for (const auto& top : tree_.outsiders)
      tops.insert(top);
    for (const auto& top : tops)
      walk_folder(root_ / top, out);
  }

  void walk_folder(const fs::path& folder, report& out) {
    if (!fs::is_directory(folder))
      return;
    std::error_code ec;
    for (fs::recursive_directory_iterator it(folder, ec), end; it != end; it.increment(ec)) {
      if (ec)
        break;
      const fs::path& path = it->path();
      if (it->is_directory()
          && (path.filename().string().front() == '.' || fs::exists(path / "CMakeCache.txt"))) {
        it.disable_recursion_pending();
        continue;
      }
      if (!it->is_regular_file() || (!is_source(path) && !is_cmake(path)))
        continue;
      auto text = read_text(path);
      if (!text)
        continue;
      std::string file = relative(path);
      std::string owner = owner_of(file);
      if (is_cmake(path)) {
        read_cmake(*text, file, owner);
      } else if (!owner.empty()) {
        ++out.files_scanned;
        for (auto& edge : read_includes(*text, file, owner))
          tree_.includes.push_back(std::move(edge));
      }
    }
  }

  void read_cmake(const std::string& text, const std::string& file, const std::string& owner) {
    std::string top = file.substr(0, file.find('/'));
    for (const auto& cmd : parse_cmake(text)) {
      if (cmd.args.empty())
        continue;
      const token& first = cmd.args.front();
      if (cmd.name == "airlock_library") {
        std::string target = "airlock_" + first.text;
        if (tree_.target_home.count(target) == 0 || tree_.target_home[target] != owner) {
          std::string folder = file.substr(0, file.rfind('/'));
          tree_.unnamed.push_back(make(file, first.line, owner.empty() ? folder : owner, "",
                                       "library " + target + " (folder " + folder
                                         + ") has no line in " + shown_
                                         + ", or not this folder's"));
        }
        if (!owner.empty())
          add_deps(cmd.args, file, owner, true);
      } else if (cmd.name == "add_library" || cmd.name == "add_executable"
                 || cmd.name == "airlock_test") {
        if (owner.empty())
          tree_.outsider_target[first.text] = top;
        else if (tree_.target_home.count(first.text) == 0)
          tree_.target_home[first.text] = owner;
      } else if (cmd.name == "target_link_libraries" && !owner.empty()) {
        add_deps(cmd.args, file, owner, false);
      } else if (cmd.name == "target_include_directories" && !owner.empty()) {
        check_roots(cmd.args, file, owner);
      }
    }
  }

  /// A PUBLIC or INTERFACE include directory that is a root (of the sources
  /// or of the build) would make every header resolve in whatever links it.
  void check_roots(const std::vector<token>& args, const std::string& file,
                   const std::string& owner) {
    static const std::set<std::string> roots{"${PROJECT_SOURCE_DIR}", "${PROJECT_BINARY_DIR}",
                                             "${CMAKE_SOURCE_DIR}", "${CMAKE_BINARY_DIR}"};
    std::string scope = "PRIVATE";
    for (size_t i = 1; i < args.size(); ++i) {
      const std::string& arg = args[i].text;
      if (arg == "PUBLIC" || arg == "PRIVATE" || arg == "INTERFACE")
        scope = arg;
      else if (scope != "PRIVATE" && roots.count(arg) > 0)
        tree_.unnamed.push_back(make(file, args[i].line, owner, "",
                                     arg + " is a " + scope
                                       + " include directory: every header would resolve in"
                                         " whatever links it; a library exposes only its own"
                                         " folder (airlock_library, docs/layering.md)"));
    }
  }

  /// airlock_library: the words after DEPS; target_link_libraries: all but the first.
  void add_deps(const std::vector<token>& args, const std::string& file, const std::string& owner,
                bool after_deps_keyword) {
    bool in_deps = !after_deps_keyword;
    for (size_t i = 1; i < args.size(); ++i) {
      const std::string& arg = args[i].text;
      if (after_deps_keyword && (arg == "DEPS" || arg == "SOURCES")) {
        in_deps = arg == "DEPS";
        continue;
      }
      if (!in_deps || is_link_keyword(arg))
        continue;
      std::string name = link_name(arg);
      if (!name.empty())
        tree_.links.push_back({file, args[i].line, owner, name});
    }
  }

  std::string rule_of(const std::string& library) const {
    auto it = rules_.direct.find(library);
    auto line = rules_.line.find(library);
    return shown_ + ":" + std::to_string(line == rules_.line.end() ? 0 : line->second) + " allows `"
           + library + ": "
           + (it == rules_.direct.end() ? std::string("nothing") : join(it->second)) + "`";
  }

  void check_links(report& out) {
    for (const auto& edge : tree_.links) {
      auto home = tree_.target_home.find(edge.name);
      if (home != tree_.target_home.end()) {
        const std::string& to = home->second;
        if (to == edge.from)
          continue;
        ++out.links_checked;
        linked_[edge.from].insert(to);
        if (!rules_.allows(edge.from, to))
          out.violations.push_back(make(edge.file, edge.line, edge.from, to,
                                        "links " + edge.name + ", outside the declared order ("
                                          + rule_of(edge.from) + ")"));
        continue;
      }
      auto outsider = tree_.outsider_target.find(edge.name);
      if (outsider != tree_.outsider_target.end()) {
        out.violations.push_back(make(edge.file, edge.line, edge.from, outsider->second,
                                      "links " + edge.name + " of " + outsider->second
                                        + "/, which is not a library: no library may depend on it ("
                                        + shown_ + ")"));
      } else if (edge.name.rfind("airlock_", 0) == 0) {
        out.violations.push_back(
          make(edge.file, edge.line, edge.from, "",
               "links " + edge.name + ", a library with no line in " + shown_));
      }
    }
  }

  /// Libraries that `from` links, directly or through what it links.
  const std::set<std::string>& link_closure(const std::string& from) {
    auto cached = closure_.find(from);
    if (cached != closure_.end())
      return cached->second;
    std::set<std::string>& reach = closure_[from];
    std::vector<std::string> stack(linked_[from].begin(), linked_[from].end());
    while (!stack.empty()) {
      std::string next = stack.back();
      stack.pop_back();
      if (!reach.insert(next).second)
        continue;
      for (const auto& dep : linked_[next])
        stack.push_back(dep);
    }
    return reach;
  }

  void check_includes(report& out) {
    for (const auto& edge : tree_.includes) {
      if (edge.path.find('/') == std::string::npos)
        continue; // a file next to the includer
      std::string to = owner_of(edge.path);
      std::string quoted = "#include \"" + edge.path + "\"";
      if (to.empty()) {
        std::string top = edge.path.substr(0, edge.path.find('/'));
        if (tree_.outsiders.count(top) > 0)
          out.violations.push_back(make(edge.file, edge.line, edge.from, top,
                                        quoted + ": " + top + "/ is not a library, and no library"
                                          + " may depend on it (" + shown_ + ")"));
        continue;
      }
      if (to == edge.from)
        continue;
      ++out.includes_checked;
      if (!rules_.allows(edge.from, to)) {
        out.violations.push_back(
          make(edge.file, edge.line, edge.from, to,
               quoted + " is outside the declared order (" + rule_of(edge.from) + ")"));
      } else if (link_closure(edge.from).count(to) == 0) {
        out.violations.push_back(make(edge.file, edge.line, edge.from, to,
                                      quoted + " but " + edge.from + " does not link "
                                        + target_of(to) + " (" + shown_
                                        + " allows the edge: add it to DEPS)"));
      }
    }
  }

  fs::path root_;
  rules rules_;
  std::string shown_;
  tree tree_;
  std::map<std::string, std::set<std::string>> linked_;
  std::map<std::string, std::set<std::string>> closure_;
};

} // namespace

report check(const fs::path& source_dir, const fs::path& rules_file) {
  fs::path root = fs::weakly_canonical(source_dir);
  fs::path path = rules_file.is_absolute() ? rules_file : root / rules_file;
  std::string shown = fs::weakly_canonical(path).lexically_relative(root).generic_string();
  if (shown.empty() || shown.rfind("..", 0) == 0)
    shown = path.generic_string();
  auto text = read_text(path);
  if (!text) {
    report out;
    out.violations.push_back(make(shown, 0, "", "", "cannot read the rules file " + shown));
    return out;
  }
  return checker(root, parse_rules(*text, shown), shown).run();
}

} // namespace airlock::layering
