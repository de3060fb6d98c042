#pragma once
// A text description of every stored or sent Cap'n Proto type: one line per
// struct field (name, ordinal, type) and per enumerant. schema/schema.lock is
// the committed copy; tests/schema compares it with the compiled schema so
// that a renumbered, retyped or removed field fails CI.

#include <map>
#include <string>
#include <string_view>

namespace airlock::schema {

/// The current compiled schema, one "Type.member @N :type" line each, sorted.
std::string describe_compiled_schema();

/// Parses text in the format above into member key ("Type.member") -> line.
std::map<std::string, std::string> parse_schema_lock(std::string_view text);

} // namespace airlock::schema
