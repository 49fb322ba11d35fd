#include "bench/stages_bench_util.h"

#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "metrics/scrape.h"

namespace ros2::bench {

Result<std::string> EngineMetricsEndpoint(const std::string& ready_file) {
  std::ifstream in(ready_file);
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with("metrics=")) return line.substr(8);
  }
  return Status::NotFound(fmt::format("{}: no metrics= line (is the engine's metrics endpoint on?)", ready_file));
}

Result<StageSnapshot> ScrapeStages(const std::string& endpoint) {
  ROS2_ASSIGN_OR_RETURN(std::string body, metrics::HttpGet(endpoint, "/metrics"));
  ROS2_ASSIGN_OR_RETURN(auto samples, metrics::ParseExposition(body));
  StageSnapshot snap;
  snap.at = std::chrono::steady_clock::now();
  bool any = false;
  for (const auto& s : samples) {
    if (s.name == "ros2_engine_device_inflight_seconds_total") {
      snap.device_inflight_seconds += s.value;
      continue;
    }
    const bool seconds = s.name == "ros2_engine_io_stage_seconds_total";
    if (!seconds && s.name != "ros2_engine_io_stage_reads_total") continue;
    for (size_t i = 0; i < io_stages::kStages; ++i) {
      if (s.Label("stage") != io_stages::kStageNames[i]) continue;
      (seconds ? snap.seconds : snap.reads)[i] += s.value;
      any = true;
    }
  }
  if (!any) {
    return Status::NotSupported(
        fmt::format("{}: no ros2_engine_io_stage_* counters (start the engine with ROS2_ENGINE_IO_STAGES=1)", endpoint));
  }
  return snap;
}

std::string FormatStages(const StageSnapshot& before, const StageSnapshot& after, int client_in_flight,
                         double io_seconds) {
  std::ostringstream out;
  for (size_t i = 0; i < io_stages::kStages; ++i) {
    const double reads = after.reads[i] - before.reads[i];
    const double us = reads > 0 ? (after.seconds[i] - before.seconds[i]) * 1e6 / reads : 0;
    out << fmt::format("  stage {:<7} {:9.1f} us  ({:.0f} reads)\n", io_stages::kStageNames[i], us, reads);
  }
  const double wall =
      io_seconds > 0 ? io_seconds : std::chrono::duration<double>(after.at - before.at).count();
  const double depth = wall > 0 ? (after.device_inflight_seconds - before.device_inflight_seconds) / wall : 0;
  out << fmt::format("  device in flight {:.1f} (mean over {:.1f} s) against the client's {}\n", depth, wall,
                     client_in_flight);
  return out.str();
}

}  // namespace ros2::bench
