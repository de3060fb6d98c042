#pragma once
// A small Prometheus registry: counters, gauges and histograms with labels,
// rendered in the text exposition format 0.0.4 for GET /metrics. One registry
// per process, passed to whoever records (no global state).

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace airlock::metrics {

using metric_labels = std::vector<std::pair<std::string, std::string>>;

struct metrics_options {
  /// Label combinations per family; samples for a new combination past it are
  /// dropped (and counted in airlock_metrics_series_dropped_total), so a
  /// label fed by clients cannot grow memory without bound. Default: 10000.
  size_t series_per_family_max = 10'000;
  /// Families; undeclared names past it are dropped the same way. Default: 1000.
  size_t families_max = 1'000;
};

/// Prometheus text exposition, thread-safe, no global state.
class metrics_registry {
public:
  explicit metrics_registry(metrics_options options = {});

  /// Declares a family once (HELP/TYPE lines); type "counter", "gauge" or "histogram".
  /// A histogram without buckets gets Prometheus' default buckets (0.005 .. 10).
  /// Recording into a name never described declares it with an empty help and
  /// the type of the call (counter_add: counter, and so on).
  void describe(std::string name, std::string help, std::string type,
                std::vector<double> histogram_buckets = {});
  void counter_add(std::string_view name, const metric_labels& labels, double value = 1);
  /// Sets a counter to a total kept elsewhere (a component's own monotonic
  /// count, mirrored at scrape time).
  void counter_set(std::string_view name, const metric_labels& labels, double value);
  void gauge_set(std::string_view name, const metric_labels& labels, double value);
  void histogram_observe(std::string_view name, const metric_labels& labels, double value);
  /// The text format 0.0.4 (label values escaped), families sorted by name.
  std::string render() const;

  /// The current value of a counter or gauge series; 0 when it does not exist. For tests.
  double value(std::string_view name, const metric_labels& labels) const;

private:
  struct series {
    metric_labels labels;
    double value = 0;              ///< counter, gauge; histogram: the sum
    uint64_t count = 0;            ///< histogram observations
    std::vector<uint64_t> buckets; ///< histogram: per bucket, not cumulative
  };
  struct family {
    std::string help;
    std::string type;
    std::vector<double> bounds;              ///< histogram upper bounds, ascending
    std::map<std::string, series> by_labels; ///< key: rendered label set
  };
  /// The series for (name, labels), made as needed; nullptr when a limit drops it.
  series* find_series(std::string_view name, const metric_labels& labels,
                      std::string_view implied_type);

  const metrics_options options_;
  mutable std::mutex mutex_;
  std::map<std::string, family, std::less<>> families_;
  double dropped_ = 0;
};

/// `value` as Prometheus writes numbers: integers without a fraction, +Inf, -Inf, NaN.
std::string format_metric_value(double value);

/// A label value with backslash, double quote and newline escaped.
std::string escape_label_value(std::string_view value);

} // namespace airlock::metrics
