// SpaceBudget: a byte budget several VOS stores share — in the engine, the
// space one pool may use on one engine (its size times the engine's share of
// the pool's targets), charged by every container shard of that pool.
//
// A store charges what it holds: the 4 KiB blocks of its extents and the bytes
// of its inline values (docs/vos.md, "Space accounting"). A charge that would
// take the used bytes past the limit is refused as a whole (TryCharge), so an
// update either gets all its space or none; Charge adds what a store found at
// open unconditionally (usage can then exceed a limit that shrank). Release
// returns space. All methods are thread-safe (target threads charge, shard
// openers add recovered usage, the control plane reads used()).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <limits>

namespace ros2::vos {

class SpaceBudget {
 public:
  static constexpr uint64_t kUnlimited = std::numeric_limits<uint64_t>::max();

  explicit SpaceBudget(uint64_t limit = kUnlimited) : limit_(limit) {}
  SpaceBudget(const SpaceBudget&) = delete;
  SpaceBudget& operator=(const SpaceBudget&) = delete;

  // Charges `bytes` unless that would take used() past limit(); false (and
  // nothing charged) otherwise.
  bool TryCharge(uint64_t bytes) {
    const uint64_t limit = limit_.load(std::memory_order_relaxed);
    uint64_t used = used_.load(std::memory_order_relaxed);
    do {
      if (used > limit || bytes > limit - used) return false;
    } while (!used_.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
    return true;
  }
  // Charges `bytes` whatever the limit (space a store already holds).
  void Charge(uint64_t bytes) { used_.fetch_add(bytes, std::memory_order_relaxed); }
  // Returns `bytes`. REQUIRES: they were charged.
  void Release(uint64_t bytes) {
    uint64_t used = used_.load(std::memory_order_relaxed);
    while (!used_.compare_exchange_weak(used, used - std::min(used, bytes), std::memory_order_relaxed)) {
    }
  }

  void set_limit(uint64_t limit) { limit_.store(limit, std::memory_order_relaxed); }
  uint64_t limit() const { return limit_.load(std::memory_order_relaxed); }
  uint64_t used() const { return used_.load(std::memory_order_relaxed); }
  uint64_t free() const {
    const uint64_t l = limit(), u = used();
    return u >= l ? 0 : l - u;
  }

 private:
  std::atomic<uint64_t> limit_;
  std::atomic<uint64_t> used_{0};
};

}  // namespace ros2::vos
