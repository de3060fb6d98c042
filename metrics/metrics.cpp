#include "metrics/metrics.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

namespace airlock::metrics {

namespace {

constexpr std::string_view dropped_family = "airlock_metrics_series_dropped_total";

const std::vector<double>& default_buckets() {
  static const std::vector<double> buckets{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
  return buckets;
}

std::string escape_help(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string render_labels(const metric_labels& labels, std::string_view extra_name = {},
                          std::string_view extra_value = {}) {
  if (labels.empty() && extra_name.empty())
    return {};
  std::string out = "{";
  bool first = true;
  auto add = [&out, &first](std::string_view name, std::string_view value) {
    if (!first)
      out += ',';
    first = false;
    out.append(name).append("=\"").append(escape_label_value(value)).append("\"");
  };
  for (const auto& [name, value] : labels)
    add(name, value);
  if (!extra_name.empty())
    add(extra_name, extra_value);
  out += '}';
  return out;
}

} // namespace

std::string format_metric_value(double value) {
  if (std::isnan(value))
    return "NaN";
  if (std::isinf(value))
    return value > 0 ? "+Inf" : "-Inf";
  char buffer[64];
  // Shortest text that reads back as the same double; integers have no fraction.
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, value);
  if (ec != std::errc{})
    return "NaN";
  return std::string(buffer, end);
}

std::string escape_label_value(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

metrics_registry::metrics_registry(metrics_options options) : options_(options) {
  families_[std::string(dropped_family)] =
    family{"Samples dropped because a metric family reached its series or family limit.",
           "counter",
           {},
           {}};
}

void metrics_registry::describe(std::string name, std::string help, std::string type,
                                std::vector<double> histogram_buckets) {
  std::lock_guard<std::mutex> guard(mutex_);
  auto found = families_.find(name);
  if (found == families_.end()) {
    if (families_.size() >= options_.families_max + 1)
      return;
    found = families_.emplace(std::move(name), family{}).first;
  }
  family& entry = found->second;
  entry.help = std::move(help);
  if (entry.type != type) {
    entry.type = std::move(type);
    entry.by_labels.clear(); // samples of another type cannot be kept
  }
  if (entry.type == "histogram") {
    if (histogram_buckets.empty())
      histogram_buckets = default_buckets();
    std::sort(histogram_buckets.begin(), histogram_buckets.end());
    if (entry.bounds != histogram_buckets) {
      entry.bounds = std::move(histogram_buckets);
      entry.by_labels.clear();
    }
  }
}

metrics_registry::series* metrics_registry::find_series(std::string_view name,
                                                        const metric_labels& labels,
                                                        std::string_view implied_type) {
  auto found = families_.find(name);
  if (found == families_.end()) {
    if (families_.size() >= options_.families_max + 1) {
      dropped_ += 1;
      return nullptr;
    }
    family fresh;
    fresh.type = std::string(implied_type);
    if (implied_type == "histogram")
      fresh.bounds = default_buckets();
    found = families_.emplace(std::string(name), std::move(fresh)).first;
  }
  family& entry = found->second;
  std::string key = render_labels(labels);
  auto series_it = entry.by_labels.find(key);
  if (series_it != entry.by_labels.end())
    return &series_it->second;
  if (entry.by_labels.size() >= options_.series_per_family_max) {
    dropped_ += 1;
    return nullptr;
  }
  series fresh;
  fresh.labels = labels;
  fresh.buckets.assign(entry.bounds.size(), 0);
  return &entry.by_labels.emplace(std::move(key), std::move(fresh)).first->second;
}

void metrics_registry::counter_add(std::string_view name, const metric_labels& labels,
                                   double value) {
  std::lock_guard<std::mutex> guard(mutex_);
  if (auto* entry = find_series(name, labels, "counter"))
    entry->value += value;
}

void metrics_registry::counter_set(std::string_view name, const metric_labels& labels,
                                   double value) {
  std::lock_guard<std::mutex> guard(mutex_);
  if (auto* entry = find_series(name, labels, "counter"))
    entry->value = value;
}

void metrics_registry::gauge_set(std::string_view name, const metric_labels& labels, double value) {
  std::lock_guard<std::mutex> guard(mutex_);
  if (auto* entry = find_series(name, labels, "gauge"))
    entry->value = value;
}

void metrics_registry::histogram_observe(std::string_view name, const metric_labels& labels,
                                         double value) {
  std::lock_guard<std::mutex> guard(mutex_);
  auto* entry = find_series(name, labels, "histogram");
  if (entry == nullptr)
    return;
  const auto& bounds = families_.find(name)->second.bounds;
  auto slot = std::lower_bound(bounds.begin(), bounds.end(), value) - bounds.begin();
  if (static_cast<size_t>(slot) < entry->buckets.size())
    ++entry->buckets[static_cast<size_t>(slot)];
  entry->value += value;
  ++entry->count;
}

double metrics_registry::value(std::string_view name, const metric_labels& labels) const {
  std::lock_guard<std::mutex> guard(mutex_);
  if (name == dropped_family)
    return dropped_;
  auto found = families_.find(name);
  if (found == families_.end())
    return 0;
  auto series_it = found->second.by_labels.find(render_labels(labels));
  return series_it == found->second.by_labels.end() ? 0 : series_it->second.value;
}

std::string metrics_registry::render() const {
  std::lock_guard<std::mutex> guard(mutex_);
  std::string out;
  for (const auto& [name, entry] : families_) {
    out.append("# HELP ").append(name).append(" ").append(escape_help(entry.help)).append("\n");
    out.append("# TYPE ").append(name).append(" ").append(entry.type).append("\n");
    if (name == dropped_family) {
      out.append(name).append(" ").append(format_metric_value(dropped_)).append("\n");
      continue;
    }
    for (const auto& [key, sample] : entry.by_labels) {
      if (entry.type != "histogram") {
        out.append(name).append(key).append(" ").append(format_metric_value(sample.value));
        out += '\n';
        continue;
      }
      uint64_t cumulative = 0;
      for (size_t i = 0; i < entry.bounds.size(); ++i) {
        cumulative += sample.buckets[i];
        out.append(name)
          .append("_bucket")
          .append(render_labels(sample.labels, "le", format_metric_value(entry.bounds[i])))
          .append(" ")
          .append(std::to_string(cumulative))
          .append("\n");
      }
      out.append(name)
        .append("_bucket")
        .append(render_labels(sample.labels, "le", "+Inf"))
        .append(" ")
        .append(std::to_string(sample.count))
        .append("\n");
      out.append(name)
        .append("_sum")
        .append(key)
        .append(" ")
        .append(format_metric_value(sample.value))
        .append("\n");
      out.append(name)
        .append("_count")
        .append(key)
        .append(" ")
        .append(std::to_string(sample.count))
        .append("\n");
    }
  }
  return out;
}

} // namespace airlock::metrics
