// TargetMetrics: what one target thread counts for the engine's Prometheus
// endpoint (engine_metrics.h, docs/observability.md).
//
// Written only by its target's thread (LocalCounter, LatencyHistogram: a
// relaxed load and store each, no lock and no shared atomic on the request
// path), read by the exporter's thread at scrape time. Gauges that are a
// difference of two monotonic counts (requests and bytes in flight) are kept
// as the two counts, so the writer never decrements.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "common/io_stages.h"
#include "metrics/local_metrics.h"

namespace ros2::engine {

// The operations the target reports by kind ("list" and "query" are both
// enumeration: neither moves bulk data).
enum class OpKind : uint8_t { kUpdate = 0, kFetch, kPunch, kEnumerate };
inline constexpr size_t kOpKinds = 4;
inline constexpr std::array<std::string_view, kOpKinds> kOpKindNames{"update", "fetch", "punch", "enumerate"};

// Why a target refused a request before running it.
enum class Refusal : uint8_t {
  kCapability = 0,  // no, a bad, an expired or a revoked capability, or too few rights
  kBudget,          // the in-flight budget (limits.*_in_flight) is spent: Busy
  kSpace,           // the pool's space on this engine is used up: NoSpace
  kStaleMap,        // made with an older pool map version than the engine's (StaleMap), or addressed to another target
  kLimit,           // over limits.max_io_size or limits.max_epoch_drift
};
inline constexpr size_t kRefusals = 5;
inline constexpr std::array<std::string_view, kRefusals> kRefusalNames{"capability", "budget", "space", "stale_map",
                                                                       "limit"};

struct TargetMetrics {
  struct Op {
    metrics::LocalCounter completed;  // replied, with any status
    metrics::LocalCounter failed;     // of those: replied with an error
    metrics::LocalCounter bytes;      // payload bytes moved (update: written, fetch: read)
    metrics::LatencyHistogram latency;
  };
  std::array<Op, kOpKinds> op;
  std::array<metrics::LocalCounter, kRefusals> refused;
  // Fetches answered with Corruption: data this target stored failed its
  // checksum when read (a bit flipped on the disk or in memory). A replicated
  // object's client then reads another copy.
  metrics::LocalCounter checksum_errors;
  // Requests admitted to the in-flight budget and those replied to, and the
  // buffer bytes they reserved and released: in flight = started - finished.
  metrics::LocalCounter requests_started;
  metrics::LocalCounter requests_finished;
  metrics::LocalCounter bytes_reserved;
  metrics::LocalCounter bytes_released;

  // The open shards' VOS health (vos::HealthInfo), summed about once a second.
  metrics::LocalGauge write_stops;
  metrics::LocalGauge write_slowdowns;
  metrics::LocalGauge running_compactions;
  metrics::LocalGauge pending_compaction_bytes;
  metrics::LocalGauge uring_submits;
  metrics::LocalGauge uring_sqes;

  // Where reads wait (common/io_stages.h); written only with env io_stages.
  io_stages::StageSet stages;

  void Refuse(Refusal why) { refused[static_cast<size_t>(why)].Add(); }
  Op& Of(OpKind kind) { return op[static_cast<size_t>(kind)]; }
};

}  // namespace ros2::engine
