// The structured logger: one JSON object per line, fixed keys first, levels,
// and whole lines under concurrency.

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "actors/log.hpp"

namespace airlock::actors {
namespace {

constexpr int64_t fixed_ms = 1'700'000'000'123; // 2023-11-14T22:13:20.123Z

std::vector<nlohmann::json> parse_lines(const std::string& text) {
  std::vector<nlohmann::json> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    lines.push_back(nlohmann::json::parse(line));
  return lines;
}

TEST(log, writes_one_json_object_per_line_with_the_fixed_keys_first) {
  std::ostringstream out;
  log_sink sink(out, [] { return fixed_ms; });
  logger log("airlockd", log_level::info, sink);
  log.info("listening", {{"address", "127.0.0.1:7070"},
                         {"port", uint16_t{7070}},
                         {"ready", true},
                         {"delta", -3},
                         {"ratio", 0.5}});
  std::string text = out.str();
  ASSERT_EQ(text.back(), '\n');
  EXPECT_EQ(text.rfind(R"({"ts":"2023-11-14T22:13:20.123Z","level":"info","component":"airlockd",)"
                       R"("msg":"listening",)",
                       0),
            0u)
    << text;
  auto line = parse_lines(text).at(0);
  EXPECT_EQ(line["address"], "127.0.0.1:7070");
  EXPECT_EQ(line["port"], 7070);
  EXPECT_EQ(line["ready"], true);
  EXPECT_EQ(line["delta"], -3);
  EXPECT_EQ(line["ratio"], 0.5);
}

TEST(log, drops_lines_below_the_minimum_level) {
  std::ostringstream out;
  log_sink sink(out, [] { return fixed_ms; });
  logger log("x", log_level::warn, sink);
  log.debug("no");
  log.info("no");
  log.warn("yes");
  log.error("yes");
  auto lines = parse_lines(out.str());
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["level"], "warn");
  EXPECT_EQ(lines[1]["level"], "error");
  EXPECT_FALSE(log.enabled(log_level::info));
}

TEST(log, a_field_named_like_a_fixed_key_does_not_overwrite_it) {
  std::ostringstream out;
  log_sink sink(out, [] { return fixed_ms; });
  logger("c", log_level::debug, sink).info("real", {{"msg", "fake"}, {"level", "fake"}});
  auto line = parse_lines(out.str()).at(0);
  EXPECT_EQ(line["msg"], "real");
  EXPECT_EQ(line["msg_"], "fake");
  EXPECT_EQ(line["level"], "info");
}

TEST(log, escapes_text_and_survives_invalid_utf8) {
  std::ostringstream out;
  log_sink sink(out, [] { return fixed_ms; });
  logger log("c", log_level::debug, sink);
  log.info("quote \" newline \n end", {{"bytes", std::string("\xff\xfe ok")}});
  auto lines = parse_lines(out.str());
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0]["msg"], "quote \" newline \n end");
}

TEST(log, with_component_shares_the_sink_and_level) {
  std::ostringstream out;
  log_sink sink(out, [] { return fixed_ms; });
  logger parent("airlockd", log_level::warn, sink);
  logger child = parent.with_component("gateway");
  child.info("dropped");
  child.warn("kept");
  auto lines = parse_lines(out.str());
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0]["component"], "gateway");
}

TEST(log, formats_rfc3339_utc_with_milliseconds) {
  EXPECT_EQ(format_rfc3339_ms(0), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(format_rfc3339_ms(fixed_ms), "2023-11-14T22:13:20.123Z");
  EXPECT_EQ(format_rfc3339_ms(-1), "1969-12-31T23:59:59.999Z");
}

TEST(log, parses_the_four_level_names_only) {
  EXPECT_EQ(*parse_log_level("debug"), log_level::debug);
  EXPECT_EQ(*parse_log_level("error"), log_level::error);
  EXPECT_FALSE(parse_log_level("INFO").has_value());
  EXPECT_FALSE(parse_log_level("").has_value());
}

TEST(log, lines_from_many_threads_never_interleave) {
  std::ostringstream out;
  log_sink sink(out, [] { return fixed_ms; });
  constexpr int threads_n = 4;
  constexpr int lines_n = 500;
  std::vector<std::thread> threads;
  threads.reserve(threads_n);
  for (int t = 0; t < threads_n; ++t) {
    threads.emplace_back([&sink, t] {
      logger log("t" + std::to_string(t), log_level::info, sink);
      for (int i = 0; i < lines_n; ++i)
        log.info(std::string(200, static_cast<char>('a' + t)), {{"i", i}});
    });
  }
  for (auto& thread : threads)
    thread.join();
  auto lines = parse_lines(out.str()); // throws on a torn line
  EXPECT_EQ(lines.size(), static_cast<size_t>(threads_n * lines_n));
}

} // namespace
} // namespace airlock::actors
