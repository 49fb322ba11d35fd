// TokenBucket and TenantQos: the per-tenant rate limits of the agent
// (docs/agent.md, "QoS"). A bucket holds up to `burst` tokens and refills at
// `rate` tokens per second; a request of n tokens passes once the bucket holds
// min(n, burst) of them and then takes all n (the balance may go negative, so
// a request larger than the burst still passes and the ones after it pay the
// debt: the long-run rate stays `rate`). Rate 0 means unlimited. The clock is
// injected (nanoseconds, monotonic) so the unit tests drive time themselves.
//
// TenantQos pairs a bytes/s bucket with an I/Os-per-second bucket, shared by
// all sessions of one tenant; it is thread-safe (one mutex) and counts what
// it let through.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>

namespace ros2::agent {

using QosClock = std::function<int64_t()>;  // monotonic nanoseconds
int64_t SteadyNanos();

class TokenBucket {
 public:
  // The burst of a rate: a tenth of a second's worth, at least one token.
  static uint64_t DefaultBurst(uint64_t rate) { return rate / 10 > 0 ? rate / 10 : 1; }

  explicit TokenBucket(uint64_t rate = 0, int64_t now_ns = 0) { SetRate(rate, now_ns); }
  // Changes the rate (0 = unlimited) and the burst (DefaultBurst) from `now_ns`
  // on; tokens accrued at the old rate are kept up to the new burst.
  void SetRate(uint64_t rate, int64_t now_ns);
  uint64_t rate() const { return rate_; }
  uint64_t burst() const { return burst_; }
  // Zero when n tokens may be taken now, else how long until they may.
  std::chrono::nanoseconds WaitFor(uint64_t n, int64_t now_ns);
  // Takes n tokens (after WaitFor returned zero).
  void Take(uint64_t n) {
    if (rate_ != 0) tokens_ -= static_cast<double>(n);
  }
  double tokens() const { return tokens_; }

 private:
  void Refill(int64_t now_ns);
  uint64_t rate_ = 0;
  uint64_t burst_ = 0;
  double tokens_ = 0;
  int64_t last_ns_ = 0;
};

struct QosLimits {
  uint64_t bandwidth = 0;  // bytes per second, 0 = unlimited
  uint64_t iops = 0;       // I/Os per second, 0 = unlimited
};

class TenantQos {
 public:
  explicit TenantQos(QosLimits limits = {}, QosClock clock = SteadyNanos);
  // Zero when an I/O of `bytes` may run now (its tokens are then taken and
  // it is counted as served), else how long to wait before asking again.
  std::chrono::nanoseconds TryAcquire(uint64_t bytes, uint64_t ios = 1);
  void SetLimits(QosLimits limits);
  QosLimits limits() const;
  uint64_t bytes_served() const;
  uint64_t ios_served() const;

 private:
  QosClock clock_;
  mutable std::mutex mu_;
  QosLimits limits_;
  TokenBucket bytes_;
  TokenBucket ios_;
  uint64_t bytes_served_ = 0;
  uint64_t ios_served_ = 0;
};

}  // namespace ros2::agent
