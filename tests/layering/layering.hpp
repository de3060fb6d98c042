#pragma once
// The layering check (docs/layering.md): reads a rules file (cmake/layers.txt:
// one line per library, `folder: folders it may depend on`), every
// `#include "..."` in the libraries' folders and every airlock_library DEPS and
// target_link_libraries in their CMake files, and reports each edge outside the
// declared order, each include of a library that is not linked, and each
// library the rules do not name. Plain C++ and the standard library only, so
// that it can run on any tree (the real one, or one planted by a test).

#include <cstddef>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace airlock::layering {

/// One finding. `message` is the whole line to print:
/// "<file>:<line>: <from> -> <to>: <what>; <rules file> ...".
struct violation {
  std::string file; ///< relative to the source directory
  size_t line = 0;  ///< 1-based
  std::string from; ///< library folder (e.g. "worker/runtime")
  std::string to;   ///< library folder, or the folder of a non-library
  std::string message;
};

/// The rules file, parsed. `allowed` is transitive: what a library may use
/// through the libraries it may use comes along.
struct rules {
  std::vector<std::string> libraries;                  ///< in file order
  std::map<std::string, std::set<std::string>> direct; ///< as written
  std::map<std::string, std::set<std::string>> allowed;
  std::map<std::string, size_t> line; ///< each library's line in the file
  std::vector<violation> errors;      ///< malformed lines, unknown names, cycles

  bool allows(const std::string& from, const std::string& to) const;
};

/// Parses `text` (the contents of the rules file); `shown_path` names the file
/// in messages.
rules parse_rules(const std::string& text, const std::string& shown_path);

struct report {
  std::vector<violation> violations;
  size_t files_scanned = 0;    ///< source files read
  size_t includes_checked = 0; ///< quoted includes into another library
  size_t links_checked = 0;    ///< link edges between libraries
};

/// Checks the tree at `source_dir` against `rules_file` (absolute, or relative
/// to `source_dir`). Violations come sorted by file and line.
report check(const std::filesystem::path& source_dir, const std::filesystem::path& rules_file);

} // namespace airlock::layering
