// Per-thread metrics: counters and latency histograms that one thread writes
// and any thread reads, with no lock and no shared read-modify-write.
//
// The hot path of a target thread bumps a LocalCounter with a relaxed load and
// a relaxed store of its own cache line: no lock, no `lock add`, no line
// bouncing between cores while nobody scrapes. A scrape (another thread) reads
// each value with a relaxed load and sums the threads' values; it sees each
// counter as of some recent moment, never a torn value.
//
// Thread-safety: Add()/Observe() from the one owning thread only; Read() and
// Snapshot() from any thread.
#pragma once

#include <array>
#include <atomic>
#include <bit>
#include <cstdint>

namespace ros2::metrics {

// A monotonic counter with one writer.
class LocalCounter {
 public:
  void Add(uint64_t n = 1) { v_.store(v_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed); }
  uint64_t Read() const { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> v_{0};
};

// A value with one writer that replaces it (a level, or a total the writer
// recomputes now and then).
class LocalGauge {
 public:
  void Set(uint64_t v) { v_.store(v, std::memory_order_relaxed); }
  uint64_t Read() const { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> v_{0};
};

// A latency histogram with one writer: power-of-two buckets from 4.096 us
// (bucket 0: at most 4096 ns) to 4.3 s (bucket 20), then +Inf.
class LatencyHistogram {
 public:
  static constexpr int kFiniteBuckets = 21;
  static constexpr int kBuckets = kFiniteBuckets + 1;  // the last one is +Inf
  static constexpr int kFirstShift = 12;               // bucket 0's bound: 2^12 ns

  // The upper bound of finite bucket `i`, in seconds (what Prometheus's `le` says).
  static constexpr double UpperBoundSeconds(int i) {
    return static_cast<double>(uint64_t{1} << (kFirstShift + i)) * 1e-9;
  }

  // The bucket of a latency of `nanos` nanoseconds.
  static int BucketOf(uint64_t nanos) {
    const int b = nanos <= (uint64_t{1} << kFirstShift) ? 0 : std::bit_width((nanos - 1) >> kFirstShift);
    return b < kFiniteBuckets ? b : kFiniteBuckets;
  }

  void Observe(uint64_t nanos) {
    auto& bucket = buckets_[static_cast<size_t>(BucketOf(nanos))];
    bucket.store(bucket.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    sum_nanos_.store(sum_nanos_.load(std::memory_order_relaxed) + nanos, std::memory_order_relaxed);
  }

  // Counts per bucket (not cumulative) and the sum, summed over threads by AddTo.
  struct Snapshot {
    std::array<uint64_t, kBuckets> buckets{};
    uint64_t sum_nanos = 0;
    uint64_t Count() const {
      uint64_t n = 0;
      for (uint64_t b : buckets) n += b;
      return n;
    }
  };
  void AddTo(Snapshot* s) const {
    for (size_t i = 0; i < buckets_.size(); ++i) s->buckets[i] += buckets_[i].load(std::memory_order_relaxed);
    s->sum_nanos += sum_nanos_.load(std::memory_order_relaxed);
  }

 private:
  std::array<std::atomic<uint64_t>, kBuckets> buckets_{};
  std::atomic<uint64_t> sum_nanos_{0};
};

}  // namespace ros2::metrics
