#pragma once
// Structured logs: one JSON object per line, written whole, so that journald,
// `jq` and log shippers can read them without guessing where a record ends.
//
//   {"ts":"2024-05-01T12:00:00.123Z","level":"info","component":"airlockd",
//    "msg":"listening","address":"127.0.0.1:7070"}
//
// Loggers are plain objects handed to whoever logs (no global logger): a
// component gets its own logger, and all loggers of a process share one sink.

#include <concepts>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <mutex>
#include <ostream>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

#include "schema/errc.hpp"

namespace airlock::actors {

enum class log_level : uint8_t { debug, info, warn, error };

/// "debug", "info", "warn" or "error".
std::string_view to_string(log_level level) noexcept;

/// Parses the names above; invalid_argument for anything else.
result<log_level> parse_log_level(std::string_view text);

/// The value of one log field. Non-owning for strings: a field lives only for
/// the duration of the log call that receives it.
class field_value {
public:
  // Implicit on purpose, so that a field reads {"port", 7070}.
  // NOLINTBEGIN(google-explicit-constructor,hicpp-explicit-conversions)
  field_value(std::string_view text) : value_(text) {}
  field_value(const char* text) : value_(std::string_view{text}) {}
  field_value(const std::string& text) : value_(std::string_view{text}) {}
  field_value(bool flag) : value_(flag) {}
  field_value(double number) : value_(number) {}
  template <std::integral T>
  requires(!std::same_as<T, bool>) field_value(T number) {
    if constexpr (std::is_signed_v<T>)
      value_ = static_cast<int64_t>(number);
    else
      value_ = static_cast<uint64_t>(number);
  }
  // NOLINTEND(google-explicit-constructor,hicpp-explicit-conversions)

  using variant_type = std::variant<std::string_view, int64_t, uint64_t, double, bool>;
  const variant_type& get() const noexcept { return value_; }

private:
  variant_type value_;
};

using log_field = std::pair<std::string_view, field_value>;
using log_fields = std::initializer_list<log_field>;

/// Unix epoch milliseconds from the system clock. Logs carry wall time because
/// operators line them up with other systems' logs; tests inject a fixed clock.
int64_t wall_clock_now_ms();

/// Where the lines of every logger of a process go. Thread-safe: each line is
/// formatted first and then written with one write under a mutex, so lines
/// from different threads never interleave.
class log_sink {
public:
  /// `out` must outlive the sink (std::cerr in airlockd, a stringstream in
  /// tests). `now_ms` stamps each line.
  explicit log_sink(std::ostream& out, std::function<int64_t()> now_ms = wall_clock_now_ms);
  log_sink(const log_sink&) = delete;
  log_sink& operator=(const log_sink&) = delete;

  /// Writes `line` and a newline, then flushes. Never throws.
  void write_line(std::string_view line) noexcept;
  int64_t now_ms() const { return now_ms_(); }

private:
  std::mutex mutex_;
  std::ostream& out_;
  std::function<int64_t()> now_ms_;
};

/// Formats Unix milliseconds as RFC 3339 UTC with milliseconds:
/// "2024-05-01T12:00:00.123Z".
std::string format_rfc3339_ms(int64_t unix_ms);

/// A component's logger. Cheap to copy; thread-safe (the sink serialises).
/// The sink must outlive every logger that refers to it.
class logger {
public:
  logger(std::string component, log_level level_min, log_sink& sink);

  void debug(std::string_view msg, log_fields fields = {}) const {
    log(log_level::debug, msg, fields);
  }
  void info(std::string_view msg, log_fields fields = {}) const {
    log(log_level::info, msg, fields);
  }
  void warn(std::string_view msg, log_fields fields = {}) const {
    log(log_level::warn, msg, fields);
  }
  void error(std::string_view msg, log_fields fields = {}) const {
    log(log_level::error, msg, fields);
  }

  /// Writes one line if `level` is at least the logger's minimum. A field
  /// named like one of the fixed keys (ts, level, component, msg) is written
  /// with a trailing underscore instead of overwriting it.
  void log(log_level level, std::string_view msg, log_fields fields) const;

  bool enabled(log_level level) const noexcept { return level >= level_min_; }

  /// A logger for another component with the same sink and minimum level.
  logger with_component(std::string component) const;

  const std::string& component() const noexcept { return component_; }

private:
  std::string component_;
  log_level level_min_;
  log_sink* sink_; ///< never null; not owned
};

/// Formats one record as a JSON line (without the newline). Exposed for tests.
std::string format_log_line(int64_t unix_ms, log_level level, std::string_view component,
                            std::string_view msg, log_fields fields);

} // namespace airlock::actors
