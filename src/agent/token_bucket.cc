// Token buckets for the agent's per-tenant QoS.
#include "agent/token_bucket.h"

#include <algorithm>
#include <cmath>

namespace ros2::agent {

int64_t SteadyNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void TokenBucket::Refill(int64_t now_ns) {
  if (now_ns > last_ns_) {
    tokens_ = std::min(static_cast<double>(burst_),
                       tokens_ + static_cast<double>(rate_) * static_cast<double>(now_ns - last_ns_) / 1e9);
  }
  last_ns_ = std::max(last_ns_, now_ns);
}

void TokenBucket::SetRate(uint64_t rate, int64_t now_ns) {
  if (rate_ != 0) Refill(now_ns);
  const bool was_unlimited = rate_ == 0;
  rate_ = rate;
  burst_ = rate == 0 ? 0 : DefaultBurst(rate);
  last_ns_ = now_ns;
  // A bucket that starts limiting starts full; one that changes keeps its
  // balance (debt included) up to the new burst.
  tokens_ = was_unlimited ? static_cast<double>(burst_) : std::min(tokens_, static_cast<double>(burst_));
}

std::chrono::nanoseconds TokenBucket::WaitFor(uint64_t n, int64_t now_ns) {
  if (rate_ == 0) return std::chrono::nanoseconds(0);
  Refill(now_ns);
  const double need = static_cast<double>(std::min(n, burst_));
  if (tokens_ >= need) return std::chrono::nanoseconds(0);
  const double ns = std::ceil((need - tokens_) * 1e9 / static_cast<double>(rate_));
  return std::chrono::nanoseconds(std::max<int64_t>(1, static_cast<int64_t>(ns)));
}

TenantQos::TenantQos(QosLimits limits, QosClock clock) : clock_(std::move(clock)), limits_(limits) {
  const int64_t now = clock_();
  bytes_.SetRate(limits.bandwidth, now);
  ios_.SetRate(limits.iops, now);
}

std::chrono::nanoseconds TenantQos::TryAcquire(uint64_t bytes, uint64_t ios) {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t now = clock_();
  auto wait = std::max(bytes_.WaitFor(bytes, now), ios_.WaitFor(ios, now));
  if (wait.count() > 0) return wait;
  bytes_.Take(bytes);
  ios_.Take(ios);
  bytes_served_ += bytes;
  ios_served_ += ios;
  return std::chrono::nanoseconds(0);
}

void TenantQos::SetLimits(QosLimits limits) {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t now = clock_();
  bytes_.SetRate(limits.bandwidth, now);
  ios_.SetRate(limits.iops, now);
  limits_ = limits;
}

QosLimits TenantQos::limits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return limits_;
}

uint64_t TenantQos::bytes_served() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_served_;
}

uint64_t TenantQos::ios_served() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ios_served_;
}

}  // namespace ros2::agent
