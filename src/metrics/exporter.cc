#include "metrics/exporter.h"

#include <atomic>
#include <charconv>
#include <exception>
#include <thread>

#include <fmt/format.h>
#include <prometheus/collectable.h>
#include <prometheus/exposer.h>

#include "metrics/scrape.h"

namespace ros2::metrics {
namespace {

// Splits "host:port" / "[v6]:port"; false when malformed.
bool SplitHostPort(std::string_view listen, std::string_view* host, uint32_t* port) {
  const size_t colon = listen.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == listen.size()) return false;
  *host = listen.substr(0, colon);
  if (host->front() == '[' && host->back() != ']') return false;
  const std::string_view digits = listen.substr(colon + 1);
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), *port);
  return ec == std::errc() && end == digits.data() + digits.size() && *port <= 65535;
}

}  // namespace

Status CheckListenAddress(std::string_view listen, std::string_view key) {
  std::string_view host;
  uint32_t port = 0;
  if (!SplitHostPort(listen, &host, &port)) {
    return Status::InvalidArgument(
        fmt::format("{}: '{}' is not host:port (e.g. 127.0.0.1:9464, or port 0 for any free port)", key, listen));
  }
  return Status::Ok();
}

class MetricsExporter::Collector : public prometheus::Collectable {
 public:
  explicit Collector(CollectFn fn) : fn_(std::move(fn)) {}
  std::vector<prometheus::MetricFamily> Collect() const override { return fn_(); }

 private:
  CollectFn fn_;
};

Result<std::unique_ptr<MetricsExporter>> MetricsExporter::Start(std::string_view listen, CollectFn collect) {
  ROS2_RETURN_IF_ERROR(CheckListenAddress(listen, "metrics.listen"));
  std::string_view host;
  uint32_t port = 0;
  SplitHostPort(listen, &host, &port);
  std::unique_ptr<MetricsExporter> e(new MetricsExporter());
  try {
    // Two request threads: a scrape is short, and Prometheus scrapes one at a
    // time. civetweb gives each connection a thread until its request has
    // arrived, and by default waits 30 s for it: two idle (or trickling)
    // connections would hold the endpoint that long. A request has
    // kRequestTimeoutMs from its first byte to its last (civetweb's
    // request_timeout_ms bounds the whole read, not each byte); headers over
    // civetweb's 16 KiB limit are refused without reading them all.
    e->exposer_ = std::make_unique<prometheus::Exposer>(
        std::vector<std::string>{"listening_ports", std::string(listen), "num_threads", "2", "request_timeout_ms",
                                 std::to_string(kRequestTimeoutMs)});
  } catch (const std::exception& ex) {
    return Status::IOError(fmt::format("metrics.listen {}: cannot listen: {}", listen, ex.what()));
  }
  const std::vector<int> ports = e->exposer_->GetListeningPorts();
  if (ports.empty()) return Status::IOError(fmt::format("metrics.listen {}: no listening port", listen));
  e->address_ = fmt::format("{}:{}", host, ports.front());
  e->collector_ = std::make_shared<Collector>(std::move(collect));
  e->exposer_->RegisterCollectable(e->collector_);
  return e;
}

MetricsExporter::~MetricsExporter() {
  if (!exposer_) return;
  if (collector_) exposer_->RemoveCollectable(collector_);  // no collect runs after this returns
  // civetweb's accept thread notices the stop only when its poll returns (a
  // 2 s quantum): connections to the listener wake it, so stopping takes
  // milliseconds instead.
  std::atomic<bool> stopped{false};
  std::thread waker([this, &stopped] {
    while (!stopped.load()) {
      (void)HttpGet(address_, "/", std::chrono::milliseconds(20));
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  exposer_.reset();  // joins the civetweb threads
  stopped.store(true);
  waker.join();
}

}  // namespace ros2::metrics
