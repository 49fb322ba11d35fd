// The metrics module without a cluster: bucket choice, the exposition a real
// exporter serves over HTTP (read back with HttpGet and ParseExposition), the
// quantile estimate, and the errors of bad listen addresses.
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "metrics/exporter.h"
#include "metrics/families.h"
#include "metrics/local_metrics.h"
#include "metrics/scrape.h"
#include "testing/status_assert.h"

namespace ros2::metrics {
namespace {

TEST(LatencyHistogram, BucketsArePowersOfTwoFrom4096ns) {
  EXPECT_EQ(LatencyHistogram::BucketOf(0), 0);
  EXPECT_EQ(LatencyHistogram::BucketOf(4096), 0);
  EXPECT_EQ(LatencyHistogram::BucketOf(4097), 1);
  EXPECT_EQ(LatencyHistogram::BucketOf(8192), 1);
  EXPECT_EQ(LatencyHistogram::BucketOf(8193), 2);
  EXPECT_EQ(LatencyHistogram::BucketOf(uint64_t{1} << 32), 20);
  EXPECT_EQ(LatencyHistogram::BucketOf((uint64_t{1} << 32) + 1), LatencyHistogram::kFiniteBuckets);
  EXPECT_DOUBLE_EQ(LatencyHistogram::UpperBoundSeconds(0), 4096e-9);
}

TEST(HistogramQuantile, InterpolatesWithinTheBucket) {
  const double inf = std::numeric_limits<double>::infinity();
  // 10 samples at most 1, 10 more between 1 and 2.
  std::vector<std::pair<double, double>> h{{1, 10}, {2, 20}, {inf, 20}};
  EXPECT_DOUBLE_EQ(HistogramQuantile(0.5, h), 1.0);
  EXPECT_DOUBLE_EQ(HistogramQuantile(0.75, h), 1.5);
  EXPECT_DOUBLE_EQ(HistogramQuantile(0.99, {{1, 0}, {inf, 0}}), 0.0);
  EXPECT_DOUBLE_EQ(HistogramQuantile(0.99, {{1, 1}, {inf, 5}}), 1.0);  // in +Inf: its lower bound
}

TEST(CheckListenAddress, NamesTheKeyAndTheBadValue) {
  ROS2_ASSERT_OK(CheckListenAddress("127.0.0.1:9464", "metrics.listen"));
  ROS2_ASSERT_OK(CheckListenAddress("[::1]:0", "metrics.listen"));
  for (const char* bad : {"127.0.0.1", "localhost:", ":9464", "127.0.0.1:99999", "127.0.0.1:http"}) {
    Status st = CheckListenAddress(bad, "metrics.listen");
    EXPECT_EQ(st.code(), Status::Code::kInvalidArgument) << bad;
    EXPECT_NE(st.message().find("metrics.listen"), std::string::npos) << st.ToString();
    EXPECT_NE(st.message().find(bad), std::string::npos) << st.ToString();
  }
}

TEST(MetricsExporter, ServesTheCollectedFamiliesOnAnEphemeralPort) {
  LocalCounter ops;
  LatencyHistogram latency;
  ops.Add(3);
  latency.Observe(3000);       // bucket 0
  latency.Observe(1'000'000);  // 1 ms
  auto exporter = MetricsExporter::Start("127.0.0.1:0", [&] {
    auto counter = CounterFamily("ros2_test_ops_total", "Operations.");
    AddCounter(&counter, {{"kind", "update"}}, static_cast<double>(ops.Read()));
    auto hist = HistogramFamily("ros2_test_latency_seconds", "Latency.");
    LatencyHistogram::Snapshot s;
    latency.AddTo(&s);
    AddHistogram(&hist, {{"kind", "update"}}, s);
    return std::vector<prometheus::MetricFamily>{counter, hist};
  });
  ROS2_ASSERT_OK(exporter);
  EXPECT_NE((*exporter)->address(), "127.0.0.1:0");
  auto body = HttpGet((*exporter)->address(), "/metrics");
  ROS2_ASSERT_OK(body);
  auto samples = ParseExposition(*body);
  ROS2_ASSERT_OK(samples);
  double counted = -1, count = -1, le_4us = -1;
  for (const Sample& s : *samples) {
    if (s.name == "ros2_test_ops_total" && s.Label("kind") == "update") counted = s.value;
    if (s.name == "ros2_test_latency_seconds_count") count = s.value;
    if (s.name == "ros2_test_latency_seconds_bucket" && std::stod(s.Label("le")) < 5e-6) le_4us = s.value;
  }
  EXPECT_EQ(counted, 3);
  EXPECT_EQ(count, 2);
  EXPECT_EQ(le_4us, 1);
}

TEST(MetricsExporter, AnAddressInUseIsAClearError) {
  auto first = MetricsExporter::Start("127.0.0.1:0", [] { return std::vector<prometheus::MetricFamily>{}; });
  ROS2_ASSERT_OK(first);
  auto second = MetricsExporter::Start((*first)->address(), [] { return std::vector<prometheus::MetricFamily>{}; });
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find((*first)->address()), std::string::npos) << second.status().ToString();
}

TEST(HttpGet, AnEndpointNobodyListensOnIsDisconnected) {
  auto first = MetricsExporter::Start("127.0.0.1:0", [] { return std::vector<prometheus::MetricFamily>{}; });
  ROS2_ASSERT_OK(first);
  const std::string address = (*first)->address();
  first->reset();
  auto body = HttpGet(address, "/metrics");
  ASSERT_FALSE(body.ok());
  EXPECT_EQ(body.status().code(), Status::Code::kDisconnected) << body.status().ToString();
  EXPECT_NE(body.status().message().find(address), std::string::npos);
}

}  // namespace
}  // namespace ros2::metrics
