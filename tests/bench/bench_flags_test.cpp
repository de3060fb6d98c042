// The benchmarks' flag parsing (bench/bench_flags.hpp): --help, one-line
// errors naming the flag with status 2, and the values it fills in.

#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "bench/bench_flags.hpp"

namespace airlock::bench {
namespace {

struct options {
  std::string dir = "/var/tmp";
  double seconds = 3.0;
  int count = 40;
  uint64_t size_mb = 256;
  uint32_t window_kb = 0;
  std::vector<int> writers{1, 8, 64};
  std::string cases = "small,large";
};

struct outcome {
  std::optional<int> status;
  std::string out;
  std::string err;
  options values;
};

outcome parse(const std::vector<std::string>& args) {
  outcome result;
  auto& o = result.values;
  bench_flags flags{"demo_bench", "A benchmark for the test."};
  flags.text("dir", o.dir, "DIR", "scratch directory")
    .decimal("seconds", o.seconds, "measured time", 0.001, 3600)
    .integer("count", o.count, "requests", 1)
    .integer("size-mb", o.size_mb, "MiB", 1, 1 << 20)
    .integer("window-kb", o.window_kb, "window; 0: default", 0, 1024)
    .integers("writers", o.writers, "writer counts", 1, 4096)
    .names("cases", o.cases, {"small", "large"}, "cases to run");
  std::vector<const char*> argv{"demo_bench"};
  for (const auto& a : args)
    argv.push_back(a.c_str());
  std::ostringstream out, err;
  result.status = flags.parse(static_cast<int>(argv.size()), argv.data(), out, err);
  result.out = out.str();
  result.err = err.str();
  return result;
}

/// One line, naming the program, `flag` and the usage hint.
void expect_usage_error(const outcome& got, const std::string& flag) {
  ASSERT_EQ(got.status, std::optional<int>(usage_error_status));
  EXPECT_EQ(usage_error_status, 2);
  EXPECT_TRUE(got.out.empty()) << got.out;
  EXPECT_EQ(got.err.rfind("demo_bench: ", 0), 0u) << got.err;
  EXPECT_NE(got.err.find(flag), std::string::npos) << got.err;
  EXPECT_NE(got.err.find("see demo_bench --help"), std::string::npos) << got.err;
  ASSERT_FALSE(got.err.empty());
  EXPECT_EQ(got.err.find('\n'), got.err.size() - 1) << got.err;
}

TEST(bench_flags, no_flags_keep_the_defaults) {
  auto got = parse({});
  EXPECT_EQ(got.status, std::nullopt) << got.err;
  EXPECT_EQ(got.values.dir, "/var/tmp");
  EXPECT_EQ(got.values.seconds, 3.0);
  EXPECT_EQ(got.values.count, 40);
  EXPECT_EQ(got.values.size_mb, 256u);
  EXPECT_EQ(got.values.window_kb, 0u);
  EXPECT_EQ(got.values.writers, (std::vector<int>{1, 8, 64}));
  EXPECT_EQ(got.values.cases, "small,large");
  EXPECT_TRUE(got.err.empty());
}

TEST(bench_flags, good_flags_are_parsed_in_both_spellings) {
  auto got = parse({"--dir", "/tmp/x", "--seconds", "0.25", "--count=7", "--size-mb", "1024",
                    "--window-kb", "64", "--writers", "2,16", "--cases", "large"});
  ASSERT_EQ(got.status, std::nullopt) << got.err;
  EXPECT_EQ(got.values.dir, "/tmp/x");
  EXPECT_EQ(got.values.seconds, 0.25);
  EXPECT_EQ(got.values.count, 7);
  EXPECT_EQ(got.values.size_mb, 1024u);
  EXPECT_EQ(got.values.window_kb, 64u);
  EXPECT_EQ(got.values.writers, (std::vector<int>{2, 16}));
  EXPECT_EQ(got.values.cases, "large");
}

TEST(bench_flags, help_prints_usage_and_status_0) {
  auto got = parse({"--help"});
  EXPECT_EQ(got.status, std::optional<int>(0));
  EXPECT_EQ(got.out.rfind("usage: demo_bench [flags]\n", 0), 0u) << got.out;
  for (const char* flag : {"--dir", "--seconds", "--count", "--size-mb", "--writers", "--cases"})
    EXPECT_NE(got.out.find(flag), std::string::npos) << flag << " missing from\n" << got.out;
  EXPECT_NE(got.out.find("(=40)"), std::string::npos) << "defaults shown:\n" << got.out;
  EXPECT_TRUE(got.err.empty());
}

TEST(bench_flags, unknown_flag_is_a_usage_error) {
  auto got = parse({"--count", "3", "--frobnicate", "1"});
  expect_usage_error(got, "--frobnicate");
}

TEST(bench_flags, abbreviations_are_not_guessed) {
  expect_usage_error(parse({"--cou", "3"}), "--cou");
}

TEST(bench_flags, a_value_that_is_not_a_number_names_the_flag) {
  expect_usage_error(parse({"--count", "abc"}), "--count");
  expect_usage_error(parse({"--count", "1.5"}), "--count");
  expect_usage_error(parse({"--seconds", "fast"}), "--seconds");
  expect_usage_error(parse({"--writers", "1,x,8"}), "--writers");
}

TEST(bench_flags, out_of_range_names_the_flag) {
  expect_usage_error(parse({"--count", "0"}), "--count");
  expect_usage_error(parse({"--count", "99999999999999999999999"}), "--count");
  expect_usage_error(parse({"--size-mb=-1"}), "--size-mb"); // no wrap-around for unsigned
  expect_usage_error(parse({"--window-kb", "4096"}), "--window-kb");
  expect_usage_error(parse({"--seconds", "0"}), "--seconds");
  expect_usage_error(parse({"--seconds", "nan"}), "--seconds");
  expect_usage_error(parse({"--writers", "1,0"}), "--writers");
}

TEST(bench_flags, unknown_case_names_the_flag) {
  expect_usage_error(parse({"--cases", "small,medium"}), "--cases");
}

TEST(bench_flags, missing_value_stray_argument_and_repeats_are_usage_errors) {
  expect_usage_error(parse({"--count"}), "--count");
  expect_usage_error(parse({"count", "3"}), "count");
  expect_usage_error(parse({"--count", "3", "--count", "4"}), "--count");
}

} // namespace
} // namespace airlock::bench
