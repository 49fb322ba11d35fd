// The agent's Prometheus families (docs/observability.md): per tenant,
// operations, bytes, QoS throttling, ring depth and sessions.
#include <map>
#include <string>

#include "agent/agent.h"
#include "metrics/families.h"

namespace ros2::agent {

std::vector<prometheus::MetricFamily> Agent::CollectMetrics() const {
  std::map<std::string, TenantTotals> totals;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& t : config_.tenants) totals[t.name];  // every configured tenant, even without a session
    for (const auto& [name, reaped] : retired_) totals[name] = reaped;
    for (const auto& s : sessions_) {
      TenantTotals& t = totals[s->identity().tenant];
      t.AddCounters(s->metrics());
      t.ring_depth += s->metrics().ring_depth.load(std::memory_order_relaxed);
      if (!s->finished()) ++t.sessions;
    }
  }
  auto ops = metrics::CounterFamily("ros2_agent_ops_total", "Submissions a tenant's sessions executed, by kind.");
  auto failed = metrics::CounterFamily("ros2_agent_op_errors_total", "Submissions completed with an error.");
  auto bytes =
      metrics::CounterFamily("ros2_agent_io_bytes_total", "Bytes a tenant's reads returned and writes stored.");
  auto throttled = metrics::CounterFamily("ros2_agent_qos_throttled_total",
                                          "Times a tenant's submission waited for its QoS tokens.");
  auto throttled_s = metrics::CounterFamily("ros2_agent_qos_throttled_seconds_total",
                                            "Waits the tenant's QoS asked of its sessions, summed.");
  auto depth = metrics::GaugeFamily("ros2_agent_ring_depth", "Submissions waiting in the tenant's rings.");
  auto sessions = metrics::GaugeFamily("ros2_agent_sessions", "Open host sessions of the tenant.");
  for (const auto& [name, t] : totals) {
    const metrics::Labels tenant{{"tenant", name}};
    metrics::AddCounter(&ops, {{"tenant", name}, {"kind", "read"}}, static_cast<double>(t.reads));
    metrics::AddCounter(&ops, {{"tenant", name}, {"kind", "write"}}, static_cast<double>(t.writes));
    metrics::AddCounter(&ops, {{"tenant", name}, {"kind", "other"}}, static_cast<double>(t.other_ops));
    metrics::AddCounter(&failed, tenant, static_cast<double>(t.failed));
    metrics::AddCounter(&bytes, {{"tenant", name}, {"kind", "read"}}, static_cast<double>(t.read_bytes));
    metrics::AddCounter(&bytes, {{"tenant", name}, {"kind", "write"}}, static_cast<double>(t.written_bytes));
    metrics::AddCounter(&throttled, tenant, static_cast<double>(t.throttled));
    metrics::AddCounter(&throttled_s, tenant, static_cast<double>(t.throttled_nanos) * 1e-9);
    metrics::AddGauge(&depth, tenant, static_cast<double>(t.ring_depth));
    metrics::AddGauge(&sessions, tenant, static_cast<double>(t.sessions));
  }
  return {ops, failed, bytes, throttled, throttled_s, depth, sessions};
}

}  // namespace ros2::agent
