// The engine's Prometheus families (docs/observability.md), read at scrape
// time from its targets' TargetMetrics and its pool space table.
//
// CollectEngineMetrics runs on the exporter's thread: it reads each target's
// per-thread counters with relaxed loads (target_metrics.h) and the pool table
// under its own lock, and never touches a target's private state.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <prometheus/metric_family.h>

#include "engine/pool_space.h"
#include "engine/target.h"

namespace ros2::engine {

struct EngineMetricsSource {
  std::string engine_id;
  std::string transport;  // the resolved transport kind ("shm", "tcp", "rdma")
  const std::vector<std::unique_ptr<Target>>* targets = nullptr;
  PoolSpaceTable* pools = nullptr;
  bool io_stages = false;  // the targets time their reads' stages (ros2_engine_io_stage_*)
};

std::vector<prometheus::MetricFamily> CollectEngineMetrics(const EngineMetricsSource& source);

}  // namespace ros2::engine
