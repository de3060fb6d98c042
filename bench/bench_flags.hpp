// The benchmarks' flags, parsed with Boost.Program_options in one place.
//
// Each benchmark declares its flags against the fields of its own options
// struct (whose initial values are the defaults) and calls parse():
//   --help          usage on stdout, status 0
//   bad input       one line on stderr naming the flag, and the usage hint;
//                   status 2 (unknown flag, missing value, a number that is
//                   not one or is out of range, an unknown name in a list, a
//                   stray argument, a flag given twice)
// Flags are long only and matched exactly (no abbreviations); `--flag value`
// and `--flag=value` both work. Nothing throws out of parse().

#pragma once

#include <concepts>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace airlock::bench {

/// Status a benchmark returns after a usage error.
constexpr int usage_error_status = 2;

class bench_flags {
public:
  /// `program` names the benchmark in usage and errors; `about` is printed
  /// under the usage line of --help.
  bench_flags(std::string program, std::string about);
  ~bench_flags();
  bench_flags(const bench_flags&) = delete;
  bench_flags& operator=(const bench_flags&) = delete;

  /// A free-form value (a path, a directory).
  bench_flags& text(const char* name, std::string& target, const char* value_name,
                    const char* meaning);

  /// A whole number in [min, max] (a sign, a fraction, an exponent or
  /// anything after the digits is refused).
  template <std::integral T>
  bench_flags& integer(const char* name, T& target, const char* meaning,
                       std::type_identity_t<T> min = 0,
                       std::type_identity_t<T> max = std::numeric_limits<T>::max()) {
    constexpr auto widest = std::numeric_limits<long long>::max();
    const long long upper =
      static_cast<unsigned long long>(max) > static_cast<unsigned long long>(widest)
        ? widest
        : static_cast<long long>(max);
    return add_integer(name, meaning, static_cast<long long>(min), upper,
                       static_cast<long long>(target),
                       [&target](long long value) { target = static_cast<T>(value); });
  }

  /// A number (fractions allowed) in [min, max].
  bench_flags& decimal(const char* name, double& target, const char* meaning, double min,
                       double max);

  /// A comma-separated list of whole numbers, each in [min, max]; not empty.
  bench_flags& integers(const char* name, std::vector<int>& target, const char* meaning, int min,
                        int max);

  /// A comma-separated list of names, each one of `known`; not empty. The
  /// target keeps the text as given.
  bench_flags& names(const char* name, std::string& target, const std::vector<std::string>& known,
                     const char* meaning);

  /// Parses argv into the targets. nullopt: go on and run. Otherwise the
  /// status for main to return: 0 after --help (usage written to `out`),
  /// usage_error_status after bad input (one line written to `err`).
  std::optional<int> parse(int argc, const char* const* argv, std::ostream& out, std::ostream& err);
  /// The same on std::cout and std::cerr.
  std::optional<int> parse(int argc, const char* const* argv);

  /// "usage: PROGRAM [flags]", `about` and one line per flag.
  std::string usage() const;

private:
  bench_flags& add_integer(const char* name, const char* meaning, long long min, long long max,
                           long long initial, std::function<void(long long)> store);

  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace airlock::bench
