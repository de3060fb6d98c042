#include "actors/log.hpp"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <type_traits>

#include <nlohmann/json.hpp>

namespace airlock::actors {

namespace {

// Keys every line starts with, in this order.
constexpr std::string_view fixed_keys[] = {"ts", "level", "component", "msg"};

bool is_fixed_key(std::string_view key) {
  for (auto fixed : fixed_keys) {
    if (key == fixed)
      return true;
  }
  return false;
}

nlohmann::ordered_json to_json(const field_value& value) {
  return std::visit(
    [](const auto& v) -> nlohmann::ordered_json {
      if constexpr (std::is_same_v<std::decay_t<decltype(v)>, std::string_view>)
        return std::string(v);
      else
        return v;
    },
    value.get());
}

} // namespace

std::string_view to_string(log_level level) noexcept {
  switch (level) {
    case log_level::debug: return "debug";
    case log_level::info: return "info";
    case log_level::warn: return "warn";
    case log_level::error: return "error";
  }
  return "info";
}

result<log_level> parse_log_level(std::string_view text) {
  for (auto level : {log_level::debug, log_level::info, log_level::warn, log_level::error}) {
    if (text == to_string(level))
      return level;
  }
  return make_status(errc::invalid_argument,
                     "expected one of debug, info, warn, error; got '" + std::string(text) + "'");
}

int64_t wall_clock_now_ms() {
  // The one wall-clock read of the logger; see the header for why it is wall time.
  auto now = std::chrono::system_clock::now().time_since_epoch();
  return std::chrono::duration_cast<std::chrono::milliseconds>(now).count();
}

std::string format_rfc3339_ms(int64_t unix_ms) {
  // Floor division so that times before 1970 still get a millisecond part in 0..999.
  int64_t seconds = unix_ms / 1000;
  int64_t millis = unix_ms % 1000;
  if (millis < 0) {
    millis += 1000;
    seconds -= 1;
  }
  auto t = static_cast<std::time_t>(seconds);
  std::tm utc{};
  gmtime_r(&t, &utc);
  char text[40];
  std::size_t n = std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &utc);
  std::snprintf(text + n, sizeof text - n, ".%03dZ", static_cast<int>(millis));
  return text;
}

std::string format_log_line(int64_t unix_ms, log_level level, std::string_view component,
                            std::string_view msg, log_fields fields) {
  nlohmann::ordered_json line;
  line["ts"] = format_rfc3339_ms(unix_ms);
  line["level"] = std::string(to_string(level));
  line["component"] = std::string(component);
  line["msg"] = std::string(msg);
  for (const auto& [key, value] : fields) {
    std::string name(key);
    if (is_fixed_key(name))
      name += '_';
    line[name] = to_json(value);
  }
  // replace: a stray invalid UTF-8 byte in a field must not turn a log call
  // into an exception.
  return line.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

log_sink::log_sink(std::ostream& out, std::function<int64_t()> now_ms)
    : out_(out), now_ms_(std::move(now_ms)) {}

void log_sink::write_line(std::string_view line) noexcept {
  try {
    std::string whole;
    whole.reserve(line.size() + 1);
    whole.append(line);
    whole.push_back('\n');
    std::lock_guard<std::mutex> guard(mutex_);
    out_.write(whole.data(), static_cast<std::streamsize>(whole.size()));
    out_.flush();
  } catch (...) {
    // Nowhere left to report a failure to write a log line; the caller must
    // not fail because stderr did.
  }
}

logger::logger(std::string component, log_level level_min, log_sink& sink)
    : component_(std::move(component)), level_min_(level_min), sink_(&sink) {}

void logger::log(log_level level, std::string_view msg, log_fields fields) const {
  if (!enabled(level))
    return;
  std::string line;
  try {
    line = format_log_line(sink_->now_ms(), level, component_, msg, fields);
  } catch (...) {
    // Only allocation can fail here; leave a trace that an event was lost.
    line = R"({"level":"error","msg":"log formatting failed"})";
  }
  sink_->write_line(line);
}

logger logger::with_component(std::string component) const {
  return {std::move(component), level_min_, *sink_};
}

} // namespace airlock::actors
