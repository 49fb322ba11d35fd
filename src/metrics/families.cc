#include "metrics/families.h"

#include <limits>

namespace ros2::metrics {
namespace {

prometheus::MetricFamily Family(std::string name, std::string help, prometheus::MetricType type) {
  prometheus::MetricFamily f;
  f.name = std::move(name);
  f.help = std::move(help);
  f.type = type;
  return f;
}

prometheus::ClientMetric& NewSample(prometheus::MetricFamily* family, const Labels& labels) {
  prometheus::ClientMetric& m = family->metric.emplace_back();
  for (const auto& [name, value] : labels) m.label.push_back({name, value});
  return m;
}

}  // namespace

prometheus::MetricFamily CounterFamily(std::string name, std::string help) {
  return Family(std::move(name), std::move(help), prometheus::MetricType::Counter);
}

prometheus::MetricFamily GaugeFamily(std::string name, std::string help) {
  return Family(std::move(name), std::move(help), prometheus::MetricType::Gauge);
}

prometheus::MetricFamily HistogramFamily(std::string name, std::string help) {
  return Family(std::move(name), std::move(help), prometheus::MetricType::Histogram);
}

void AddCounter(prometheus::MetricFamily* family, const Labels& labels, double value) {
  NewSample(family, labels).counter.value = value;
}

void AddGauge(prometheus::MetricFamily* family, const Labels& labels, double value) {
  NewSample(family, labels).gauge.value = value;
}

void AddHistogram(prometheus::MetricFamily* family, const Labels& labels, const LatencyHistogram::Snapshot& snapshot) {
  prometheus::ClientMetric& m = NewSample(family, labels);
  uint64_t cumulative = 0;
  for (int i = 0; i < LatencyHistogram::kBuckets; ++i) {
    cumulative += snapshot.buckets[static_cast<size_t>(i)];
    const double bound = i < LatencyHistogram::kFiniteBuckets ? LatencyHistogram::UpperBoundSeconds(i)
                                                              : std::numeric_limits<double>::infinity();
    m.histogram.bucket.push_back({cumulative, bound});
  }
  m.histogram.sample_count = cumulative;
  m.histogram.sample_sum = static_cast<double>(snapshot.sum_nanos) * 1e-9;
}

}  // namespace ros2::metrics
