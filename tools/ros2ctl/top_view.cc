#include "top_view.h"

#include <algorithm>
#include <ctime>
#include <limits>

#include <fmt/format.h>

#include "metrics/scrape.h"

namespace ros2::ctl {
namespace {

constexpr std::array<const char*, 4> kKinds{"update", "fetch", "punch", "enumerate"};

int KindIndex(const std::string& kind) {
  for (size_t i = 0; i < kKinds.size(); ++i)
    if (kind == kKinds[i]) return static_cast<int>(i);
  return -1;
}

// Adds one sample to its target's counters; false when it is not a family top reads.
bool Absorb(const metrics::Sample& s, TargetCounters* t) {
  const int kind = KindIndex(s.Label("kind"));
  if (s.name == "ros2_engine_ops_total" && kind >= 0) {
    t->ops[static_cast<size_t>(kind)] += s.value;
  } else if (s.name == "ros2_engine_io_bytes_total") {
    (kind == 0 ? t->write_bytes : t->read_bytes) += s.value;
  } else if (s.name == "ros2_engine_requests_in_flight") {
    t->in_flight += s.value;
  } else if (s.name == "ros2_engine_op_latency_seconds_bucket") {
    const std::string& le = s.Label("le");
    t->buckets[le == "+Inf" ? std::numeric_limits<double>::infinity() : std::stod(le)] += s.value;
  } else {
    return false;
  }
  return true;
}

void Accumulate(const TopRow& from, TopRow* into) {
  for (size_t k = 0; k < 4; ++k) into->ops_per_s[k] += from.ops_per_s[k];
  into->iops += from.iops;
  into->write_bytes_per_s += from.write_bytes_per_s;
  into->read_bytes_per_s += from.read_bytes_per_s;
  into->in_flight += from.in_flight;
}

std::vector<std::pair<double, double>> Delta(const std::map<double, double>& before,
                                             const std::map<double, double>& after) {
  std::vector<std::pair<double, double>> d;
  for (const auto& [le, count] : after) {
    auto it = before.find(le);
    d.emplace_back(le, std::max(0.0, count - (it == before.end() ? 0.0 : it->second)));
  }
  return d;
}

std::string Micros(double seconds) {
  return seconds <= 0 ? std::string("-") : fmt::format("{:.0f}", seconds * 1e6);
}

}  // namespace

Result<EngineScrape> ScrapeEngine(const std::string& endpoint) {
  EngineScrape scrape;
  scrape.endpoint = endpoint;
  ROS2_ASSIGN_OR_RETURN(std::string body, metrics::HttpGet(endpoint, "/metrics"));
  scrape.at = std::chrono::steady_clock::now();
  auto samples = metrics::ParseExposition(body);
  if (!samples.ok()) return samples.status().WithContext(fmt::format("http://{}/metrics", endpoint));
  for (const metrics::Sample& s : *samples) {
    if (s.Label("engine").empty() || s.Label("target").empty()) continue;
    TargetCounters& t = scrape.targets[{s.Label("engine"), std::stoi(s.Label("target"))}];
    Absorb(s, &t);
  }
  if (scrape.targets.empty()) {
    return Status::InvalidArgument(
        fmt::format("http://{}/metrics: no ros2_engine_* target metrics there (not an engine's endpoint?)", endpoint));
  }
  return scrape;
}

std::vector<TopRow> TopRows(const EngineScrape& before, const EngineScrape& after) {
  const double dt = std::max(1e-3, std::chrono::duration<double>(after.at - before.at).count());
  std::vector<TopRow> rows;
  std::map<std::string, std::map<double, double>> engine_buckets_before, engine_buckets_after;
  std::map<std::string, TopRow> totals;
  for (const auto& [key, now] : after.targets) {
    const auto it = before.targets.find(key);
    const TargetCounters then = it == before.targets.end() ? TargetCounters{} : it->second;
    TopRow r;
    r.engine = key.first;
    r.endpoint = after.endpoint;
    r.target = key.second;
    for (size_t k = 0; k < 4; ++k) {
      r.ops_per_s[k] = std::max(0.0, now.ops[k] - then.ops[k]) / dt;
      r.iops += r.ops_per_s[k];
    }
    r.write_bytes_per_s = std::max(0.0, now.write_bytes - then.write_bytes) / dt;
    r.read_bytes_per_s = std::max(0.0, now.read_bytes - then.read_bytes) / dt;
    r.in_flight = now.in_flight;
    const auto delta = Delta(then.buckets, now.buckets);
    r.p50_seconds = metrics::HistogramQuantile(0.5, delta);
    r.p99_seconds = metrics::HistogramQuantile(0.99, delta);
    rows.push_back(r);
    TopRow& total = totals[key.first];
    total.engine = key.first;
    total.endpoint = after.endpoint;
    Accumulate(r, &total);
    for (const auto& [le, c] : then.buckets) engine_buckets_before[key.first][le] += c;
    for (const auto& [le, c] : now.buckets) engine_buckets_after[key.first][le] += c;
  }
  for (auto& [engine, total] : totals) {
    const auto delta = Delta(engine_buckets_before[engine], engine_buckets_after[engine]);
    total.p50_seconds = metrics::HistogramQuantile(0.5, delta);
    total.p99_seconds = metrics::HistogramQuantile(0.99, delta);
    rows.push_back(total);
  }
  return rows;
}

std::string FormatTopTable(const std::vector<TopRow>& rows, double interval_s) {
  const std::time_t now = std::time(nullptr);
  char when[32];
  std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", std::localtime(&now));
  std::string out = fmt::format("ros2ctl top  {}  interval {:.1f}s\n", when, interval_s);
  out +=
      fmt::format("{:<10} {:>6} {:>9} {:>8} {:>8} {:>7} {:>7} {:>10} {:>10} {:>8} {:>8} {:>6}\n", "ENGINE", "TARGET",
                  "IOPS", "UPD/s", "FETCH/s", "PUNCH/s", "ENUM/s", "WR_MiB/s", "RD_MiB/s", "P50_us", "P99_us", "INFL");
  for (const TopRow& r : rows) {
    out += fmt::format(
        "{:<10} {:>6} {:>9.0f} {:>8.0f} {:>8.0f} {:>7.0f} {:>7.0f} {:>10.2f} {:>10.2f} {:>8} {:>8} {:>6.0f}\n",
        r.engine.substr(0, 8), r.target < 0 ? std::string("all") : std::to_string(r.target), r.iops, r.ops_per_s[0],
        r.ops_per_s[1], r.ops_per_s[2], r.ops_per_s[3], r.write_bytes_per_s / (1 << 20), r.read_bytes_per_s / (1 << 20),
        Micros(r.p50_seconds), Micros(r.p99_seconds), r.in_flight);
  }
  return out;
}

nlohmann::json TopJson(const std::vector<TopRow>& rows, double interval_s) {
  nlohmann::json targets = nlohmann::json::array();
  nlohmann::json engines = nlohmann::json::array();
  for (const TopRow& r : rows) {
    nlohmann::json ops = nlohmann::json::object();
    for (size_t k = 0; k < 4; ++k) ops[kKinds[k]] = r.ops_per_s[k];
    nlohmann::json j = {{"engine", r.engine},
                        {"endpoint", r.endpoint},
                        {"iops", r.iops},
                        {"ops_per_s", ops},
                        {"write_bytes_per_s", r.write_bytes_per_s},
                        {"read_bytes_per_s", r.read_bytes_per_s},
                        {"p50_seconds", r.p50_seconds},
                        {"p99_seconds", r.p99_seconds},
                        {"in_flight", r.in_flight}};
    if (r.target >= 0) {
      j["target"] = r.target;
      targets.push_back(j);
    } else {
      engines.push_back(j);
    }
  }
  return {{"time", static_cast<int64_t>(std::time(nullptr))},
          {"interval_seconds", interval_s},
          {"engines", engines},
          {"targets", targets}};
}

}  // namespace ros2::ctl
