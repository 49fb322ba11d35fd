// Agent: the server side of offload mode (docs/agent.md). Listens on a Unix
// SOCK_SEQPACKET socket, identifies each connecting host process by
// SO_PEERCRED, maps it to a tenant of the config, validates the memfd and
// eventfds of its hello, maps the region and starts a Session for it. One
// libros2 Client (one transport context) per tenant, made for the tenant's
// first session and destroyed after its last one closed. Finished sessions
// (host gone, protocol error) are reaped by the accept loop within
// kReapInterval.
//
// Threads: Run() is the accept loop (one thread); each Session has its own.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "agent/agent_config.h"
#include "agent/session.h"
#include "common/status.h"
#include "metrics/exporter.h"

namespace ros2::agent {

class Agent {
 public:
  static constexpr std::chrono::milliseconds kReapInterval{100};
  static constexpr std::chrono::milliseconds kHelloTimeout{2000};  // a connection's hello must come within
  static constexpr size_t kMaxPendingConnections = 64;

  // Binds and listens (a stale socket file is replaced; a live agent on it is
  // an error).
  static Result<std::unique_ptr<Agent>> Start(const AgentConfig& config);
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // Accepts and reaps until `stop_fd` (an eventfd or signalfd) is readable;
  // then stops every session.
  void Run(int stop_fd);
  std::string ReadyLine() const;
  // The status document (JSON): sessions with pid, uid, tenant, mounts, completions.
  std::string StatusJson() const;
  // The Prometheus families (agent_metrics.cc): per tenant, the reaped
  // sessions' counts plus the live ones'. Any thread.
  std::vector<prometheus::MetricFamily> CollectMetrics() const;

 private:
  explicit Agent(AgentConfig config) : config_(std::move(config)) {}
  void Accept();
  void HandleHello(int fd);
  // Applies a kQos request (JSON); the error text on failure.
  Status ApplyQos(std::string_view request);
  void Reap();
  Result<std::shared_ptr<TenantClient>> AcquireTenant(const TenantMapping& t);

  AgentConfig config_;
  struct PendingConnection {
    int fd = -1;
    std::chrono::steady_clock::time_point deadline;
  };
  int listen_fd_ = -1;
  std::vector<PendingConnection> pending_;  // accepted, hello not yet received (accept thread only)
  uint64_t next_session_id_ = 1;
  mutable std::mutex mu_;  // sessions_ and tenants_ (StatusJson runs on the accept thread too)
  std::vector<std::unique_ptr<Session>> sessions_;
  std::map<std::string, std::shared_ptr<TenantClient>> tenants_;
  // Every configured tenant's QoS, made at start (the map never changes after).
  std::map<std::string, std::shared_ptr<TenantQos>> qos_;
  std::map<std::string, TenantTotals> retired_;        // GUARDED_BY(mu_): the counts of reaped sessions, by tenant
  std::unique_ptr<metrics::MetricsExporter> metrics_;  // with metrics.listen; stopped first
};

}  // namespace ros2::agent
