// SessionMetrics: what one agent session thread counts for the agent's
// Prometheus endpoint (agent_metrics.cc, docs/observability.md).
//
// Written only by the session's thread (LocalCounter: a relaxed load and store,
// no lock or shared atomic per submission); read by the exporter's thread. When
// a session is reaped its counts are added to its tenant's TenantTotals (under
// the agent's lock) so the tenant's counters never go backwards.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include "metrics/local_metrics.h"

namespace ros2::agent {

struct SessionMetrics {
  metrics::LocalCounter reads;
  metrics::LocalCounter writes;
  metrics::LocalCounter other_ops;        // metadata and namespace submissions, sync
  metrics::LocalCounter failed;           // of all of them: completed with an error
  metrics::LocalCounter read_bytes;       // bytes reads returned
  metrics::LocalCounter written_bytes;    // bytes writes stored
  metrics::LocalCounter throttled;        // times a submission waited for the tenant's QoS tokens
  metrics::LocalCounter throttled_nanos;  // the waits the QoS asked for
  std::atomic<uint32_t> ring_depth{0};    // submissions waiting in the ring at the thread's last look

  void Throttled(std::chrono::nanoseconds wait) {
    throttled.Add();
    throttled_nanos.Add(static_cast<uint64_t>(wait.count()));
  }
};

// A tenant's counts: the reaped sessions' plus, at scrape time, the live ones'.
struct TenantTotals {
  uint64_t reads = 0, writes = 0, other_ops = 0, failed = 0;
  uint64_t read_bytes = 0, written_bytes = 0, throttled = 0, throttled_nanos = 0;
  uint64_t ring_depth = 0;  // a gauge: live sessions only
  uint64_t sessions = 0;    // a gauge: live sessions only
  void AddCounters(const SessionMetrics& m) {
    reads += m.reads.Read();
    writes += m.writes.Read();
    other_ops += m.other_ops.Read();
    failed += m.failed.Read();
    read_bytes += m.read_bytes.Read();
    written_bytes += m.written_bytes.Read();
    throttled += m.throttled.Read();
    throttled_nanos += m.throttled_nanos.Read();
  }
};

}  // namespace ros2::agent
