#include "bench/bench_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace ros2::bench {

void Reporter::Add(Record r) {
  if (json_) {
    nlohmann::json j;
    j["bench"] = r.bench;
    j["case"] = r.case_desc;
    j["metric"] = r.metric;
    j["value"] = r.value;
    if (r.baseline && r.baseline_value) {
      j["baseline"] = *r.baseline;
      j["baseline_value"] = *r.baseline_value;
      j["ratio"] = *r.baseline_value != 0 ? r.value / *r.baseline_value : 0.0;
    }
    std::printf("%s\n", j.dump().c_str());
    std::fflush(stdout);
  }
  records_.push_back(std::move(r));
}

void Reporter::Flush() {
  if (json_ || records_.empty()) return;
  size_t wcase = 4, wmetric = 6;
  for (const auto& r : records_) {
    wcase = std::max(wcase, r.case_desc.size());
    wmetric = std::max(wmetric, r.metric.size());
  }
  std::printf("%s\n", fmt::format("{:<8} {:<{}} {:<{}} {:>14} {:>20} {:>14} {:>7}", "bench", "case", wcase, "metric",
                                  wmetric, "value", "baseline", "baseline_value", "ratio")
                          .c_str());
  for (const auto& r : records_) {
    std::string base = r.baseline.value_or("-");
    std::string bval = r.baseline_value ? fmt::format("{:.2f}", *r.baseline_value) : "-";
    std::string ratio =
        (r.baseline_value && *r.baseline_value != 0) ? fmt::format("{:.2f}", r.value / *r.baseline_value) : "-";
    std::printf("%s\n", fmt::format("{:<8} {:<{}} {:<{}} {:>14.2f} {:>20} {:>14} {:>7}", r.bench, r.case_desc, wcase,
                                    r.metric, wmetric, r.value, base, bval, ratio)
                            .c_str());
  }
  records_.clear();
}

std::string CaseString(const std::vector<std::pair<std::string, std::string>>& kv) {
  std::string out;
  for (const auto& [k, v] : kv) {
    if (!out.empty()) out += ' ';
    out += k + "=" + v;
  }
  return out;
}

double Percentile(std::vector<double> sample, double pct) {
  if (sample.empty()) return 0;
  std::sort(sample.begin(), sample.end());
  double rank = std::ceil(pct / 100.0 * static_cast<double>(sample.size()));
  size_t idx = rank < 1 ? 0 : static_cast<size_t>(rank) - 1;
  return sample[std::min(idx, sample.size() - 1)];
}

std::vector<Suite>& Suites() {
  static std::vector<Suite> suites;
  return suites;
}

bool RegisterSuite(Suite suite) {
  Suites().push_back(std::move(suite));
  return true;
}

}  // namespace ros2::bench
