// Building Prometheus metric families at scrape time.
//
// A Collectable (exporter.h) returns the families its process has right now:
// these helpers make one family of a type and add a sample (labels and a
// value, or a LatencyHistogram snapshot) to it. Values are read by the caller
// (LocalCounter::Read, LatencyHistogram::AddTo) and summed over threads before
// they get here. Plain functions, safe from any thread.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <prometheus/metric_family.h>

#include "metrics/local_metrics.h"

namespace ros2::metrics {

using Labels = std::vector<std::pair<std::string, std::string>>;

// An empty family: `name` follows Prometheus conventions (ros2_ prefix, the unit
// in the name, _total on counters).
prometheus::MetricFamily CounterFamily(std::string name, std::string help);
prometheus::MetricFamily GaugeFamily(std::string name, std::string help);
prometheus::MetricFamily HistogramFamily(std::string name, std::string help);

// Adds one sample to a counter, gauge or histogram family.
void AddCounter(prometheus::MetricFamily* family, const Labels& labels, double value);
void AddGauge(prometheus::MetricFamily* family, const Labels& labels, double value);
// A latency histogram in seconds: buckets `le` 4.096e-06 .. 4.294967296 and +Inf.
void AddHistogram(prometheus::MetricFamily* family, const Labels& labels, const LatencyHistogram::Snapshot& snapshot);

}  // namespace ros2::metrics
