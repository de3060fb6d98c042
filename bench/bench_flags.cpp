#include "bench/bench_flags.hpp"

#include <boost/program_options.hpp>

#include <cmath>
#include <iostream>
#include <sstream>
#include <utility>

namespace airlock::bench {

namespace po = boost::program_options;

namespace {

/// Where positionals land, so that a stray argument can be named.
constexpr const char* stray_option = "stray-argument";

[[noreturn]] void refuse(const char* name, const std::string& value, const std::string& why) {
  throw po::error("the argument ('" + value + "') for option '--" + name + "' " + why);
}

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> items;
  std::string::size_type start = 0;
  for (;;) {
    auto comma = text.find(',', start);
    items.push_back(text.substr(start, comma - start));
    if (comma == std::string::npos)
      return items;
    start = comma + 1;
  }
}

std::string join(const std::vector<std::string>& items) {
  std::string text;
  for (const auto& item : items)
    text += (text.empty() ? "" : ",") + item;
  return text;
}

} // namespace

struct bench_flags::impl {
  std::string program;
  std::string about;
  po::options_description flags{"flags"};
};

bench_flags::bench_flags(std::string program, std::string about) : impl_(std::make_unique<impl>()) {
  impl_->program = std::move(program);
  impl_->about = std::move(about);
  impl_->flags.add_options()("help", "print this and exit");
}

bench_flags::~bench_flags() = default;

bench_flags& bench_flags::text(const char* name, std::string& target, const char* value_name,
                               const char* meaning) {
  impl_->flags.add_options()(
    name, po::value<std::string>(&target)->value_name(value_name)->default_value(target), meaning);
  return *this;
}

bench_flags& bench_flags::add_integer(const char* name, const char* meaning, long long min,
                                      long long max, long long initial,
                                      std::function<void(long long)> store) {
  // Program_options converts with lexical_cast: "abc", "1.5" and "1e3" are
  // refused as invalid; the range is checked here.
  impl_->flags.add_options()(
    name,
    po::value<long long>()->value_name("N")->default_value(initial)->notifier(
      [name, min, max, store](long long value) {
        if (value < min)
          refuse(name, std::to_string(value), "is out of range: at least " + std::to_string(min));
        if (value > max)
          refuse(name, std::to_string(value), "is out of range: at most " + std::to_string(max));
        store(value);
      }),
    meaning);
  return *this;
}

bench_flags& bench_flags::decimal(const char* name, double& target, const char* meaning, double min,
                                  double max) {
  std::ostringstream initial;
  initial << target;
  impl_->flags.add_options()(name,
                             po::value<double>()
                               ->value_name("X")
                               ->default_value(target, initial.str())
                               ->notifier([name, min, max, &target](double value) {
                                 if (!(value >= min && value <= max)) { // NaN too
                                   std::ostringstream range;
                                   range << "is out of range: " << min << " to " << max;
                                   std::ostringstream given;
                                   given << value;
                                   refuse(name, given.str(), range.str());
                                 }
                                 target = value;
                               }),
                             meaning);
  return *this;
}

bench_flags& bench_flags::integers(const char* name, std::vector<int>& target, const char* meaning,
                                   int min, int max) {
  std::vector<std::string> initial;
  for (int value : target)
    initial.push_back(std::to_string(value));
  impl_->flags.add_options()(name,
                             po::value<std::string>()
                               ->value_name("N,N,...")
                               ->default_value(join(initial))
                               ->notifier([name, min, max, &target](const std::string& text) {
                                 std::vector<int> values;
                                 for (const auto& item : split_commas(text)) {
                                   long long value = 0;
                                   try {
                                     value = boost::lexical_cast<long long>(item);
                                   } catch (const boost::bad_lexical_cast&) {
                                     refuse(name, text,
                                            "is invalid: '" + item + "' is not a whole number");
                                   }
                                   if (value < min || value > max)
                                     refuse(name, text,
                                            "is out of range: each from " + std::to_string(min)
                                              + " to " + std::to_string(max));
                                   values.push_back(static_cast<int>(value));
                                 }
                                 target = std::move(values);
                               }),
                             meaning);
  return *this;
}

bench_flags& bench_flags::names(const char* name, std::string& target,
                                const std::vector<std::string>& known, const char* meaning) {
  impl_->flags.add_options()(
    name,
    po::value<std::string>()
      ->value_name(join(known))
      ->default_value(target)
      ->notifier([name, known, &target](const std::string& text) {
        for (const auto& item : split_commas(text)) {
          if (std::find(known.begin(), known.end(), item) == known.end())
            refuse(name, text, "is invalid: '" + item + "' is not one of " + join(known));
        }
        target = text;
      }),
    meaning);
  return *this;
}

std::string bench_flags::usage() const {
  std::ostringstream text;
  text << "usage: " << impl_->program << " [flags]\n";
  if (!impl_->about.empty())
    text << impl_->about << "\n";
  text << "\n" << impl_->flags;
  return text.str();
}

std::optional<int> bench_flags::parse(int argc, const char* const* argv, std::ostream& out,
                                      std::ostream& err) {
  po::options_description all;
  all.add(impl_->flags);
  all.add_options()(stray_option, po::value<std::vector<std::string>>());
  po::positional_options_description positionals;
  positionals.add(stray_option, -1);
  // Long flags only, matched exactly: no abbreviations, no short options.
  const int style = po::command_line_style::allow_long | po::command_line_style::long_allow_adjacent
                    | po::command_line_style::long_allow_next;
  try {
    po::variables_map values;
    po::store(
      po::command_line_parser(argc, argv).options(all).positional(positionals).style(style).run(),
      values);
    if (values.count("help")) {
      out << usage();
      return 0;
    }
    if (values.count(stray_option))
      throw po::error("unexpected argument '"
                      + values[stray_option].as<std::vector<std::string>>()[0]
                      + "' (flags start with --)");
    po::notify(values);
  } catch (const std::exception& e) { // po::error, and anything a notifier lets out
    err << impl_->program << ": " << e.what() << "; see " << impl_->program << " --help\n";
    return usage_error_status;
  }
  return std::nullopt;
}

std::optional<int> bench_flags::parse(int argc, const char* const* argv) {
  return parse(argc, argv, std::cout, std::cerr);
}

} // namespace airlock::bench
