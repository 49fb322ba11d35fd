#include "engine/engine_metrics.h"

#include "metrics/families.h"

namespace ros2::engine {
namespace {

using metrics::Labels;

double Value(const metrics::LocalCounter& c) {
  return static_cast<double>(c.Read());
}

// One target's operation, refusal and in-flight samples.
void AddTarget(const TargetMetrics& t, const Labels& target, std::vector<prometheus::MetricFamily>* f) {
  for (size_t k = 0; k < kOpKinds; ++k) {
    Labels kind = target;
    kind.emplace_back("kind", std::string(kOpKindNames[k]));
    const TargetMetrics::Op& op = t.op[k];
    metrics::AddCounter(&(*f)[0], kind, Value(op.completed));
    metrics::AddCounter(&(*f)[1], kind, Value(op.failed));
    if (k == static_cast<size_t>(OpKind::kUpdate) || k == static_cast<size_t>(OpKind::kFetch)) {
      metrics::AddCounter(&(*f)[2], kind, Value(op.bytes));
    }
    metrics::LatencyHistogram::Snapshot s;
    op.latency.AddTo(&s);
    metrics::AddHistogram(&(*f)[3], kind, s);
  }
  for (size_t r = 0; r < kRefusals; ++r) {
    Labels reason = target;
    reason.emplace_back("reason", std::string(kRefusalNames[r]));
    metrics::AddCounter(&(*f)[4], reason, Value(t.refused[r]));
  }
  // Read the finished count first: a request finishing between the two loads
  // then shows as still in flight, never as a negative count.
  const double finished = Value(t.requests_finished);
  const double released = Value(t.bytes_released);
  metrics::AddGauge(&(*f)[5], target, Value(t.requests_started) - finished);
  metrics::AddGauge(&(*f)[6], target, Value(t.bytes_reserved) - released);
  auto gauge = [](const metrics::LocalGauge& g) { return static_cast<double>(g.Read()); };
  metrics::AddCounter(&(*f)[7], target, gauge(t.write_stops));
  metrics::AddCounter(&(*f)[8], target, gauge(t.write_slowdowns));
  metrics::AddGauge(&(*f)[9], target, gauge(t.running_compactions));
  metrics::AddGauge(&(*f)[10], target, gauge(t.pending_compaction_bytes));
  metrics::AddCounter(&(*f)[11], target, gauge(t.uring_submits));
  metrics::AddCounter(&(*f)[12], target, gauge(t.uring_sqes));
  metrics::AddCounter(&(*f)[13], target, Value(t.checksum_errors));
}

// The connections a target's worker serves, one sample per transport.
void AddConnections(const Target& t, const Labels& target, prometheus::MetricFamily* f) {
  const transport::ServedConnections c = t.served_connections();
  const std::pair<const char*, uint64_t> by_transport[] = {{"shm", c.shm}, {"tcp", c.tcp}, {"rdma", c.rdma}};
  for (const auto& [name, n] : by_transport) {
    Labels labels = target;
    labels.emplace_back("transport", name);
    metrics::AddGauge(f, labels, static_cast<double>(n));
  }
}

// The read stages (common/io_stages.h) of every target, and the device depth.
void AddStages(const EngineMetricsSource& source, std::vector<prometheus::MetricFamily>* f) {
  auto seconds = metrics::CounterFamily("ros2_engine_io_stage_seconds_total",
                                        "Time reads spent in each stage inside the target (debug, io_stages).");
  auto reads = metrics::CounterFamily("ros2_engine_io_stage_reads_total", "Reads timed in each stage (debug, io_stages).");
  auto depth = metrics::CounterFamily(
      "ros2_engine_device_inflight_seconds_total",
      "I/Os the kernel held, integrated over time: its rate is the mean device queue depth (debug, io_stages).");
  for (const auto& target : *source.targets) {
    const io_stages::StageSet& s = target->metrics().stages;
    const Labels labels{{"engine", source.engine_id}, {"target", std::to_string(target->index())}};
    for (size_t i = 0; i < io_stages::kStages; ++i) {
      Labels stage = labels;
      stage.emplace_back("stage", std::string(io_stages::kStageNames[i]));
      metrics::AddCounter(&seconds, stage, static_cast<double>(s.nanos[i].load(std::memory_order_relaxed)) * 1e-9);
      metrics::AddCounter(&reads, stage, static_cast<double>(s.count[i].load(std::memory_order_relaxed)));
    }
    metrics::AddCounter(&depth, labels, static_cast<double>(s.device_inflight_ns.load(std::memory_order_relaxed)) * 1e-9);
  }
  f->push_back(std::move(seconds));
  f->push_back(std::move(reads));
  f->push_back(std::move(depth));
}

}  // namespace

std::vector<prometheus::MetricFamily> CollectEngineMetrics(const EngineMetricsSource& source) {
  std::vector<prometheus::MetricFamily> f;
  f.push_back(metrics::CounterFamily("ros2_engine_ops_total", "Object operations a target completed, by kind."));
  f.push_back(metrics::CounterFamily("ros2_engine_op_errors_total",
                                     "Object operations a target completed with an error, by kind."));
  f.push_back(
      metrics::CounterFamily("ros2_engine_io_bytes_total", "Payload bytes a target wrote (update) or read (fetch)."));
  f.push_back(metrics::HistogramFamily("ros2_engine_op_latency_seconds",
                                       "Service time of object operations on a target, from admission to reply."));
  f.push_back(metrics::CounterFamily("ros2_engine_refusals_total",
                                     "Requests a target refused before running them, by reason."));
  f.push_back(metrics::GaugeFamily("ros2_engine_requests_in_flight", "Requests a target is running."));
  f.push_back(
      metrics::GaugeFamily("ros2_engine_bytes_in_flight", "Buffer bytes the requests a target is running hold."));
  // VOS health, summed over the target's open shards (refreshed about once a second).
  f.push_back(metrics::CounterFamily("ros2_engine_rocksdb_write_stops_total",
                                     "RocksDB writes stopped by a stall (open shards of the target)."));
  f.push_back(metrics::CounterFamily("ros2_engine_rocksdb_write_slowdowns_total",
                                     "RocksDB writes slowed down by a stall (open shards of the target)."));
  f.push_back(metrics::GaugeFamily("ros2_engine_rocksdb_running_compactions", "RocksDB compactions running now."));
  f.push_back(metrics::GaugeFamily("ros2_engine_rocksdb_pending_compaction_bytes",
                                   "RocksDB's estimate of the bytes compaction must rewrite."));
  f.push_back(metrics::CounterFamily("ros2_engine_uring_submits_total",
                                     "io_uring_enter calls that submitted I/O (nvme shards)."));
  f.push_back(metrics::CounterFamily("ros2_engine_uring_sqes_total",
                                     "I/Os those calls submitted; divided by the submits: the batch size."));
  f.push_back(metrics::CounterFamily("ros2_engine_checksum_errors_total",
                                     "Fetches a target answered with Corruption: stored data failed its checksum."));
  auto connections = metrics::GaugeFamily(
      "ros2_engine_connections", "Client connections a target serves now, by the transport of their lanes.");
  const Labels engine{{"engine", source.engine_id}};
  for (const auto& target : *source.targets) {
    Labels labels = engine;
    labels.emplace_back("target", std::to_string(target->index()));
    AddTarget(target->metrics(), labels, &f);
    AddConnections(*target, labels, &connections);
  }
  f.push_back(std::move(connections));
  if (source.io_stages) AddStages(source, &f);
  auto used =
      metrics::GaugeFamily("ros2_engine_pool_space_used_bytes", "Bytes a pool's container shards hold on this engine.");
  auto free = metrics::GaugeFamily("ros2_engine_pool_space_free_bytes",
                                   "Bytes a pool may still write on this engine (its share of the pool size).");
  for (const PoolSpaceTable::Space& s : source.pools->Snapshot()) {
    Labels labels = engine;
    labels.emplace_back("pool", s.pool.ToString());
    metrics::AddGauge(&used, labels, static_cast<double>(s.used));
    if (s.limit > 0) metrics::AddGauge(&free, labels, static_cast<double>(s.limit > s.used ? s.limit - s.used : 0));
  }
  f.push_back(std::move(used));
  f.push_back(std::move(free));
  auto info = metrics::GaugeFamily("ros2_engine_info", "Always 1: the engine's identity, transport and targets.");
  Labels labels = engine;
  labels.emplace_back("transport", source.transport);
  labels.emplace_back("targets", std::to_string(source.targets->size()));
  metrics::AddGauge(&info, labels, 1);
  f.push_back(std::move(info));
  return f;
}

}  // namespace ros2::engine
