// Reading the engine's read stages (ROS2_ENGINE_IO_STAGES=1, common/io_stages.h)
// from its metrics endpoint, for `ros2-bench posix --stages`: a scrape before
// and after a run, and the difference as the mean time a read spent in each
// stage and the device's mean queue depth over the run. Main thread only.
#pragma once

#include <sys/types.h>

#include <array>
#include <chrono>
#include <map>
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

// One line per stage, "  <stage> <mean us> us (<reads> reads)", then where
// the client's `client_in_flight` reads were on average over the run between
// the two snapshots: in the engine (its `total` stage integrated, i.e. the
// read rate x the mean total: Little's law), at the device (the I/Os the
// kernel held, integrated) and outside the engine (the rest: in the client
// process, fio, or the transport between them, including a request's wait
// for the target's next pass). Rates are over `io_seconds` (the time the
// client issued I/O; 0: the time between the snapshots, which also counts the
// client's start-up).
std::string FormatStages(const StageSnapshot& before, const StageSnapshot& after, int client_in_flight,
                         double io_seconds = 0);

// What the fio engine's event queues timed (ROS2_FIO_STAGES=<file>, one
// line per queue): "  client: ..." with the mean time from a read's
// submission to its completion callback (the client library, the transport
// both ways and the engine) and from the callback to fio taking it; empty
// when the file holds no I/O.
std::string FormatClientStages(const std::string& file);

// The scheduler's view of one thread (/proc/<pid>/task/<tid>/schedstat):
// nanoseconds on a CPU, nanoseconds runnable waiting for one, and the waits.
struct ThreadSched {
  std::string name;
  double run_ns = 0;
  double wait_ns = 0;
  double waits = 0;
};
// Every thread of `pid` whose name starts with `prefix`, by thread id (empty
// when the process is gone).
std::map<pid_t, ThreadSched> SampleThreads(pid_t pid, const std::string& prefix);
// One line per thread present in both samples: the share of `wall` seconds it
// ran and waited runnable for a CPU, and its mean wait, e.g. a target thread
// that completions wait on while it waits for a CPU.
std::string FormatThreads(const std::map<pid_t, ThreadSched>& before, const std::map<pid_t, ThreadSched>& after,
                          double wall);

}  // namespace ros2::bench
