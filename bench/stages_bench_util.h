// Reading the engine's read stages (ROS2_ENGINE_IO_STAGES=1, common/io_stages.h)
// from its metrics endpoint, for `ros2-bench posix --stages`: a scrape before
// and after a run, and the difference as the mean time a read spent in each
// stage and the device's mean queue depth over the run. Main thread only.
#pragma once

#include <array>
#include <chrono>
#include <string>

#include "common/io_stages.h"
#include "common/status.h"

namespace ros2::bench {

// The engine's stage counters summed over its targets at one moment.
struct StageSnapshot {
  std::array<double, io_stages::kStages> seconds{};
  std::array<double, io_stages::kStages> reads{};
  double device_inflight_seconds = 0;
  std::chrono::steady_clock::time_point at;
};

// The endpoint "host:port" of the engine whose ready file is `ready_file`
// (its `metrics=` line); NotFound when it has none.
Result<std::string> EngineMetricsEndpoint(const std::string& ready_file);

// Scrapes `endpoint`; NotSupported when it has no stage counters (the
// engine was not started with ROS2_ENGINE_IO_STAGES=1).
Result<StageSnapshot> ScrapeStages(const std::string& endpoint);

// One line per stage, "  <stage> <mean us> us (<reads> reads)", and the
// device's mean depth against `client_in_flight`, for the run between the two
// snapshots: the I/Os the kernel held integrated over the run, divided by
// `io_seconds` (the time the client issued I/O; 0: the time between the
// snapshots, which also counts the client's start-up).
std::string FormatStages(const StageSnapshot& before, const StageSnapshot& after, int client_in_flight,
                         double io_seconds = 0);

}  // namespace ros2::bench
