// Reading a Prometheus endpoint: a plain HTTP/1.0 GET and a parser of the text
// exposition format, for `ros2ctl top` and the metrics tests (which also ask a
// Prometheus server's HTTP API with HttpGet).
//
// Plain functions, safe from any thread; HttpGet blocks for at most `timeout`.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace ros2::metrics {

// GET http://<host:port><path>; the body of a 200 answer. Disconnected naming
// the address when it cannot connect or times out; IOError for another status.
Result<std::string> HttpGet(std::string_view host_port, std::string_view path,
                            std::chrono::milliseconds timeout = std::chrono::milliseconds(2000));

// One sample line: `name{label="value",...} value`.
struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
  // The label's value, or "" when the sample has none of that name.
  const std::string& Label(const std::string& key) const;
};

// Every sample of a text exposition (comments and blank lines skipped);
// InvalidArgument naming the line when one does not parse.
Result<std::vector<Sample>> ParseExposition(std::string_view text);

// The sum of the samples named `name` whose label `label` is `value` (every
// sample of that name when `label` is empty).
double SumOf(const std::vector<Sample>& samples, std::string_view name, const std::string& label = {},
             std::string_view value = {});

// GET host_port's /metrics and SumOf its samples: what a test reads of a
// counter across an engine's targets.
Result<double> ScrapeSum(std::string_view host_port, std::string_view name, const std::string& label = {},
                         std::string_view value = {});

// The q-quantile (0..1) of a histogram given as cumulative (upper bound,
// count) pairs sorted by bound, the last one +Inf: linear within the bucket,
// as PromQL's histogram_quantile. 0 when the histogram is empty.
double HistogramQuantile(double q, const std::vector<std::pair<double, double>>& cumulative);

}  // namespace ros2::metrics
