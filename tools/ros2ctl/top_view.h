// The figures of `ros2ctl top` (docs/ros2ctl.md): two scrapes of an engine's
// metrics endpoint, and the rates and latency quantiles between them, per
// target and per engine, as a table or as one JSON object per interval.
//
// Single-threaded helper of ros2ctl.
#pragma once

#include <array>
#include <chrono>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace ros2::ctl {

// One target's counters as one scrape saw them.
struct TargetCounters {
  std::array<double, 4> ops{};  // update, fetch, punch, enumerate
  double write_bytes = 0;
  double read_bytes = 0;
  double in_flight = 0;
  std::map<double, double> buckets;  // latency `le` (seconds) -> cumulative count, all kinds
};

struct EngineScrape {
  std::string endpoint;
  std::chrono::steady_clock::time_point at;
  std::map<std::pair<std::string, int>, TargetCounters> targets;  // (engine id, target index)
};

// GETs http://endpoint/metrics and reads the ros2_engine_* families. An error
// names the endpoint (unreachable, not an engine's endpoint).
Result<EngineScrape> ScrapeEngine(const std::string& endpoint);

// A row of the view: one target, or an engine's total (target -1).
struct TopRow {
  std::string engine;
  std::string endpoint;
  int target = -1;
  std::array<double, 4> ops_per_s{};
  double iops = 0;  // all kinds
  double write_bytes_per_s = 0;
  double read_bytes_per_s = 0;
  double p50_seconds = 0;
  double p99_seconds = 0;
  double in_flight = 0;
};

// The rows between two scrapes of one endpoint: each target, then the engine's total.
std::vector<TopRow> TopRows(const EngineScrape& before, const EngineScrape& after);

// The table (iostat-like, one line a row) and the JSON object of one interval.
std::string FormatTopTable(const std::vector<TopRow>& rows, double interval_s);
nlohmann::json TopJson(const std::vector<TopRow>& rows, double interval_s);

}  // namespace ros2::ctl
