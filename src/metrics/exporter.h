// MetricsExporter: a process's Prometheus endpoint (pull model).
//
// Serves GET /metrics on `metrics.listen` (host:port, port 0: any free port)
// with prometheus-cpp's Exposer (a civetweb thread pool). At each scrape it
// calls the process's collect function on the exposer's thread: that function
// reads the per-thread counters (local_metrics.h) and returns the families
// (families.h). Nothing runs between scrapes.
//
// Owned by the process's top object (Engine, Agent); created once at start and
// destroyed before what the collect function reads. address() is safe from any
// thread.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <prometheus/metric_family.h>

#include "common/status.h"

namespace prometheus {
class Exposer;
}

namespace ros2::metrics {

// InvalidArgument, naming `key`, unless `listen` is "host:port" with a port in
// 0..65535 and a non-empty host ("127.0.0.1:9464", "[::1]:0", "0.0.0.0:9464").
Status CheckListenAddress(std::string_view listen, std::string_view key);

class MetricsExporter {
 public:
  // How long a client may take to send one whole request (civetweb's
  // request_timeout_ms); then its connection is closed.
  static constexpr int kRequestTimeoutMs = 5000;
  using CollectFn = std::function<std::vector<prometheus::MetricFamily>()>;

  // Binds `listen` and starts serving; IOError naming the address when it
  // cannot be bound.
  static Result<std::unique_ptr<MetricsExporter>> Start(std::string_view listen, CollectFn collect);
  ~MetricsExporter();
  MetricsExporter(const MetricsExporter&) = delete;
  MetricsExporter& operator=(const MetricsExporter&) = delete;

  // "host:port" as bound (the real port when `listen` asked for port 0).
  const std::string& address() const { return address_; }

 private:
  MetricsExporter() = default;
  class Collector;
  std::shared_ptr<Collector> collector_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::string address_;
};

}  // namespace ros2::metrics
