// Event formatting, the bounded event queue (driven by hand, as the
// connection drives it) and the Prometheus text format.

#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "gateway/sse.hpp"
#include "metrics/metrics.hpp"

namespace airlock::gateway {
namespace {

TEST(sse, formats_event_id_and_one_data_line_per_line) {
  EXPECT_EQ(format_sse_event("state", "{\"a\":1}", "42"),
            "event: state\nid: 42\ndata: {\"a\":1}\n\n");
  EXPECT_EQ(format_sse_event("stdout", "one\ntwo\r\nthree\rfour", ""),
            "event: stdout\ndata: one\ndata: two\ndata: three\ndata: four\n\n");
  EXPECT_EQ(format_sse_event("x", "", ""), "event: x\ndata: \n\n");
  // A line break in the name or id cannot start a forged field.
  EXPECT_EQ(format_sse_event("a\nid: 9", "d", "1\n2"), "event: aid: 9\nid: 12\ndata: d\n\n");
}

TEST(sse, a_queue_over_its_bound_drops_the_client_with_an_error_event) {
  sse_options options;
  options.queue_events_max = 3;
  sse_stream stream(options, {});
  std::vector<std::string> reasons;
  stream.on_close([&reasons](std::string_view why) { reasons.emplace_back(why); });
  EXPECT_TRUE(stream.send("e", "1"));
  auto first = stream.next_step(); // one event in flight
  EXPECT_EQ(first.events, 1u);
  EXPECT_TRUE(stream.send("e", "2"));
  EXPECT_TRUE(stream.send("e", "3"));
  EXPECT_FALSE(stream.send("e", "4")); // 1 in flight + 2 queued + 1 > 3
  EXPECT_TRUE(stream.closed());
  EXPECT_FALSE(stream.send("e", "5"));
  stream.write_done();
  auto step = stream.next_step();
  EXPECT_TRUE(step.finish_slow_consumer);
  EXPECT_NE(step.bytes.find("event: error\ndata: {\"code\":\"slow_consumer\""), std::string::npos);
  EXPECT_EQ(step.bytes.find("data: 2"), std::string::npos); // the backlog is dropped
  stream.finish("slow_consumer");
  stream.write_done();
  auto last = stream.next_step();
  EXPECT_TRUE(last.end);
  ASSERT_EQ(reasons.size(), 1u);
  EXPECT_EQ(reasons[0], "slow_consumer");
}

TEST(sse, a_byte_bound_drops_the_client_too) {
  sse_options options;
  options.queue_bytes_max = 100;
  sse_stream stream(options, {});
  EXPECT_TRUE(stream.send("e", std::string(50, 'x')));
  EXPECT_FALSE(stream.send("e", std::string(50, 'x')));
  EXPECT_TRUE(stream.closed());
}

TEST(sse, drained_fires_when_the_queue_empties_and_close_ends_after_the_queue) {
  sse_stream stream(sse_options{}, {});
  int drained = 0;
  stream.send("e", "1");
  stream.when_drained([&drained] { ++drained; });
  auto step = stream.next_step();
  EXPECT_FALSE(step.bytes.empty());
  EXPECT_FALSE(step.drained);
  stream.write_done();
  step = stream.next_step();
  ASSERT_TRUE(step.drained);
  step.drained();
  EXPECT_EQ(drained, 1);
  EXPECT_FALSE(stream.next_step().drained); // once

  std::string reason;
  stream.on_close([&reason](std::string_view why) { reason = why; });
  stream.send("e", "2");
  stream.close();
  EXPECT_FALSE(stream.send("e", "3"));
  step = stream.next_step();
  EXPECT_NE(step.bytes.find("data: 2"), std::string::npos);
  EXPECT_FALSE(step.end);
  stream.write_done();
  step = stream.next_step();
  EXPECT_TRUE(step.end);
  EXPECT_EQ(step.end_reason, "closed");
  stream.finish(step.end_reason);
  EXPECT_EQ(reason, "closed");
  // Set after the end: runs at once.
  std::string late;
  stream.on_close([&late](std::string_view why) { late = why; });
  EXPECT_EQ(late, "closed");
}

TEST(metrics, renders_families_sorted_with_help_type_and_escaped_labels) {
  metrics::metrics_registry metrics;
  metrics.describe("b_total", "Things.\nCounted \\ here.", "counter");
  metrics.describe("a_gauge", "A gauge.", "gauge");
  metrics.counter_add("b_total", {{"path", "a\"b\\c\nd"}});
  metrics.counter_add("b_total", {{"path", "a\"b\\c\nd"}}, 2.5);
  metrics.gauge_set("a_gauge", {}, 7);
  metrics.gauge_set("a_gauge", {}, 3);
  std::string text = metrics.render();
  EXPECT_NE(text.find("# HELP a_gauge A gauge.\n# TYPE a_gauge gauge\na_gauge 3\n"),
            std::string::npos)
    << text;
  EXPECT_NE(text.find("# HELP b_total Things.\\nCounted \\\\ here.\n# TYPE b_total counter\n"
                      "b_total{path=\"a\\\"b\\\\c\\nd\"} 3.5\n"),
            std::string::npos)
    << text;
  EXPECT_LT(text.find("a_gauge"), text.find("b_total"));
  EXPECT_EQ(metrics.value("b_total", {{"path", "a\"b\\c\nd"}}), 3.5);
}

TEST(metrics, histograms_have_cumulative_buckets_sum_and_count) {
  metrics::metrics_registry metrics;
  metrics.describe("d_seconds", "Durations.", "histogram", {0.1, 1});
  metrics.histogram_observe("d_seconds", {{"route", "/x"}}, 0.05);
  metrics.histogram_observe("d_seconds", {{"route", "/x"}}, 0.5);
  metrics.histogram_observe("d_seconds", {{"route", "/x"}}, 5);
  std::string text = metrics.render();
  EXPECT_NE(text.find("d_seconds_bucket{route=\"/x\",le=\"0.1\"} 1\n"
                      "d_seconds_bucket{route=\"/x\",le=\"1\"} 2\n"
                      "d_seconds_bucket{route=\"/x\",le=\"+Inf\"} 3\n"
                      "d_seconds_sum{route=\"/x\"} 5.55\n"
                      "d_seconds_count{route=\"/x\"} 3\n"),
            std::string::npos)
    << text;
}

TEST(metrics, formats_special_values_and_bounds_series_per_family) {
  EXPECT_EQ(metrics::format_metric_value(1), "1");
  EXPECT_EQ(metrics::format_metric_value(0.25), "0.25");
  EXPECT_EQ(metrics::format_metric_value(1e21), "1e+21");
  EXPECT_EQ(metrics::format_metric_value(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(metrics::format_metric_value(-std::numeric_limits<double>::infinity()), "-Inf");
  metrics::metrics_options options;
  options.series_per_family_max = 2;
  metrics::metrics_registry metrics(options);
  for (int i = 0; i < 5; ++i)
    metrics.counter_add("c_total", {{"n", std::to_string(i)}});
  EXPECT_EQ(metrics.value("c_total", {{"n", "1"}}), 1);
  EXPECT_EQ(metrics.value("c_total", {{"n", "4"}}), 0);
  EXPECT_EQ(metrics.value("airlock_metrics_series_dropped_total", {}), 3);
  EXPECT_NE(metrics.render().find("airlock_metrics_series_dropped_total 3\n"), std::string::npos);
}

} // namespace
} // namespace airlock::gateway
